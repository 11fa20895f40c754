"""`neobench table --ci` and `--baseline`: intervals and significance marks on the table's cells.

A cell's interval comes from the per-item units each result carries (neobench/units): every task
of the row is resampled (its units, B times, seeded: neobench/bootstrap.py) and a type column or
Avg. is the mean of its tasks on each resample, with the tasks fixed ("if the test items were
drawn again"). A cell is marked against the baseline row when the paired difference on the same
resamples is significant after Holm's adjustment over that row's marked columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from neobench import bootstrap, units
from neobench.config import ALPHA
from neobench.errors import NeobenchError
from neobench.results import Run
from neobench.table import AVG, LeaderTable, Row

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

UP, DOWN = "▲", "▼"


def annotate(
    table: LeaderTable,
    runs: dict[str, Run],
    tasks: list[AbsTask],
    resamples: int,
    seed: int,
    *,
    ci: bool,
    baseline: str | None,
) -> None:
    """Fill the rows' ``ci`` (when ``ci``) and ``marks`` (when ``baseline``), and the legend."""
    bootstrap.check_resamples(resamples)
    draws = {label: _draws(run, resamples, seed) for label, run in runs.items()}
    if not any(draws.values()):
        raise NeobenchError(
            "--ci/--baseline: none of the results has per-item predictions (they were evaluated "
            "before neobench saved them, or with --no-predictions). Delete the task files and "
            "re-run the same `neobench eval` to add them."
        )
    columns = _columns(table, tasks)
    for row in table.rows:
        if row.label in draws and ci:
            row.ci = _intervals(draws[row.label], columns)
    table.notes += _missing_notes(runs, draws)
    if ci:
        table.notes.append(
            f"± = half the width of the 95% bootstrap interval: each task's units (pairs, "
            f"queries, items...) resampled {resamples} times (seed {seed}); type columns and "
            "Avg. average their tasks on each resample, tasks fixed."
        )
    if baseline:
        _mark(table, runs, draws, columns, baseline, resamples)


def _draws(run: Run, resamples: int, seed: int) -> dict[str, np.ndarray]:
    """Task -> its B resampled main scores, for the tasks whose units were saved."""
    out = {}
    for task in sorted(run.scores):
        path = units.path_for(run.folder, task)
        if path.is_file():
            out[task] = bootstrap.task_draws(units.read(path), resamples, seed)
    return out


def _columns(table: LeaderTable, tasks: list[AbsTask]) -> dict[str, list[str]]:
    """Each annotated column and the tasks it averages."""
    if table.per_task:
        columns = {t: [t] for t in table.task_names}
    else:
        columns = {}
        for task in tasks:
            columns.setdefault(task.metadata.type, []).append(task.metadata.name)
    columns[AVG] = [t.metadata.name for t in tasks]
    return columns


def _column_draws(draws: dict[str, np.ndarray], names: list[str]) -> np.ndarray | None:
    """A column's draws: the mean of its tasks present, None unless every one has units."""
    present = [n for n in names if n in draws]
    return np.mean([draws[n] for n in present], axis=0) if present else None


def _intervals(
    draws: dict[str, np.ndarray], columns: dict[str, list[str]]
) -> dict[str, tuple[float, float]]:
    out = {}
    for column, names in columns.items():
        found = _column_draws(draws, names)
        if found is not None:
            low, high = np.quantile(found, [ALPHA / 2, 1 - ALPHA / 2])
            out[column] = (100 * float(low), 100 * float(high))
    return out


def _missing_notes(runs: dict[str, Run], draws: dict[str, dict[str, np.ndarray]]) -> list[str]:
    notes = []
    for label, run in runs.items():
        missing = sorted(set(run.scores) - set(draws[label]))
        if missing:
            notes.append(
                f"{label}: {len(missing)} task(s) without per-item predictions "
                f"({', '.join(missing[:6])}{' ...' if len(missing) > 6 else ''}): the columns "
                "holding them have no interval or mark. Delete those task files and re-run the "
                "same `neobench eval` to add them."
            )
    return notes


def _mark(
    table: LeaderTable,
    runs: dict[str, Run],
    draws: dict[str, dict[str, np.ndarray]],
    columns: dict[str, list[str]],
    baseline: str,
    resamples: int,
) -> None:
    base = _find(baseline, table.rows, draws)
    for row in table.rows:
        if row.label == base or row.label not in draws:
            continue
        tests = {}
        for column, names in columns.items():
            # Only the tasks both rows hold with units: a paired difference over shared items.
            shared = [n for n in names if n in draws[row.label] and n in draws[base]]
            if shared and len(shared) == len([n for n in names if n in draws[base]]):
                a = _column_draws(draws[base], shared)
                b = _column_draws(draws[row.label], shared)
                delta = float(
                    np.mean([runs[row.label].scores[n] - runs[base].scores[n] for n in shared])
                )
                tests[column] = (delta, bootstrap.p_value(b - a, delta))
        adjusted = bootstrap.holm([p for _, p in tests.values()]) if tests else []
        for (column, (delta, _)), p in zip(tests.items(), adjusted, strict=True):
            if p < ALPHA:
                row.marks[column] = UP if delta > 0 else DOWN
    table.notes.append(
        f"{UP} / {DOWN}: significantly above / below {base} (paired bootstrap on the same "
        f"resamples, {resamples} per task; Holm over each row's columns; alpha {ALPHA:g})."
    )


def _find(name: str, rows: list[Row], draws: dict[str, dict[str, np.ndarray]]) -> str:
    from neobench.errors import unknown

    labels = [r.label for r in rows if not r.quoted]
    if name in labels:
        if not draws.get(name):
            raise NeobenchError(
                f"--baseline {name}: this row has no per-item predictions; re-run its "
                "`neobench eval` (after deleting its task files) to add them."
            )
        return name
    hits = [label for label in labels if label.split(" [")[0].split(" @")[0] == name]
    if len(hits) == 1:
        return _find(hits[0], rows, draws)
    raise NeobenchError(unknown("--baseline model", name, labels))
