"""The results folder of `neobench eval` (experiment_kwargs) and what it refuses: a folder whose
earlier runs used other conditions (check_same_conditions), a run card that cannot be written
(write_card: one message ends the run).
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from neobench.core import cards as record
from neobench.core import results
from neobench.core.cards import EvalCard, EvalShard
from neobench.core.conditions import FOLDER, Conditions
from neobench.core.errors import NeobenchError, RunFailed, disk_full
from neobench.evaluation.outcomes import EvalSummary
from neobench.protocol.config import standard

logger = logging.getLogger(__name__)


def experiment_kwargs(profile: str, max_seq_length: int) -> dict[str, Any] | None:
    """mteb experiment kwargs of a run: None under the standard conditions (config.standard():
    mteb's plain ``<model>/<revision>/``, which ``ResultCache.load_results()`` reads by default),
    else what differs (``experiments/<kwargs>/``: ``load_experiments="match_name"``)."""
    std = standard()
    if profile == std.instructions and max_seq_length == std.max_seq_length:
        return None
    return {"instructions": profile, "max_seq_length": max_seq_length}


def check_same_conditions(results_dir: Path, new: EvalCard) -> None:
    """Refuse to add the run of card ``new`` to a folder whose earlier runs used other
    conditions (conditions.FOLDER): the folder key holds the profile name and length; this also
    catches an edited profile (another hash) or another dtype. A condition an older card does
    not record is not held against it."""
    now = Conditions.from_card(new)
    for card_path in results.card_paths(results_dir):
        card = record.read_eval_card(card_path)
        if record.mark_orphaned_eval_card(card_path, card):
            logger.warning(
                "%s was left 'running' by a process that no longer exists (killed or crashed); "
                "marked interrupted",
                card_path,
            )
        differing = Conditions.from_card(card).differences(now, FOLDER, known=True)
        if differing:
            raise NeobenchError(
                f"{results_dir} holds results made under other conditions ("
                + ", ".join(f"{k}: {a} there, {b} now" for k, (a, b) in differing.items())
                + f"; see {card_path.name}). Use another --results root or --model-name, "
                "or delete that folder to start over."
            )


def start_card(results_dir: Path, card: EvalCard, root: Path) -> Path:
    """The run's card written into ``results_dir`` before any work, once the folder is found
    to hold no runs made under other conditions; its path."""
    check_same_conditions(results_dir, card)
    path = card_path(results_dir, card.shard)
    write_card(path, card, root)
    return path


def card_path(results_dir: Path, shard: EvalShard) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    base = f"run-{stamp}-shard{shard.k}of{shard.n}-{os.getpid()}"
    path = results_dir / results.CARDS / f"{base}.yaml"
    # Two runs of one process within a second (library use, tests) must not share a card.
    serial = 1
    while path.exists():
        serial += 1
        path = path.with_name(f"{base}-{serial}.yaml")
    return path


def write_card(path: Path, card: EvalCard, root: Path, summary: EvalSummary | None = None) -> None:
    """Write the run card; a folder that cannot take it any more ends the run with one message."""
    try:
        record.write_eval_card(path, card)
    except OSError as error:
        if disk_full(error):
            raise RunFailed(disk_full_message(root, summary)) from None
        raise RunFailed(
            f"--results {root}: the run card {path} cannot be written ({error.strerror}). "
            "Make the folder writable or pass another --results; finished tasks are kept."
        ) from None


def disk_full_message(root: Path, summary: EvalSummary | None) -> str:
    done = [o.task for o in summary.outcomes if o.status != "failed"] if summary else []
    kept = f"the {len(done)} finished task(s) are saved" if done else "no task had finished"
    return (
        f"--results {root}: the disk is full, so results cannot be written ({kept}; no "
        "existing result file was changed). Free space, or pass --results on another disk, "
        "then re-run the same command: finished tasks are skipped."
    )
