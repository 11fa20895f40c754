"""Rows of seed replicates in the table (merged by core/replicates.py): each cell's seed sd, the
members' folders, the legend."""

from __future__ import annotations

from typing import TYPE_CHECKING

from neobench.core.replicates import seed_sd
from neobench.core.runs import Run
from neobench.report.columns import AVG

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

    from neobench.report.table import LeaderTable


def annotate(table: LeaderTable, runs: dict[str, Run], tasks: list[AbsTask], *, ci: bool) -> None:
    """Each replicate row's seed sd, member folders in the sources, and the legend."""
    replicate_rows = [r for r in table.rows if r.label in runs and runs[r.label].replicated]
    for row in replicate_rows:
        run = runs[row.label]
        for column, names in table.columns(tasks).items():
            held = [n for n in names if n in run.scores]
            if held and (column != AVG or row.avg is not None):
                row.sd[column] = 100 * seed_sd([[m.scores[t] for t in held] for m in run.members])
        pairs = zip(run.seeds, run.members, strict=True)
        row.source = "; ".join(f"seed {s}: {m.folder}" for s, m in pairs)
        table.sources = [
            f"{row.label}: {row.source}" if line.startswith(f"{row.label}: ") else line
            for line in table.sources
        ]
    if replicate_rows:
        table.notes.append(_legend(ci))


def _legend(ci: bool) -> str:
    text = (
        "Rows '(N seeds)': one fine-tune (same base model, recipe and evaluation conditions) "
        "run with N seeds; each cell is the mean over the seeds of that cell's score, and "
        "'sd' is the standard deviation over the seeds of the same cell (each seed's own "
        "average of the cell's tasks; n - 1 denominator), x100."
    )
    if ci:
        text += (
            " Their ± comes from a two-level bootstrap: on each resample the seeds are drawn "
            "with replacement, then each drawn seed's items; so it includes the seed-to-seed "
            "variance."
        )
    return text
