"""Train/eval overlap on the table (decided by protocol/overlap.py): "†" on in-domain cells, a
Zero-shot column, a note per row."""

from __future__ import annotations

from typing import TYPE_CHECKING

from neobench.core.runs import Run
from neobench.protocol.overlap import DAGGER, trained_on, zero_shot_percentage
from neobench.report.columns import AVG, MEAN_TYPES
from neobench.report.table import by_type

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

    from neobench.report.table import LeaderTable


def annotate_table(table: LeaderTable, runs: dict[str, Run], tasks: list[AbsTask]) -> None:
    """Each computed row's in-domain columns and zero-shot percentage, and the notes."""
    names = [t.metadata.name for t in tasks]
    types = by_type(tasks)
    table.zero_shot = True
    notes, undeclared = [], []
    for row in table.rows:
        run = runs.get(row.label)
        if row.quoted or run is None:
            continue
        row.zero_shot = zero_shot_percentage(run, names)
        trained = trained_on(run, names)
        if trained is None:
            undeclared.append(row.label)
            continue
        scored = [t for t in trained if t in run.scores]
        row.in_domain = set(scored) | {t for t, held in types.items() if set(held) & set(scored)}
        if scored:
            row.in_domain |= {AVG, MEAN_TYPES}
        if trained:
            notes.append(_row_note(row.label, scored, [t for t in trained if t not in scored]))
    table.notes.append(_legend(len(names)))
    if undeclared:
        table.notes.append(
            f"Zero-shot unknown for {', '.join(undeclared)}: the model declares no training "
            "data (not the same as zero-shot), so its cells carry no mark."
        )
    table.notes += notes


def _row_note(label: str, scored: list[str], unscored: list[str]) -> str:
    text = f"{label}: trained on {', '.join(scored) or 'none of its evaluated tasks'}"
    if unscored:
        text += f" (also on {', '.join(unscored)}, not evaluated here)"
    return text + "."


def _legend(count: int) -> str:
    return (
        f"{DAGGER} = in-domain: the row's model trained on this task, or on a task the column "
        "averages (its declared training datasets, its base model's, and mteb's similar tasks: "
        f"mteb's ModelMeta.get_training_datasets). Zero-shot = mteb's zero-shot percentage "
        f"over the {count} tasks of this table; --zero-shot-only keeps the tasks no row "
        "trained on."
    )
