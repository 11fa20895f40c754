"""The output folder of `neobench finetune`: its files, whether a run may start there, and the
checkpoint a resumed run continues from."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from neobench.core import cards as record
from neobench.core.card_io import card_to_dict, is_orphaned
from neobench.core.errors import NeobenchError, writable_folder_problems
from neobench.train import checkpoints

logger = logging.getLogger(__name__)

CARD = record.FINETUNE_CARD
CURVE = "neobench_loss_curve.jsonl"
CURVE_PNG = "neobench_loss_curve.png"
CHECKPOINTS = "checkpoints"
TRACKING = "runs"  # TensorBoard events (--report-to tensorboard), transformers' folder name


def output_problems(output: Path, resume: bool) -> list[str]:
    problems = writable_folder_problems(
        output, "--output", "Pass a new folder you can write, e.g. --output runs/my-model."
    )
    if problems:
        return problems
    if resume:
        # An unfinished run with no whole checkpoint yet (stopped during start-up or its first
        # window) starts again from step 0: what a requeued job asks for with --resume.
        if last_checkpoint(output) is None and not unfinished_without_checkpoint(output):
            return [
                f"--resume: {output} holds no checkpoint to resume from (expected "
                f"{output / CHECKPOINTS}/checkpoint-N/) and no unfinished run. Run again "
                "without --resume."
            ]
        return []
    if output.exists() and any(output.iterdir()):
        if unfinished_without_checkpoint(output):
            return []  # nothing of value: the new run replaces the card of the failed one
        return [
            f"--output {output} already exists and is not empty: nothing is overwritten. "
            "Choose a new folder, delete it, or pass --resume to continue its run."
        ]
    return []


# What a run leaves before its first checkpoint: nothing a new run would lose by replacing it.
_EARLY_FILES = frozenset({CARD, CURVE, CURVE_PNG, CHECKPOINTS, TRACKING})


def unfinished_without_checkpoint(output: Path) -> bool:
    """A folder holding only the card (and loss curve) of a run that ended (failed, or its
    process gone) before its first checkpoint: it can be reused."""
    if not (output / CARD).is_file() or last_checkpoint(output) is not None:
        return False
    if any(p.name not in _EARLY_FILES for p in output.iterdir()):
        return False
    try:
        card = record.read_finetune_card(output / CARD)
    except NeobenchError:
        return False
    status = str(card.status or "")
    ended = status.startswith(("failed", "stopped", "interrupted"))
    return ended or is_orphaned(card_to_dict(card))


def last_checkpoint(output: Path) -> str | None:
    """The newest whole checkpoint, or None; a newer one that is not whole (killed, or the disk
    filled, while writing it) is named and skipped."""
    for _, path in _numbered(output):
        problem = checkpoints.problem(path)
        if problem is None:
            return str(path)
        logger.warning("%s is not a whole checkpoint (%s); skipped", path, problem)
    return None


def set_aside_partial(output: Path) -> list[Path]:
    """Rename each checkpoint newer than the one a resumed run continues from (none whole) to
    ``<name>.incomplete``: never chosen again, and the trainer writes that step afresh."""
    chosen = last_checkpoint(output)
    moved = []
    for _, path in _numbered(output):
        if str(path) == chosen:
            break  # the rest are older
        target = path.with_name(f"{path.name}.incomplete")
        shutil.rmtree(target, ignore_errors=True)
        path.rename(target)
        moved.append(target)
    return moved


def _numbered(output: Path) -> list[tuple[int, Path]]:
    """(step, folder) of each checkpoint-N folder, newest first."""
    found = [(p.name.rsplit("-", 1)[1], p) for p in (output / CHECKPOINTS).glob("checkpoint-*")]
    return sorted(((int(step), p) for step, p in found if step.isdigit()), reverse=True)


def clear_failed_start(output: Path) -> None:
    """Start afresh in a folder left by a run that ended before its first checkpoint (else
    its loss curve is appended to, and its TensorBoard events shown beside the new run's)."""
    if not unfinished_without_checkpoint(output):
        return
    logger.warning("%s held a run that stopped before any checkpoint; starting it again", output)
    for name in (CURVE, CURVE_PNG):
        (output / name).unlink(missing_ok=True)
    shutil.rmtree(output / TRACKING, ignore_errors=True)
