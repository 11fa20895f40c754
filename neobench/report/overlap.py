"""Train/eval overlap on the table (decided by protocol/overlap.py): "†" on in-domain cells, a
Zero-shot column, a note per row."""

from __future__ import annotations

from typing import TYPE_CHECKING

from neobench.core.runs import Run
from neobench.protocol.overlap import DAGGER, trained_on, zero_shot_percentage
from neobench.report.columns import AVG, MEAN_TYPES, MEASURED
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
    measured = _measured(table, runs, types)
    table.notes.append(_legend(len(names)))
    table.notes += measured
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


def _measured(table: LeaderTable, runs: dict[str, Run], types: dict[str, list[str]]) -> list[str]:
    """Each fine-tuned row's columns holding a task whose test units occur in its training data
    as measured (MEASURED, from its fine-tune card: `neobench overlap`), and a note per row."""
    notes = []
    for row in table.rows:
        run = runs.get(row.label)
        if row.quoted or run is None or not run.measured_overlap:
            continue
        found = {t: m for t, m in run.measured_overlap.items() if t in run.scores}
        hit = sorted(t for t, m in found.items() if m.get("exact_units"))
        row.measured = set(hit) | {t for t, held in types.items() if set(held) & set(hit)}
        if hit:
            row.measured |= {AVG, MEAN_TYPES}
        shares = ", ".join(f"{t} {found[t]['exact_units']:.1%}" for t in hit)
        clean = sorted(set(found) - set(hit))
        text = f"{row.label}: measured overlap of its training data with the test units: "
        text += shares or "none"
        text += f" (none in {', '.join(clean)})" if clean and hit else ""
        notes.append(text + ".")
    if notes:
        notes.insert(0, (
            f"{MEASURED} = measured contamination: the column holds a task some of whose test "
            "units occur in the row's training data, as `neobench overlap` measured it (the "
            "share of units, from the fine-tune card); `neobench overlap --decontaminated` "
            "scores the task without them."
        ))  # fmt: skip
    return notes
