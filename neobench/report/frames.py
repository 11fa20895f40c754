"""Tables and comparisons as pandas DataFrames (``to_pandas()`` of LeaderTable, Comparison).

Numbers stay numbers: a score column ``Avg.`` comes with ``Avg._ci_low`` / ``Avg._ci_high`` (95%
interval, with intervals), ``Avg._sd`` (seed standard deviation, for seed replicates) and
``Avg._mark`` ("above" / "below" the baseline, with one); all on the 0-100 scale of the table. A
row's conditions are columns of their own. pandas is imported only here, when asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from neobench.report.compare import Comparison
    from neobench.report.table import LeaderTable, Row

MARK_WORDS = {"▲": "above", "▼": "below"}


def leader_frame(table: LeaderTable) -> pd.DataFrame:
    """One row per table row (paper rows too, ``quoted`` True), its score columns as floats."""
    import pandas as pd

    return pd.DataFrame([_leader_record(table, row) for row in table.rows])


def _leader_record(table: LeaderTable, row: Row) -> dict[str, Any]:
    # The run's names as the CSV and JSON give them (core/runs.NAMES), label first.
    record: dict[str, Any] = {"label": row.label, **row.identity, "quoted": row.quoted,
                              "finetuned": row.finetuned}  # fmt: skip
    columns = table.task_names if table.per_task else [t for t, _ in table.types]
    for column in columns:
        value = row.tasks.get(column) if table.per_task else row.types[column].value
        record |= _score(row, column, value)
    record |= _score(row, "Avg.", row.avg)
    record["avg_tasks"] = row.avg_of[0]
    record["mean_task_type"] = row.mean_types
    record["missing_tasks"] = len(row.missing)
    record["changed_tasks"] = len(row.mismatched)  # results that differ from their run card
    record["zero_shot"] = row.zero_shot
    return record | {k: v for k, v in row.conditions.items()}


def _score(row: Row, column: str, value: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {column: value}
    low_high = row.ci.get(column) if value is not None else None
    if row.ci:
        out[f"{column}_ci_low"], out[f"{column}_ci_high"] = low_high or (None, None)
    if row.sd:
        out[f"{column}_sd"] = row.sd.get(column)
    if row.marks or column in row.marks:
        out[f"{column}_mark"] = MARK_WORDS.get(row.marks.get(column, ""))
    return out


def comparison_frame(found: Comparison) -> pd.DataFrame:
    """One row per (model, task or column) compared with the baseline, as `compare --out`
    writes them."""
    import pandas as pd

    return pd.DataFrame([row.record() for row in found.rows])
