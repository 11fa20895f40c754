"""Train/eval overlap: which benchmark tasks a model trained on, in mteb's own vocabulary
(``ModelMeta.training_datasets``, ``adapted_from``); None means unknown, never zero-shot. Where
each declaration comes from: docs/guide.md, `neobench table`, "Train/eval overlap".
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neobench.core import cards as record
from neobench.core.errors import NeobenchError

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask
    from mteb.models import ModelMeta

    from neobench.core.runs import Run

logger = logging.getLogger(__name__)

DAGGER = "†"


def registry(name: str | None) -> ModelMeta | None:
    """mteb's registry entry for a model name (offline: the registry ships with mteb), or None."""
    import mteb

    if not name:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # mteb warns about renamed models
            return mteb.get_model_meta(name, fetch_from_hf=False)
    except (KeyError, ValueError):
        return None


def finetune_declaration(
    data: dict[str, dict[str, Any]], base_name: str, base_source: str, base_path: str
) -> tuple[list[str], str | None]:
    """(training_datasets, adapted_from) of a model `neobench finetune` makes from a base model,
    from ``data`` (the card's per-dataset section, each with its ``in_domain``); a base that is a
    neobench fine-tune hands down its own declaration, a plain local folder has no mteb name."""
    tasks = set(record.in_domain_tasks(data))
    inherited = record.finetuned_model(Path(base_path))
    if inherited is not None and inherited.training_datasets is not None:
        return sorted(tasks | set(inherited.training_datasets)), inherited.adapted_from
    return sorted(tasks), base_name if base_source == "hub" else None


def meta_training(name: str | None, declared: record.OutputModel | None) -> dict[str, Any]:
    """``training_datasets`` and ``adapted_from`` of a model evaluated under ``name``: its
    fine-tuning card's declaration, else mteb's registry entry, else nothing (unknown)."""
    if declared is not None and declared.training_datasets is not None:
        return {
            "training_datasets": set(declared.training_datasets),
            "adapted_from": declared.adapted_from,
        }
    known = registry(name)
    if known is None:
        return {}
    return {"training_datasets": known.training_datasets, "adapted_from": known.adapted_from}


def read_training(meta_path: Path, name: str) -> frozenset[str] | None:
    """What a results folder's model trained on, as mteb computes it from ``model_meta.json``
    (declared datasets, the base model's, mteb's similar tasks), or None when unknown. A null
    field falls back on mteb's registry entry for the name, as mteb's leaderboard does."""
    import json

    from mteb.models import ModelMeta

    data: dict[str, Any] = {}
    if meta_path.is_file():
        try:
            data = json.loads(meta_path.read_text())
        except ValueError:
            logger.warning("%s: unreadable; training data taken as unknown", meta_path)
    declared = data.get("training_datasets")
    if declared is None:
        meta = registry(name)
    else:
        fields = {"training_datasets": set(declared), "adapted_from": data.get("adapted_from")}
        meta = ModelMeta.create_empty(overwrites=fields)
    found = meta.get_training_datasets() if meta is not None else None
    return None if found is None else frozenset(found)


def trained_on(run: Run, task_names: list[str]) -> list[str] | None:
    """The tasks of ``task_names`` the run's model trained on (in their order), None if unknown."""
    if run.training_datasets is None:
        return None
    return [t for t in task_names if t in run.training_datasets]


def zero_shot_percentage(run: Run, task_names: list[str]) -> int | None:
    """mteb's zero-shot percentage of the run over ``task_names`` (None: training unknown)."""
    if run.training_datasets is None or not task_names:
        return None
    from mteb.models import ModelMeta

    meta = ModelMeta.create_empty(overwrites={"training_datasets": set(run.training_datasets)})
    return meta.zero_shot_percentage(task_names)


@dataclass(frozen=True)
class ZeroShotSubset:
    kept: list[str]  # tasks no compared row trained on, in the benchmark's order
    dropped: dict[str, list[str]]  # dropped task -> the rows that trained on it

    def note(self) -> str:
        if not self.dropped:
            return (
                f"--zero-shot-only: no compared row trained on any of the {len(self.kept)} "
                "tasks; nothing dropped."
            )
        # Tasks trained on by the same rows are named together: one fine-tune drops several.
        groups: dict[tuple[str, ...], list[str]] = {}
        for task, rows in self.dropped.items():
            groups.setdefault(tuple(rows), []).append(task)
        named = "; ".join(
            f"{', '.join(ts)} (trained on by {', '.join(rs)})" for rs, ts in groups.items()
        )
        return (
            f"--zero-shot-only: {len(self.dropped)} task(s) dropped because a compared row "
            f"trained on them: {named}. Every column and average is over the remaining "
            f"{len(self.kept)} tasks."
        )


def zero_shot_subset(runs: dict[str, Run], tasks: list[AbsTask]) -> ZeroShotSubset:
    """The tasks that no row of ``runs`` (label -> run) trained on. A row whose training data is
    unknown could have trained on any of them: refused, naming the row."""
    unknown = [label for label, run in runs.items() if run.training_datasets is None]
    if unknown:
        raise NeobenchError(
            f"--zero-shot-only: the training data of {', '.join(unknown)} is not declared, so "
            "the tasks it trained on are unknown. Leave the row out with --models, or evaluate "
            "a model that declares them (a `neobench finetune` output, or a model mteb's "
            "registry knows, evaluated under its mteb name with --model-name)."
        )
    names = [t.metadata.name for t in tasks]
    dropped: dict[str, list[str]] = {}
    for label, run in runs.items():
        for task in trained_on(run, names) or []:
            dropped.setdefault(task, []).append(label)
    ordered = {t: dropped[t] for t in names if t in dropped}
    if len(ordered) == len(names):
        raise NeobenchError(
            f"--zero-shot-only: every one of the {len(names)} tasks was trained on by a "
            "compared row, so no task is left. Leave out --zero-shot-only, or the rows with "
            "--models."
        )
    return ZeroShotSubset([t for t in names if t not in dropped], ordered)
