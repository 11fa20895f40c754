"""Read a results root (mteb's layout + neobench's run cards) into Runs, each parsed once.

Unreadable files are named and skipped, never fatal: the caller shows them under its output.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from neobench.core import cards as record
from neobench.core import layout
from neobench.core.conditions import FIELDS, UNKNOWN, Conditions
from neobench.core.errors import NeobenchError
from neobench.core.runs import Finetune, Run

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

logger = logging.getLogger(__name__)


# Reads what a run's model trained on from its model_meta.json (protocol/overlap.read_training).
Training = Callable[[Path, str], frozenset[str] | None]


def load_runs(
    root: Path, tasks: list[AbsTask], training: Training | None = None
) -> tuple[list[Run], list[str]]:
    """Runs under ``root`` with their benchmark-task scores, and the problems met on the way.
    ``training(meta_path, model)`` reads what a run's model trained on (protocol/overlap.py)."""
    root = Path(root)
    if not (root / layout.RESULTS).is_dir():
        raise NeobenchError(
            f"--results {root}: no results/ folder inside. Point it at the root given to "
            "`neobench eval --results` (the folder that contains results/)."
        )
    folders = layout.run_folders(root)
    if not folders:
        raise NeobenchError(
            f"--results {root}: results/ holds no task results yet; run `neobench eval` first."
        )
    problems: list[str] = []
    by_name = {t.metadata.name: t for t in tasks}
    runs = []
    for folder in folders:
        run = _identify(root, folder)
        for path in layout.task_files(folder):
            if path.stem not in by_name:
                continue
            try:
                run.scores[path.stem] = task_score(path, by_name[path.stem])
            except Exception as error:
                problems.append(
                    f"{path}: unreadable ({type(error).__name__}: {_first_line(error)}); skipped"
                )
        _read_cards(run, problems)
        if training is not None:
            run.training_datasets = training(folder / layout.META, run.model)
        runs.append(run)
    return runs, problems


def load_roots(
    roots: list[str | Path], tasks: list[AbsTask], training: Training | None = None
) -> tuple[list[Run], list[str]]:
    """The runs of several results roots together (``table --results A --results B``), and every
    problem met in any of them, in the order the roots were given."""
    runs: list[Run] = []
    problems: list[str] = []
    for root in roots:
        found, trouble = load_runs(Path(root), tasks, training)
        runs += found
        problems += trouble
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
    """The per-item units file of ``task`` in a run folder, or None: a result evaluated before
    units existed, or with --no-predictions, has none (re-running the task adds it)."""
    path = layout.units_path(folder, task)
    return path if path.is_file() else None


def _identify(root: Path, folder: Path) -> Run:
    model, revision, experiment = layout.identity(root, folder)
    meta = folder / layout.META
    if meta.is_file():
        with contextlib.suppress(ValueError):
            model = json.loads(meta.read_text()).get("name") or model
    return Run(model=model, revision=revision, experiment=experiment, folder=folder)


def _read_cards(run: Run, problems: list[str]) -> None:
    """The run's conditions (a field on which its cards differ is 'mixed'), card hashes and
    fine-tune identity, from each card read once."""
    seen: dict[str, dict[str, object]] = {}  # field -> its values as text -> as the card has it
    tunes: set[tuple] = set()
    for path in layout.card_paths(run.folder):
        try:
            card = record.read_eval_card(path)
        except Exception as error:
            problems.append(f"{path}: unreadable run card ({_first_line(error)}); skipped")
            continue
        run.cards[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
        for key, value in Conditions.from_card(card).items():
            # A card too old to record a field says so, rather than "None".
            text = UNKNOWN if value is None else str(value)
            seen.setdefault(key, {})[text] = text if value is None else value
        model = card.model
        if isinstance(model.sweep, dict):
            run.sweep = model.sweep
        tunes.add((model.finetune_seed, model.base_model, model.base_revision, model.recipe_sha256))
        for task, entry in card.tasks.items():  # cards in time order: the newest write wins
            if isinstance(entry, dict) and entry.get("units_sha256"):
                run.units_digests[task] = (str(entry["units_sha256"]), path.name)
            # A task found already done ("cached") was written by an earlier card.
            cached = isinstance(entry, dict) and entry.get("status") == "cached"
            if card.started and not (cached and task in run.evaluated):
                run.evaluated[task] = card.started
    merged = Conditions()
    for key in FIELDS:
        # One value keeps its type (a length stays an int in JSON); several read "mixed: a, b".
        values = seen.get(key, {})
        if len(values) > 1:
            merged[key] = "mixed: " + ", ".join(sorted(values))
        else:
            merged[key] = next(iter(values.values()), None)
    run.conditions = merged
    run.finetune = _finetune(tunes)


def _finetune(found: set[tuple]) -> Finetune | None:
    """The fine-tune identity every card agrees on; None for a run that is not a neobench
    fine-tune with a recorded seed, or whose cards disagree on it."""
    if len(found) != 1:
        return None
    seed, base, base_revision, recipe = found.pop()
    if seed is None or recipe is None:
        return None
    return Finetune(int(seed), base, base_revision, recipe)


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:160] if text else repr(error)
