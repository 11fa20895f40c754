"""`neobench table --ci` and `--baseline`: intervals and significance marks on the table's cells,
by report/stats.py (a mark is `compare`'s test: stats.family). Method: docs/uncertainty.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from neobench.core.errors import NeobenchError
from neobench.core.runs import Run, find_one
from neobench.report import ranks, stats
from neobench.report.columns import AVG, DOWN, MARKS, UP
from neobench.report.table import LeaderTable

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask


def annotate(
    table: LeaderTable,
    runs: dict[str, Run],
    tasks: list[AbsTask],
    settings: stats.Settings,
    *,
    ci: bool,
    baseline: str | None,
    ranked: list[str] | None = None,
) -> None:
    """Fill the rows' ``ci`` (when ``ci``), ``marks`` (when ``baseline``) and ``ranks`` on the
    columns ``ranked``, and the legends."""
    stats.check(settings)
    columns = table.columns(tasks)
    needed = set().union(*columns.values())  # a task no column averages needs no resampling
    sides = {label: stats.side(run, needed, settings) for label, run in runs.items()}
    refused = [why for side in sides.values() for why in side.refused.values()]
    if settings.over == "items" and not any(s.draws for s in sides.values()):
        if refused:
            raise NeobenchError(refused)
        raise NeobenchError(
            "--ci/--baseline/--ranks: none of the results has per-item predictions (they were "
            "evaluated before neobench saved them, or with --no-predictions). Delete the task "
            "files and re-run the same `neobench eval` to add them, or use --over tasks."
        )
    for row in table.rows:
        if row.label in sides and ci:
            row.ci = _intervals(sides[row.label], columns, settings)
    table.notes += _missing_notes(sides, needed)
    if ci:
        table.notes.append(_legend(settings))
    if baseline:
        _mark(table, runs, sides, columns, baseline, settings)
    if ranked:
        _rank(table, sides, {c: columns[c] for c in ranked if c in columns}, settings)


def _legend(settings: stats.Settings) -> str:
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


def _intervals(
    side: stats.Side, columns: dict[str, list[str]], settings: stats.Settings
) -> dict[str, tuple[float, float]]:
    out = {}
    for column, names in columns.items():
        found = stats.column_draws(side, names, column, settings)
        if found is not None:
            low, high = stats.interval(found, settings.alpha)
            out[column] = (100 * low, 100 * high)
    return out


def _missing_notes(sides: dict[str, stats.Side], needed: set[str]) -> list[str]:
    notes = []
    for label, side in sides.items():
        notes += [f"{label}: {why}" for _, why in sorted(side.refused.items())]
        missing = sorted((side.scores.keys() & needed) - side.draws.keys() - side.refused.keys())
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
    runs: dict[str, Run],
    sides: dict[str, stats.Side],
    columns: dict[str, list[str]],
    baseline: str,
    settings: stats.Settings,
) -> None:
    base, _ = find_one(list(runs.items()), baseline, "--baseline model")
    table.baseline = base
    for row in table.rows:
        if row.label == base or row.label not in sides:
            continue
        for column, found in stats.family(sides[base], sides[row.label], columns, settings).items():
            if found.mark:
                row.marks[column] = MARKS[found.mark]
    table.notes.append(
        f"{UP} / {DOWN}: significantly above / below {base} (paired bootstrap over the same "
        f"resampled {settings.over}, {settings.resamples} resamples; over the tasks both rows "
        f"hold; Holm over each row's columns but Avg., a single test; alpha "
        f"{settings.alpha:g}; the same test as `neobench compare`)."
    )


def _rank(
    table: LeaderTable,
    sides: dict[str, stats.Side],
    columns: dict[str, list[str]],
    settings: stats.Settings,
) -> None:
    """Each computed row's rank, interval and group on each of ``columns`` (report/ranks.py)."""
    computed = {row.label: sides[row.label] for row in table.rows if row.label in sides}
    ranks.check(len(computed), settings)
    table.ranked = list(columns)
    for column, names in columns.items():
        for label, found in ranks.rank_column(computed, names, column, settings).items():
            table.row(label).ranks[column] = found
    unranked = [label for label in computed if AVG in columns and AVG not in table.row(label).ranks]
    if unranked:
        table.notes.append(
            f"Not ranked: {', '.join(unranked)} (a task of Avg. without per-item predictions "
            "or not held by the row)."
        )
    table.notes.append(
        f"Rank [95% interval] groups: 1 = the highest score; the interval runs from 1 + the rows "
        f"significantly above to N - the rows significantly below (paired bootstrap over the "
        f"same resampled {settings.over}, {settings.resamples} resamples, between every two "
        f"ranked rows of the column, Holm over those pairs, alpha {settings.alpha:g}); rows "
        "sharing a letter are not significantly different."
    )
