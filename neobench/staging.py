"""mteb's result writes made atomic: a task is evaluated into a private staging folder and its
files are moved into the results folder only when whole.

``results`` is the mteb.ResultCache of the results root; ``encoder`` the model mteb calls
(adapter.MtebEncoder).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

# Per-process staging folder, inside the results root (same file system, so the final renames
# are atomic); mteb.ResultCache(root).load_results() never looks there.
STAGING = ".neobench-staging"

# mteb writes its files without an atomic rename (a full disk would leave them truncated), so it
# writes into a staging folder and each file is moved into place only when whole. The task file
# is the task's own; model_meta.json is the same for every task of a model; run_settings.jsonl is
# shared by all tasks (and by concurrent shards), so it is merged at publication, not copied in
# before the task runs (a shard's entries written meanwhile would be lost).
RUN_SETTINGS = "run_settings.jsonl"


def evaluate_staged(task: AbsTask, encoder: Any, results: Any, batch_size: int) -> None:
    """mteb.evaluate into a private staging folder, then the files published into the results
    folder. A failure (a full disk included) leaves every existing result file as it was and no
    temporary file behind."""
    import mteb

    name, meta = task.metadata.name, encoder.mteb_model_meta
    final = results.get_task_result_path(name, meta)
    staging_root = Path(results.cache_path) / STAGING / str(os.getpid())
    staging = mteb.ResultCache(staging_root)
    staged = staging.get_task_result_path(name, meta)
    try:
        staged.parent.mkdir(parents=True, exist_ok=True)
        if final.is_file():  # mteb completes a task from its earlier splits
            shutil.copyfile(final, staged)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*superseded.*")
            mteb.evaluate(
                encoder,
                [task],
                cache=staging,
                overwrite_strategy="only-missing",
                encode_kwargs={"batch_size": batch_size, "show_progress_bar": False},
                show_progress_bar=False,
            )
        final.parent.mkdir(parents=True, exist_ok=True)
        # Side files first: the task file is what marks the task done.
        if (staged.parent / RUN_SETTINGS).is_file():
            _merge_run_settings(staged.parent / RUN_SETTINGS, final.parent / RUN_SETTINGS)
        for file_name in ("model_meta.json", final.name):
            if (staged.parent / file_name).is_file():
                os.replace(staged.parent / file_name, final.parent / file_name)
    finally:
        shutil.rmtree(staging_root, ignore_errors=True)
        with contextlib.suppress(OSError):
            staging_root.parent.rmdir()  # only when no other process stages there


def _merge_run_settings(new: Path, final: Path) -> None:
    """This task's entries merged into the shared run_settings.jsonl by mteb's own merge (same
    format as mteb writes it), on a copy renamed over the original: the original stays whole
    if anything fails."""
    # Private to mteb, and the only way to merge in its exact format (it exports no public one).
    from mteb.results.task_result import _read_run_settings_from_file, _write_and_merge_keyed_json

    merged = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    try:
        if final.is_file():
            shutil.copyfile(final, merged)
        _write_and_merge_keyed_json(merged, _read_run_settings_from_file(new))
        os.replace(merged, final)
    finally:
        merged.unlink(missing_ok=True)
