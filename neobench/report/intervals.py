"""`neobench table --ci` and `--baseline`: intervals and significance marks on the table's cells.

A cell's interval comes from the per-item units each result carries (neobench/evaluate/units): every task
of the row is resampled (its units, B times, seeded: neobench/report/bootstrap.py) and a type column or
Avg. is the mean of its tasks on each resample, with the tasks fixed ("if the test items were
drawn again"). A cell is marked against the baseline row when the paired difference on the same
resamples is significant after Holm's adjustment over that row's marked columns. A row of seed
replicates (neobench/report/replicates.py) resamples its seeds, then their items.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from neobench.core.errors import NeobenchError, unknown
from neobench.core.runs import Run
from neobench.evaluate.units import TaskUnits, main_score
from neobench.protocol.config import ALPHA
from neobench.report import bootstrap, replicates
from neobench.report.table import LeaderTable, Row

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

UP, DOWN = "▲", "▼"


OVER = ("items", "tasks")


@dataclass
class _RowData:
    scores: dict[str, float]  # task -> main score, from the result files
    draws: dict[str, np.ndarray]  # task -> its resampled main scores, where units were saved
    run: Run | None = None
    units: dict[str, list[TaskUnits]] = field(default_factory=dict)  # task -> per member


@dataclass
class _Settings:
    resamples: int
    seed: int
    over: str


def annotate(
    table: LeaderTable,
    runs: dict[str, Run],
    tasks: list[AbsTask],
    resamples: int,
    seed: int,
    *,
    ci: bool,
    baseline: str | None,
    over: str = "items",
) -> None:
    """Fill the rows' ``ci`` (when ``ci``) and ``marks`` (when ``baseline``), and the legend."""
    bootstrap.check_resamples(resamples)
    if over not in OVER:
        raise NeobenchError(unknown("--over", over, OVER))
    settings = _Settings(resamples, seed, over)
    columns = table.columns(tasks)
    needed = set().union(*columns.values())  # a task no column averages needs no resampling
    data = {label: _row_data(run, needed, resamples, seed) for label, run in runs.items()}
    if over == "items" and not any(d.draws for d in data.values()):
        raise NeobenchError(
            "--ci/--baseline: none of the results has per-item predictions (they were evaluated "
            "before neobench saved them, or with --no-predictions). Delete the task files and "
            "re-run the same `neobench eval` to add them, or use --over tasks."
        )
    for row in table.rows:
        if row.label in data and ci:
            row.ci = _intervals(data[row.label], columns, settings)
    table.notes += _missing_notes(data, needed)
    if ci:
        table.notes.append(_legend(settings))
    if baseline:
        _mark(table, data, columns, baseline, settings)


def _legend(settings: _Settings) -> str:
    each = (
        f"each task's units (pairs, queries, items...) resampled {settings.resamples} times"
        f" (seed {settings.seed})"
    )
    if settings.over == "tasks":
        return (
            f"± = half the width of the 95% bootstrap interval. Type columns and Avg.: the "
            f"tasks resampled {settings.resamples} times (seed {settings.seed}), 'if the tasks "
            f"were drawn again'; a single task's cell: {each}."
        )
    return (
        f"± = half the width of the 95% bootstrap interval, 'if the test items were drawn "
        f"again': {each}; type columns and Avg. average their tasks on each resample, tasks "
        "fixed."
    )


def _row_data(run: Run, needed: set[str], resamples: int, seed: int) -> _RowData:
    """A row's scores, and per task whose units were saved its units and B resampled main
    scores; a row of seed replicates resamples its seeds, then their items."""
    found, draws = {}, {}
    for task in sorted(run.scores.keys() & needed):
        members = replicates.member_units(run, task)
        if members is not None:
            found[task] = members
            per_seed = [bootstrap.task_draws(u, resamples, seed) for u in members]
            draws[task] = replicates.combine(run, per_seed, resamples, seed)
    return _RowData(run.scores, draws, run, found)


def _column_draws(
    data: _RowData, names: list[str], column: str, settings: _Settings
) -> np.ndarray | None:
    """A column's draws over the tasks of ``names`` the row holds; None where they cannot be
    computed (a task without units, or a single task resampled over tasks)."""
    present = [n for n in names if n in data.scores]
    if not present:
        return None
    if settings.over == "tasks" and len(names) > 1:
        if len(present) < 2:
            return None
        points = np.asarray([data.scores[n] for n in present])
        return bootstrap.over_tasks(points, settings.resamples, settings.seed, column)
    if any(n not in data.draws for n in present):
        return None
    return np.mean([data.draws[n] for n in present], axis=0)


