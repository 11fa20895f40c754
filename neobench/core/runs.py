"""Read a results root (mteb layout + neobench run cards) into one record per evaluated run.

A run is one folder ``results/<org__model>/<revision>/[experiments/<conditions>/]``: one model
revision under one set of conditions. Unreadable files are named and skipped, never fatal.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neobench.core import cards as record
from neobench.core.errors import NeobenchError
from neobench.evaluate import units
from neobench.protocol import overlap

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

logger = logging.getLogger(__name__)

# What must match for two rows to be compared at all: how the model was evaluated. Read from the
# run cards.
EVAL_CONDITIONS = (
    "instructions",
    "instructions_sha256",
    "max_seq_length",
    "dtype",
    "benchmark",
    "mteb",
)
# How the model was trained: must match among the rows neobench fine-tuned. A row neobench did not
# fine-tune (a released model, evaluated as it is) is compared with them as "not fine-tuned".
RECIPE = "recipe"
NOT_FINETUNED = "none (not fine-tuned by neobench)"
CONDITION_FIELDS = (RECIPE, *EVAL_CONDITIONS)


@dataclass
class Run:
    model: str
    revision: str
    experiment: str | None
    folder: Path
    scores: dict[str, float] = field(default_factory=dict)  # task -> main score in [0, 1]
    conditions: dict[str, Any] = field(default_factory=dict)
    cards: dict[str, str] = field(default_factory=dict)  # run card file -> sha256[:12]
    # The mteb tasks the model trained on, as mteb computes them from model_meta.json (declared,
    # base model's, similar tasks); None = not declared, i.e. unknown (neobench/protocol/overlap.py).
    training_datasets: frozenset[str] | None = None

    @property
    def finetuned(self) -> bool:
        """Fine-tuned by `neobench finetune` (its cards name a recipe)."""
        return self.conditions.get(RECIPE) not in (None, NOT_FINETUNED)


def differences(a: Run, b: Run) -> dict[str, tuple[Any, Any]]:
    """The conditions under which ``a`` and ``b`` cannot be compared: field -> (a's, b's). The
    evaluation conditions always count; the recipe only when neobench fine-tuned both."""
    keys = [*EVAL_CONDITIONS, *([RECIPE] if a.finetuned and b.finetuned else [])]

    def value(run: Run, key: str) -> str:
        found = run.conditions.get(key)
        return UNKNOWN if found is None else str(found)  # no card and an old card: both unknown

    return {k: (value(a, k), value(b, k)) for k in keys if value(a, k) != value(b, k)}


def run_folders(root: Path) -> list[Path]:
    """Every folder that holds task results, standard and experiment ones."""
    base = root / "results"
    folders = {p.parent for p in base.glob("*/*/*.json")}
    folders |= {p.parent for p in base.glob("*/*/experiments/*/*.json")}
    return sorted(folders)


def load_runs(root: Path, tasks: list[AbsTask]) -> tuple[list[Run], list[str]]:
    """Runs under ``root`` with their benchmark-task scores, and the problems met on the way."""
    root = Path(root)
    if not (root / "results").is_dir():
        raise NeobenchError(
            f"--results {root}: no results/ folder inside. Point it at the root given to "
            "`neobench eval --results` (the folder that contains results/)."
        )
    folders = run_folders(root)
    if not folders:
        raise NeobenchError(
            f"--results {root}: results/ holds no task results yet; run `neobench eval` first."
        )
    problems: list[str] = []
    by_name = {t.metadata.name: t for t in tasks}
    runs = []
    for folder in folders:
        run = _identify(root, folder)
        for path in sorted(folder.glob("*.json")):
            if path.name == "model_meta.json" or path.stem not in by_name:
                continue
            try:
                run.scores[path.stem] = task_score(path, by_name[path.stem])
            except Exception as error:
                problems.append(
                    f"{path}: unreadable ({type(error).__name__}: {_first_line(error)}); skipped"
                )
        run.conditions, run.cards = _conditions(folder, problems)
        run.training_datasets = overlap.read_training(folder / "model_meta.json", run.model)
        runs.append(run)
    return runs, problems


def task_score(path: Path, task: AbsTask) -> float:
    """Mean main score over the task's benchmark splits and subsets (raises if one is absent)."""
    data = json.loads(path.read_text())
    values = []
    for split in task.eval_splits:
        entries = {e["hf_subset"]: e for e in data["scores"][split]}
        for subset in task.hf_subsets:
            values.append(float(entries[subset]["main_score"]))
    return sum(values) / len(values)


def units_path(folder: Path, task: str) -> Path | None:
    """The per-item units file of ``task`` in a run folder (the one holding ``<task>.json``), or
    None: a result evaluated before units existed, or with --no-predictions, has none (re-running
    the task adds it)."""
    path = units.path_for(Path(folder), task)
    return path if path.is_file() else None


def _identify(root: Path, folder: Path) -> Run:
    rel = folder.relative_to(root / "results").parts
    experiment = rel[3] if len(rel) == 4 and rel[2] == "experiments" else None
    model, revision = rel[0].replace("__", "/"), rel[1]
    meta = folder / "model_meta.json"
    if meta.is_file():
        with contextlib.suppress(ValueError):
            model = json.loads(meta.read_text()).get("name") or model
    return Run(model=model, revision=revision, experiment=experiment, folder=folder)


def _conditions(folder: Path, problems: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """Merge the conditions of a folder's run cards; a field on which they differ is 'mixed'."""
    seen: dict[str, set[str]] = {}
    cards: dict[str, str] = {}
    for path in sorted((folder / "neobench").glob("run-*.yaml")):
        try:
            card = record.read_eval_card(path)
        except Exception as error:
            problems.append(f"{path}: unreadable run card ({_first_line(error)}); skipped")
            continue
        cards[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
        for key, value in _card_conditions(card).items():
            # A card too old to record a field says so, rather than "None".
            seen.setdefault(key, set()).add(UNKNOWN if value is None else str(value))
    merged: dict[str, Any] = {}
    for key in CONDITION_FIELDS:
        values = sorted(seen.get(key, set()))
        merged[key] = (
            None if not values else values[0] if len(values) == 1 else "mixed: " + ", ".join(values)
        )
    return merged, cards


UNKNOWN = "unknown"


def _card_conditions(card: record.EvalCard) -> dict[str, Any]:
    """The CONDITION_FIELDS of one card, read from its typed fields (a renamed key fails here,
    at type-check and test time, instead of turning into None)."""
    conditions = card.conditions
    return {
        RECIPE: (card.model.recipe_sha256 or "")[:12] or NOT_FINETUNED,
        "instructions": conditions.instructions,
        "instructions_sha256": (conditions.instructions_sha256 or "")[:12] or None,
        "max_seq_length": conditions.max_seq_length,
        "dtype": conditions.dtype,
        "benchmark": card.benchmark,
        "mteb": card.mteb_version,
    }


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:160] if text else repr(error)


def load_roots(roots: list[str | Path], tasks: list[AbsTask]) -> tuple[list[Run], list[str]]:
    """The runs of several results roots together (``table --results A --results B``), and every
    problem met in any of them, in the order the roots were given."""
    runs: list[Run] = []
    problems: list[str] = []
    for root in roots:
        found, trouble = load_runs(Path(root), tasks)
        runs += found
        problems += trouble
    return runs, problems
