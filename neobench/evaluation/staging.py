"""mteb's result writes made atomic: a task is evaluated into a private staging folder and each
file is moved into the results folder only when whole; the units file is built while the task's
data is loaded and published before the task file. Behaviour: docs/guide.md, "`neobench eval`"
(Resuming, Per-item units); patches in force while mteb evaluates: compat/patches.py.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neobench.compat import patches
from neobench.compat.mteb import merge_run_settings
from neobench.core import flock
from neobench.core.stages import mteb_call, stage
from neobench.evaluation import units
from neobench.protocol.instructions import expand

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask
    from mteb.results import TaskResult

logger = logging.getLogger(__name__)

# Per-process staging folder, inside the results root (same file system, so the final renames
# are atomic); mteb.ResultCache(root).load_results() never looks there.
STAGING = ".neobench-staging"
# mteb's raw prediction files, inside the staging folder (never published).
MTEB_PREDICTIONS = "mteb-predictions"
# The units' main score must equal mteb's to this (else they are not saved: a bug to report).
SCORE_TOLERANCE = 1e-6
# Shared by all tasks and shards: merged at publication (a copy made before the task would lose
# a shard's entries written meanwhile). model_meta.json is the same per model: replaced.
RUN_SETTINGS = "run_settings.jsonl"


def evaluate_staged(
    task: AbsTask, encoder: Any, results: Any, batch_size: int, predictions: bool = True
) -> int | None:
    """mteb.evaluate of ``task`` on ``encoder`` (adapter.MtebEncoder) staged, then published into
    ``results`` (the root's mteb.ResultCache); a failure leaves existing files as they were.
    Returns the bytes of the units file published, None when none was."""
    import mteb

    name, meta = task.metadata.name, encoder.mteb_model_meta
    final = results.get_task_result_path(name, meta)
    staging_root = Path(results.cache_path) / STAGING / str(os.getpid())
    staging = mteb.ResultCache(staging_root)
    staged = staging.get_task_result_path(name, meta)
    raw = staging_root / MTEB_PREDICTIONS if predictions and _has_units(task) else None
    kept: dict[str, Any] = {}  # task name -> its predictions, as the prediction file holds them
    try:
        staged.parent.mkdir(parents=True, exist_ok=True)
        if final.is_file():  # mteb completes a task from its earlier splits
            shutil.copyfile(final, staged)
        with (
            warnings.catch_warnings(),
            _data_kept(task, raw is not None),
            patches.applied("column-cache"),
            # a task with its own prediction writer writes its file (read by _read_predictions)
            patches.applied("prediction-json", expand([task]), kept),
            mteb_call() as returned,  # a benchmark's stage clock reads mteb's phases from them
        ):
            warnings.filterwarnings("ignore", message=".*superseded.*")
            outcome = mteb.evaluate(
                encoder,
                [task],
                cache=staging,
                overwrite_strategy="only-missing",
                prediction_folder=raw,
                encode_kwargs={"batch_size": batch_size, "show_progress_bar": False},
                show_progress_bar=False,
            )
            returned += outcome.task_results
            with stage("units"):
                text = _units_text(task, raw, kept, outcome.task_results) if raw else None
        with stage("writing"):
            final.parent.mkdir(parents=True, exist_ok=True)
            # Side files first: the task file is what marks the task done.
            if (staged.parent / RUN_SETTINGS).is_file():
                _merge_run_settings(staged.parent / RUN_SETTINGS, final.parent / RUN_SETTINGS)
            size = _publish_units(text, name, staged.parent, final.parent)
            for file_name in ("model_meta.json", final.name):
                if (staged.parent / file_name).is_file():
                    os.replace(staged.parent / file_name, final.parent / file_name)
            return size
    finally:
        shutil.rmtree(staging_root, ignore_errors=True)
        with contextlib.suppress(OSError):
            staging_root.parent.rmdir()  # only when no other process stages there


def _has_units(task: AbsTask) -> bool:
    """Whether the task's type has a units spec; a registry that cannot be read is a bug that
    costs the units, never the result."""
    try:
        return units.supported(task.metadata.type)
    except Exception as error:
        _units_lost(task.metadata.name, error, "the units registry failed: ")
        return False


def _units_lost(task: str, error: BaseException, cause: str = "") -> None:
    why = f"{cause}{type(error).__name__}: {error}"
    logger.warning("%s: per-item units not saved (%s); the result is kept without them", task, why)


@contextlib.contextmanager
def _data_kept(task: AbsTask, keep: bool) -> Iterator[None]:
    """Keep the task's data loaded through mteb.evaluate for the units (mteb unloads only what it
    loaded itself). mteb's evaluation_time then leaves out the loading; the card includes it."""
    if not keep:
        yield
        return
    leaves = expand([task])  # an aggregate (CQADupstack) evaluates its sub-tasks
    loaded_before = [leaf.data_loaded for leaf in leaves]
    try:
        with stage("load"):
            for leaf in leaves:
                if not leaf.data_loaded:
                    leaf.load_data()
        yield
    finally:
        for leaf, before in zip(leaves, loaded_before, strict=True):
            if leaf.data_loaded and not before:
                leaf.unload_data()


