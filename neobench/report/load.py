"""The one reader of results folders for every report: runs parsed once from their cards, what
each model trained on, and the seed replicates of one fine-tune merged into one Run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from neobench.core import reader, replicates
from neobench.core.runs import Run
from neobench.protocol import overlap

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask


def load(results: list[str | Path], tasks: list[AbsTask]) -> tuple[list[Run], list[str], list[str]]:
    """The runs under every results root on ``tasks`` (seed replicates as one Run), the files
    that could not be read (in the order the roots were given), and the notes on what merged."""
    runs: list[Run] = []
    problems: list[str] = []
    for root in results:
        found, trouble = reader.load_runs(Path(root), tasks, overlap.read_training)
        runs += found
        problems += trouble
    runs, notes = replicates.merge(runs)
    return runs, problems, notes


def load_zero_shot(
    results: list[str | Path], tasks: list[AbsTask], runs: dict[str, Run]
) -> tuple[list[AbsTask], tuple[list[Run], list[str], list[str]], str]:
    """The tasks no run of ``runs`` (label -> run) trained on, `load` on them, and the note
    naming what was dropped (`--zero-shot-only`)."""
    subset = overlap.zero_shot_subset(runs, tasks)
    kept = [t for t in tasks if t.metadata.name not in subset.dropped]
    return kept, load(results, kept), subset.note()