def _intervals(
    data: _RowData, columns: dict[str, list[str]], settings: _Settings
) -> dict[str, tuple[float, float]]:
    out = {}
    for column, names in columns.items():
        found = _column_draws(data, names, column, settings)
        if found is not None:
            low, high = np.quantile(found, [ALPHA / 2, 1 - ALPHA / 2])
            out[column] = (100 * float(low), 100 * float(high))
    return out


def _missing_notes(data: dict[str, _RowData], needed: set[str]) -> list[str]:
    notes = []
    for label, row in data.items():
        missing = sorted((row.scores.keys() & needed) - row.draws.keys())
        if missing:
            notes.append(
                f"{label}: {len(missing)} task(s) without per-item predictions "
                f"({', '.join(missing[:6])}{' ...' if len(missing) > 6 else ''}): the columns "
                "holding them have no item-level interval or mark. Delete those task files and "
                "re-run the same `neobench eval` to add them."
            )
    return notes


def _mark(
    table: LeaderTable,
    data: dict[str, _RowData],
    columns: dict[str, list[str]],
    baseline: str,
    settings: _Settings,
) -> None:
    base = table.baseline = _find(baseline, table.rows, data)
    for row in table.rows:
        if row.label == base or row.label not in data:
            continue
        pair = _Pair(data[base], data[row.label], settings)
        tests = {}
        for column, names in columns.items():
            # Paired over the tasks both rows hold: the same resampled items (or tasks).
            shared = [n for n in names if n in data[row.label].scores and n in data[base].scores]
            found = pair.column(shared, column) if shared else None
            if found is not None:
                delta, diffs = found
                tests[column] = (delta, bootstrap.p_value(diffs, delta))
        adjusted = bootstrap.holm([p for _, p in tests.values()]) if tests else []
        for (column, (delta, _)), p in zip(tests.items(), adjusted, strict=True):
            if p < ALPHA:
                row.marks[column] = UP if delta > 0 else DOWN
    table.notes.append(
        f"{UP} / {DOWN}: significantly above / below {base} (paired bootstrap over the same "
        f"resampled {settings.over}, {settings.resamples} resamples; over the tasks both rows "
        f"hold; Holm over each row's columns; alpha {ALPHA:g})."
    )


@dataclass
class _Pair:
    """A row and the baseline on the same resamples. Where mteb left out different units of a
    task for the two (SummEval), both are recomputed on the units both kept."""

    base: _RowData
    other: _RowData
    settings: _Settings

    def column(self, names: list[str], column: str) -> tuple[float, np.ndarray] | None:
        """The column's observed difference and its B resampled differences, or None."""
        if self.settings.over == "tasks" and len(names) > 1:
            a = _column_draws(self.base, names, column, self.settings)
            b = _column_draws(self.other, names, column, self.settings)
            if a is None or b is None:
                return None
            delta = float(np.mean([self.other.scores[n] - self.base.scores[n] for n in names]))
            return delta, b - a
        found = [self.task(n) for n in names]
        if any(f is None for f in found):
            return None
        delta = float(np.mean([f[0] for f in found]))
        return delta, np.mean([f[1] for f in found], axis=0)

    def task(self, name: str) -> tuple[float, np.ndarray] | None:
        if name not in self.base.draws or name not in self.other.draws:
            return None
        mine, theirs = self.base.units[name], self.other.units[name]
        if all(a.ids == b.ids for a, b in zip(mine[0].parts, theirs[0].parts, strict=False)):
            delta = self.other.scores[name] - self.base.scores[name]
            return delta, self.other.draws[name] - self.base.draws[name]
        order = bootstrap.common(mine + theirs)
        a, point_a = self._on(self.base, mine, order)
        b, point_b = self._on(self.other, theirs, order)
        return point_b - point_a, b - a

    def _on(
        self, row: _RowData, found: list[TaskUnits], order: TaskUnits
    ) -> tuple[np.ndarray, float]:
        kept = bootstrap.on_units(order, found)
        resamples, seed = self.settings.resamples, self.settings.seed
        per_seed = [bootstrap.task_draws(u, resamples, seed) for u in kept]
        point = float(np.mean([main_score(u) for u in kept]))
        return replicates.combine(row.run, per_seed, resamples, seed), point


def _find(name: str, rows: list[Row], data: dict[str, _RowData]) -> str:
    labels = [r.label for r in rows if not r.quoted]
    # A label without its experiment, revision or "(N seeds)": the model name.
    hits = [label for label in labels if name in (label, re.split(r" \[| @| \(", label)[0])]
    if len(hits) != 1:
        raise NeobenchError(unknown("--baseline model", name, labels))
    return hits[0]
