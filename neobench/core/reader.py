"""Read a results root (mteb's layout + neobench's run cards) into Runs, each parsed once.
Unreadable files are named and skipped, never fatal: the caller shows them under its output."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from neobench.core import cards as record
from neobench.core import results
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
    """Runs under ``root`` with their benchmark-task scores, and the problems met on the way."""
    root = Path(root)
    if not (root / results.RESULTS).is_dir():
        raise NeobenchError(
            f"--results {root}: no results/ folder inside. Point it at the root given to "
            "`neobench eval --results` (the folder that contains results/)."
        )
    folders = results.run_folders(root)
    if not folders:
        raise NeobenchError(
            f"--results {root}: results/ holds no task results yet; run `neobench eval` first."
        )
    problems: list[str] = []
    by_name = {t.metadata.name: t for t in tasks}
    runs = []
    for folder in folders:
        run = _identify(root, folder)
        cards = _read_cards(run, problems)
        writers = _writers(cards)
        for path in results.task_files(folder):
            task = by_name.get(path.stem)
            if task is None:
                continue
            try:
                scores, stored = results.file_score(path)
                score = results.benchmark_score(scores, task)
            except Exception as error:
                why = f"{path}: unreadable ({type(error).__name__}: {_first_line(error)})"
                problems.append(f"{why}; skipped")
                run.unreadable[path.stem] = why
                continue
            recorded, card = writers.get(path.stem, (None, ""))
            why = results.recorded_mismatch(path, stored, recorded, card)
            if why is not None:
                run.mismatched[path.stem] = why
            else:
                run.scores[path.stem] = score
        _conditions(run, cards, writers)
        _missing_cards(run, cards)
        if training is not None:
            run.training_datasets = training(folder / results.META, run.model)
        runs.append(run)
    return runs, problems


def _identify(root: Path, folder: Path) -> Run:
    model, revision, experiment = results.identity(root, folder)
    meta = folder / results.META
    if meta.is_file():
        with contextlib.suppress(ValueError):
            model = json.loads(meta.read_text()).get("name") or model
    return Run(model=model, revision=revision, experiment=experiment, folder=folder)


# The cards of one run folder, oldest first: (file name, its sha256[:12], the card).
Cards = list[tuple[str, str, record.EvalCard]]


def _read_cards(run: Run, problems: list[str]) -> Cards:
    """Every readable run card, read once; sets the run's card hashes, fine-tune identity,
    sweep, units digests and evaluation times."""
    found: Cards = []
    tunes: set[tuple] = set()
    for path in results.card_paths(run.folder):
        try:
            card = record.read_eval_card(path)
        except Exception as error:
            problems.append(f"{path}: unreadable run card ({_first_line(error)}); skipped")
            continue
        sha = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
        run.cards[path.name] = sha
        found.append((path.name, sha, card))
        model = card.model
        if isinstance(model.sweep, dict):
            run.sweep = model.sweep
        tunes.add((model.finetune_seed, model.base_model, model.base_revision, model.recipe_sha256))
        if model.recipe_sha256 and model.path and not run.measured_overlap:
            run.measured_overlap = _measured_overlap(Path(model.path), problems)
        for task, entry in card.tasks.items():  # cards in time order: the newest write wins
            if isinstance(entry, dict) and entry.get("units_sha256"):
                run.units_digests[task] = (str(entry["units_sha256"]), path.name)
            # A task found already done ("cached") was written by an earlier card.
            cached = isinstance(entry, dict) and entry.get("status") == "cached"
            if card.started and not (cached and task in run.evaluated):
                run.evaluated[task] = card.started
    run.finetune = _finetune(tunes)
    return found


def _measured_overlap(folder: Path, problems: list[str]) -> dict[str, dict]:
    """What the fine-tune card in the evaluated model's folder records of its training data's
    measured overlap with evaluation tasks; nothing where the folder or card is gone, and a
    problem named where the card cannot be read."""
    try:
        card = record.folder_card(folder)
    except (NeobenchError, OSError) as error:
        problems.append(
            f"{folder / record.FINETUNE_CARD}: unreadable fine-tune card ({_first_line(error)}); "
            "its measured overlap is not shown"
        )
        return {}
    return dict(card.contamination) if card is not None else {}


def _writers(cards: Cards) -> dict[str, tuple[float | None, str]]:
    """Task -> (main score recorded by the newest card that evaluated it, i.e. wrote its result
    file, not one that found it "cached"; that card's file name)."""
    out: dict[str, tuple[float | None, str]] = {}
    for name, _, card in cards:
        for task, entry in card.tasks.items():
            if isinstance(entry, dict) and entry.get("status") == "evaluated":
                score = entry.get("main_score")
                out[task] = (None if score is None else float(score), name)
    return out


def _missing_cards(run: Run, cards: Cards) -> None:
    """The held tasks no run card names: their writer's card (and conditions) was deleted.
    Decided only in a folder `neobench eval` wrote into (stock mteb's have no neobench/), whose
    cards were all read (an unreadable one may be the writer) and all record their tasks (one
    that records none may be the writer of any)."""
    if not (run.folder / results.CARDS).is_dir():
        return
    if len(cards) != len(results.card_paths(run.folder)):
        return
    if any(not card.tasks for _, _, card in cards):
        return
    named = {task for _, _, card in cards for task in card.tasks}
    for task in sorted((run.scores.keys() | run.mismatched.keys()) - named):
        run.card_missing[task] = results.card_missing(results.task_path(run.folder, task))


def _conditions(run: Run, cards: Cards, writers: dict[str, tuple[float | None, str]]) -> None:
    """The run's conditions from the cards that wrote the tasks it holds here (another
    benchmark's card in the same folder does not count; all count when no held task names its
    writer); a field on which they differ reads "mixed: a, b"."""
    held = run.scores.keys() | run.mismatched.keys()
    wrote = {writers[t][1] for t in held if t in writers}
    chosen = [card for name, _, card in cards if name in wrote] or [c for _, _, c in cards]
    seen: dict[str, dict[str, object]] = {}  # field -> its values as text -> as the card has it
    for card in chosen:
        for key, value in Conditions.from_card(card).items():
            text = UNKNOWN if value is None else str(value)
            seen.setdefault(key, {})[text] = text if value is None else value
    merged = Conditions()
    for key in FIELDS:
        # One value keeps its type (a length stays an int in JSON); several read "mixed: a, b".
        values = seen.get(key, {})
        if len(values) > 1:
            merged[key] = "mixed: " + ", ".join(sorted(values))
        else:
            merged[key] = next(iter(values.values()), None)
    run.conditions = merged


def _finetune(found: set[tuple]) -> Finetune | None:
    """The fine-tune identity every card agrees on; None if not one with a recorded seed."""
    if len(found) != 1:
        return None
    seed, base, base_revision, recipe = found.pop()
    if seed is None or recipe is None:
        return None
    return Finetune(int(seed), base, base_revision, recipe)


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:160] if text else repr(error)