def _units_text(
    task: AbsTask, raw: Path, kept: dict[str, Any], result: list[TaskResult]
) -> str | None:
    """The task's units as JSON, checked to give mteb's main score; a failure (a bug, a type
    whose predictions mteb saves differently) costs the units, never the result."""
    name = task.metadata.name
    try:
        built = units.build(task, _read_predictions(task, raw, kept), task.metadata.main_score)
        # mteb's in-memory score (the file's is rounded); its mean over (split, subset) is the
        # mean over the units' parts.
        ours, mtebs = units.main_score(built), float(result[0].get_score())
        if not abs(ours - mtebs) <= SCORE_TOLERANCE:
            raise ValueError(f"their main score {ours!r} differs from mteb's {mtebs!r}")
        return units.to_json(built)
    except Exception as error:
        _units_lost(name, error)
        logger.debug("units of %s", name, exc_info=True)
        return None


def _read_predictions(task: AbsTask, raw: Path, kept: dict[str, Any]) -> dict[str, Any]:
    """mteb's predictions file of the task ({subset: {split: ...}}). An aggregate has none of its
    own: its sub-tasks' files, keyed by sub-task name, are what its units are built from."""
    subtasks = getattr(task, "tasks", None)
    if subtasks:
        return {t.metadata.name: _read_predictions(t, raw, kept) for t in subtasks}
    if task.metadata.name in kept:
        return kept[task.metadata.name]
    path = raw / task.prediction_file_name
    if not path.is_file():
        raise FileNotFoundError(f"mteb saved no predictions for {task.metadata.name} ({path})")
    return json.loads(path.read_text(encoding="utf-8"))


def _publish_units(text: str | None, task: str, staging: Path, folder: Path) -> int | None:
    """Write the units into staging, then rename them into ``folder``'s predictions/; with no
    units, a file left there by an earlier evaluation (e.g. one killed before its task file) is
    removed, so the new result never sits beside units that are not its own."""
    staged, final = units.path_for(staging, task), units.path_for(folder, task)
    if text is None:
        final.unlink(missing_ok=True)
        return None
    staged.parent.mkdir(parents=True, exist_ok=True)
    staged.write_text(text, encoding="utf-8")
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staged, final)
    return final.stat().st_size


def _merge_run_settings(new: Path, final: Path) -> None:
    """This task's entries merged into the shared run_settings.jsonl by mteb's own merge (mteb's
    exact format; it exports no public one), on a copy renamed over the original: the original
    stays whole if anything fails. One merge at a time (a lock beside the file): two evals
    publishing at one moment (shards of one run) would each lose the other's entries."""
    merged = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    try:
        lock = flock.acquire(final.with_name(f".{final.name}.lock"), wait=True)
    except (flock.Unsupported, OSError):
        lock = None  # merged unlocked: only two merges at one moment could lose an entry
    try:
        if final.is_file():
            shutil.copyfile(final, merged)
        merge_run_settings(merged, new)
        os.replace(merged, final)
    finally:
        merged.unlink(missing_ok=True)
        if lock is not None:
            flock.release(lock)
