"""Instruction profiles (instructions/*.yaml) -> mteb prompts keyed ``Task``, ``Task-query``,
``Task-document``, so mteb's own prompt resolution does the rest. The format and where each
string goes: docs/guide.md, "Instruction profiles"; docs/recipe.md, "Instructions".
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from neobench.core.errors import NeobenchError, find_yaml, read_yaml, shipped, unknown

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

ASYMMETRIC_TYPES = frozenset(
    {"Retrieval", "Reranking", "InstructionRetrieval", "InstructionReranking"}
)
SIDES = ("query", "document")


def profiles_dir() -> Path:
    return shipped("instructions")


def yaml_names(folder: Path) -> list[str]:
    """The shipped names in ``folder`` (recipes, manifests, profiles): its YAML files' stems."""
    return sorted(p.stem for p in folder.glob("*.yaml"))


def list_profiles() -> list[str]:
    return yaml_names(profiles_dir())


@dataclass(frozen=True)
class InstructionProfile:
    """A parsed profile. ``sha256`` hashes the content that reaches the model, not the comments."""

    name: str
    source: str
    separator: str
    instructions: dict[str, str | dict[str, str]]
    aliases: dict[str, str] = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        content = {k: getattr(self, k) for k in ("separator", "instructions", "aliases")}
        canonical = json.dumps(content, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def lookup(self, task_name: str) -> str | dict[str, str] | None:
        """The instruction of a task: its own entry, else the entry its alias points to."""
        if task_name in self.instructions:
            return self.instructions[task_name]
        target = self.aliases.get(task_name)
        return self.instructions.get(target) if target else None


def load_profile(name_or_path: str) -> InstructionProfile:
    """Load a shipped profile by name (``paper``, ``authors-code``, ``none``) or a YAML file."""
    path = find_yaml(name_or_path, profiles_dir(), "instruction profile")
    data = read_yaml(path, "instruction profile") or {}
    problems = _shape_problems(data, path)
    if problems:
        raise NeobenchError(problems)
    return InstructionProfile(
        name=str(data.get("name", path.stem)),
        source=str(path.name),
        separator=data.get("separator", " "),
        instructions=dict(data.get("instructions") or {}),
        aliases=dict(data.get("aliases") or {}),
    )


def _shape_problems(data: object, path: Path) -> list[str]:
    if not isinstance(data, dict):
        return [f"{path}: a profile is a mapping with 'instructions' (and optional 'aliases')."]
    allowed = {"name", "separator", "instructions", "aliases"}
    problems = [
        f"{path}: unknown key {k!r} (allowed: {sorted(allowed)})." for k in data if k not in allowed
    ]
    instructions = data.get("instructions") or {}
    for task, value in instructions.items():
        if isinstance(value, dict):
            if set(value) - set(SIDES) or not value:
                problems.append(f"{path}: {task}: a pair must have keys 'query' and/or 'document'.")
        elif not isinstance(value, str):
            problems.append(
                f"{path}: {task}: an instruction is a string or a {{query, document}} pair."
            )
    for task, target in (data.get("aliases") or {}).items():
        if target not in instructions:
            problems.append(
                f"{path}: alias {task} -> {target!r}, but {target!r} has no instruction."
            )
    return problems


def expand(tasks: list[AbsTask]) -> list[AbsTask]:
    """Tasks whose texts are actually encoded: aggregates (CQADupstackRetrieval) -> sub-tasks."""
    out: list[AbsTask] = []
    for task in tasks:
        subtasks = getattr(task, "tasks", None)
        out.extend(expand(list(subtasks)) if subtasks else [task])
    return out


def mteb_prompts(
    profile: InstructionProfile, tasks: list[AbsTask]
) -> tuple[dict[str, str], list[str]]:
    """Prompts in mteb's key vocabulary for these tasks, and the tasks left without instruction."""
    prompts: dict[str, str] = {}
    missing: list[str] = []
    for task in expand(tasks):
        name, task_type = task.metadata.name, task.metadata.type
        value = profile.lookup(name)
        if value is None:
            if profile.instructions:
                missing.append(name)
            continue
        if isinstance(value, dict):
            for side, text in value.items():
                prompts[f"{name}-{side}"] = text + profile.separator
        elif task_type in ASYMMETRIC_TYPES:
            # Documents of a retrieval corpus stay untouched: the instruction describes the query.
            prompts[f"{name}-query"] = value + profile.separator
        else:
            prompts[name] = value + profile.separator
    return prompts, missing


def validate_profile(profile: InstructionProfile, known_tasks: set[str]) -> list[str]:
    """Problems with a profile: every instruction and alias key must name a real mteb task."""
    return [
        f"profile {profile.name!r}: {unknown('mteb task', key, known_tasks)}"
        for key in [*profile.instructions, *profile.aliases]
        if key not in known_tasks
    ]


def all_mteb_task_names() -> set[str]:
    """Every task name mteb knows, superseded and private ones included (profiles may name them):
    from the task classes mteb registers at import (instant; ``mteb.get_tasks`` takes seconds)."""
    import warnings

    import mteb

    try:
        from mteb.get_tasks import TASK_LIST

        return {cls.metadata.name for cls in TASK_LIST}
    except (ImportError, AttributeError):  # another mteb layout: the slow public path
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # mteb warns once per beta task
            tasks = mteb.get_tasks(
                exclude_superseded=False, exclude_private=False, exclude_beta=False
            )
        return {t.metadata.name for t in tasks}


@dataclass(frozen=True)
class TrainProfile:
    """A training instruction profile: the manifest's instruction keys -> instruction text."""

    name: str
    instructions: dict[str, str]
    sha256: str  # of the instructions, as the run card records it


def load_train_instructions(name_or_path: str) -> TrainProfile:
    """A training instruction profile (instructions/train/) by name or YAML file."""
    path = find_yaml(name_or_path, profiles_dir() / "train", "training instruction profile")
    data = read_yaml(path, "training instruction profile") or {}
    instructions = {str(k): str(v) for k, v in (data.get("instructions") or {}).items()}
    digest = hashlib.sha256(json.dumps(instructions, sort_keys=True).encode()).hexdigest()
    return TrainProfile(str(data.get("name", path.stem)), instructions, digest)
