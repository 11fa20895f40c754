"""Tables, comparisons and runs as pandas DataFrames, by the convention of core/frames.py. A score
column ``X`` comes with ``X_ci_low`` / ``X_ci_high``, ``X_sd`` and ``X_mark`` where the table has
intervals, seed replicates or a baseline (NaN or None in a row without)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from neobench.core.conditions import RECORD
from neobench.core.frames import frame, number, scaled
from neobench.core.runs import NAMES, Run, identity, labelled
from neobench.report import ranks
from neobench.report.columns import AVG, MARK_WORDS

if TYPE_CHECKING:
    import pandas as pd

    from neobench.report.compare import Comparison
    from neobench.report.table import LeaderTable, Row

# A comparison row's fields on the 0-1 scale, x100 in its frame.
COMPARE_SCORES = ("baseline_score", "score", "score_ci_low", "score_ci_high", "delta", "ci_low",
                  "ci_high", "seed_sd")  # fmt: skip


def leader_frame(table: LeaderTable) -> pd.DataFrame:
    """One row per table row (paper rows too, ``quoted`` True), its score columns as floats."""
    extras = _Extras(
        ci=any(row.ci for row in table.rows),
        sd=any(row.sd for row in table.rows),
        marks=table.baseline is not None or any(row.marks for row in table.rows),
        ranked=tuple(table.ranked),
    )
    columns = [*table.columns_shown(), AVG]
    floats = [*extras.floats(columns), "mean_task_type"]
    return frame([_leader_record(table, row, extras) for row in table.rows], floats)


@dataclasses.dataclass(frozen=True)
class _Extras:
    ci: bool
    sd: bool
    marks: bool
    ranked: tuple[str, ...] = ()  # --ranks: rank, rank_ci_low, rank_ci_high, group (Avg.'s plain)

    def floats(self, columns: list[str]) -> list[str]:
        ci = ("_ci_low", "_ci_high") if self.ci else ()
        suffixes = ("", *ci, *(("_sd",) if self.sd else ()))
        return [f"{column}{suffix}" for column in columns for suffix in suffixes]


def _leader_record(table: LeaderTable, row: Row, extras: _Extras) -> dict[str, Any]:
    record: dict[str, Any] = {"label": row.label, **row.identity, "quoted": row.quoted}
    for column in table.columns_shown():
        record |= _score(row, column, table.score(row, column), extras)
    record |= _score(row, AVG, row.avg, extras)
    record["avg_tasks"] = row.avg_of[0]
    record["mean_task_type"] = number(row.mean_types)
    record["missing_tasks"] = len(row.missing)
    record["changed_tasks"] = len(row.mismatched)
    if table.zero_shot_fields:
        record["zero_shot"] = row.zero_shot
    return record | table.record(row)


def _score(row: Row, column: str, value: float | None, extras: _Extras) -> dict[str, Any]:
    out: dict[str, Any] = {column: number(value)}
    if extras.ci:
        low, high = row.ci.get(column, (None, None)) if value is not None else (None, None)
        out[f"{column}_ci_low"], out[f"{column}_ci_high"] = number(low), number(high)
    if extras.sd:
        out[f"{column}_sd"] = number(row.sd.get(column))
    if extras.marks:
        out[f"{column}_mark"] = MARK_WORDS.get(row.marks.get(column, ""))
    if column in extras.ranked:
        out |= ranks.fields(row.ranks.get(column), "" if column == AVG else f"{column}_")
    return out


def comparison_frame(found: Comparison) -> pd.DataFrame:
    """One row per (model, task) compared: the keys of `compare --out`'s rows, in their order."""
    rows = []
    for row in found.rows:
        record = row.record()
        rows.append(record | {key: scaled(record[key]) for key in COMPARE_SCORES})
    return frame(rows, COMPARE_SCORES, found.record_keys())


def runs_frame(runs: list[Run]) -> pd.DataFrame:
    """One row per run and task: its names, conditions, the task and its main score."""
    rows = []
    for label, run in labelled(runs).items():
        names, conditions = identity(label, run), run.conditions.record()
        for task, score in sorted(run.scores.items()):
            rows.append({**names, **conditions, "task": task, "main_score": scaled(score)})
    return frame(rows, ["main_score"], [*NAMES, *RECORD, "task", "main_score"])
