"""The results folder: where every file of a run lives, which task results are complete, which
scores can be trusted, and whether a fine-tune has finished. Nothing else globs the layout (mteb's;
the tree: docs/guide.md, "Results"; the rules: docs/architecture.md, "The results model").
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neobench.core import cards

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask
    from mteb.results import TaskResult

RESULTS = "results"
EXPERIMENTS = "experiments"
CARDS = "neobench"
UNITS = "predictions"
META = "model_meta.json"

# A card records the score mteb computed from the file it wrote, exactly (YAML round-trips it).
RECORDED_TOLERANCE = 1e-9
# What a user does about a result file that is not what neobench wrote.
REWRITE = "delete it (and its units file, if any) and re-run the same `neobench eval`"


def model_folder(root: Path, model_name: str) -> Path:
    """Where mteb writes a model's results (as ModelMeta.model_name_as_path spells the name)."""
    return Path(root) / RESULTS / model_name.replace("/", "__").replace(" ", "_")


def run_folders(root: Path) -> list[Path]:
    """Every folder under ``root`` that holds task results, standard and experiment ones."""
    base = Path(root) / RESULTS
    folders = {p.parent for p in base.glob("*/*/*.json")}
    folders |= {p.parent for p in base.glob(f"*/*/{EXPERIMENTS}/*/*.json")}
    return sorted(folders)


def identity(root: Path, folder: Path) -> tuple[str, str, str | None]:
    """(model name as the folder spells it, revision, experiment or None) of a run folder."""
    rel = folder.relative_to(Path(root) / RESULTS).parts
    experiment = rel[3] if len(rel) == 4 and rel[2] == EXPERIMENTS else None
    return rel[0].replace("__", "/"), rel[1], experiment


def task_path(folder: Path, task: str) -> Path:
    """Where the result of ``task`` lives in a run folder (present or not)."""
    return Path(folder) / f"{task}.json"


def task_files(folder: Path) -> list[Path]:
    """The task result files of a run folder (``model_meta.json`` is not one)."""
    return [p for p in sorted(Path(folder).glob("*.json")) if p.name != META]


def card_paths(folder: Path) -> list[Path]:
    """The eval run cards of a run folder, oldest first (their names start with the time)."""
    return sorted((Path(folder) / CARDS).glob("run-*.yaml"))


def all_card_paths(root: Path) -> list[Path]:
    """The eval run cards of every run folder under ``root``."""
    base = Path(root) / RESULTS
    standard = base.glob(f"*/*/{CARDS}/run-*.yaml")
    return [*standard, *base.glob(f"*/*/{EXPERIMENTS}/*/{CARDS}/run-*.yaml")]


def digest(path: Path) -> str:
    """The first 16 hex digits of a file's sha256 (what run cards record of a units file)."""
    hashed = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            hashed.update(block)
    return hashed.hexdigest()[:16]


def has_units(folder: Path) -> bool:
    """Whether a run folder holds the per-item units of any task."""
    return next((Path(folder) / UNITS).glob("*.units.json"), None) is not None


def units_path(folder: Path, task: str) -> Path:
    """Where the per-item units of ``task`` live in a run folder (present or not)."""
    return Path(folder) / UNITS / f"{task}.units.json"


def units_file(folder: Path, task: str) -> Path | None:
    """The per-item units file of ``task`` in a run folder, or None (evaluated before units
    existed, or with --no-predictions)."""
    path = units_path(folder, task)
    return path if path.is_file() else None


def last_write(root: Path) -> float:
    """When a task result under ``root`` was last written (its mtime; 0.0 when none is)."""
    return max((p.stat().st_mtime for p in (Path(root) / RESULTS).rglob("*.json")), default=0.0)


def written(top: Path, tasks: list[str]) -> int:
    """How many result files of ``tasks`` exist under ``top``: progress that only grows (a Slurm
    job's), not a completeness test. os.walk, not rglob: a folder that vanishes meanwhile (an
    eval's staging folder) is skipped instead of failing."""
    wanted = {task_path(Path(), task).name for task in tasks}
    return sum(name in wanted for _, _, names in os.walk(top) for name in names)


def read_task(path: Path) -> TaskResult:
    """A task result file as mteb reads it (raises on a file mteb cannot read)."""
    from mteb.results import TaskResult

    return TaskResult.from_disk(Path(path))


def complete(result: TaskResult, task: AbsTask) -> bool:
    """Whether ``result`` holds every split and subset ``task`` asks for (in another benchmark
    the same task may ask for others)."""
    return not result.get_missing_evaluations(task)


def left_to_run(folder: Path, tasks: list[AbsTask]) -> tuple[list[AbsTask], dict[str, Path]]:
    """The tasks whose result in ``folder`` is absent or incomplete, and the result files that
    cannot be read (the caller moves them aside)."""
    left, unreadable = [], {}
    for task in tasks:
        path = task_path(folder, task.metadata.name)
        if not path.is_file():
            left.append(task)
            continue
        try:
            result = read_task(path)
        except Exception:  # any file mteb cannot read is re-run, never trusted
            unreadable[task.metadata.name] = path
            left.append(task)
            continue
        if not complete(result, task):
            left.append(task)
    return left, unreadable


def benchmark_score(scores: Mapping[str, list[dict[str, Any]]], task: AbsTask) -> float:
    """The mean main score over the task's evaluation splits and subsets (KeyError if absent)."""
    values = []
    for split in task.eval_splits:
        entries = {e["hf_subset"]: e for e in scores[split]}
        for subset in task.hf_subsets:
            values.append(float(entries[subset]["main_score"]))
    return sum(values) / len(values)


def file_score(path: Path) -> tuple[Mapping[str, list[dict[str, Any]]], float]:
    """A result file's scores (split -> entries) and its score as a run card records it
    (`TaskResult.get_score()` over everything the file holds)."""
    result = read_task(path)
    return result.scores, float(result.get_score())


def recorded_mismatch(path: Path, stored: float, recorded: float | None, card: str) -> str | None:
    """Why the score ``stored`` in ``path`` must not be shown (its writer ``card`` recorded
    ``recorded``), or None."""
    if recorded is None or (
        math.isfinite(stored) and abs(stored - float(recorded)) <= RECORDED_TOLERANCE
    ):
        return None
    return (
        f"{path}: its main score is {stored:.6f}, but the run card {card} that wrote it "
        f"recorded {float(recorded):.6f}: the file was changed after `neobench eval` wrote it, "
        f"so it is not shown as a score; {REWRITE}."
    )


def card_missing(path: Path) -> str:
    """Why the conditions of the result ``path`` are unknown: no run card of its folder names it."""
    where = Path(path).parent / CARDS
    return (
        f"{path}: the run card of the `neobench eval` that wrote it is missing (expected a "
        f"run-*.yaml naming {Path(path).stem} in {where}), so the conditions it was evaluated "
        "under are unknown. Re-run the same `neobench eval` into this --results folder: it "
        "finds the task done and writes a new run card."
    )


def finetune_finished(folder: Path) -> bool:
    """Whether ``folder`` holds a finished fine-tune (the one test a study, its jobs, its canary
    and `finetune --resume` use)."""
    card = cards.folder_card(folder)
    return card is not None and card.status == "complete"
