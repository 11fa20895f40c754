"""The one statistics engine of the reports (`side`, `test`, `family`): `table --ci --baseline`
and `compare` both call it, so a cell marked ▲ is a comparison row that is significant and
higher, by construction (docs/architecture.md, "One statistics engine").
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from neobench.core.errors import NeobenchError, unknown
from neobench.core.runs import Run
from neobench.evaluation import units as units_mod
from neobench.evaluation.units import TaskUnits
from neobench.protocol.config import ALPHA, BOOTSTRAP_SEED, MIN_RESAMPLES, RESAMPLES, SEED_RANGE
from neobench.report import bootstrap, verified
from neobench.report.columns import AVG

OVER = ("items", "tasks")


@dataclass(frozen=True)
class Settings:
    resamples: int = RESAMPLES
    seed: int = BOOTSTRAP_SEED
    over: str = "items"  # what a column of several tasks resamples: items, or the tasks
    alpha: float = ALPHA


def check(settings: Settings) -> None:
    """Refuse, all at once, settings under which the intervals and p-values mean nothing."""
    problems = []
    if settings.resamples < MIN_RESAMPLES:
        problems.append(
            f"--resamples {settings.resamples}: at least {MIN_RESAMPLES} are needed (a 95% "
            "interval takes its ends from the 2.5% tails of the draws, and no p-value falls "
            f"below 1 / (resamples + 1)); the default is {RESAMPLES}."
        )
    low, high = SEED_RANGE
    if not low <= settings.seed < high:
        problems.append(f"--seed {settings.seed}: a seed is an integer from {low} to {high - 1}.")
    if settings.over not in OVER:
        problems.append(unknown("--over", settings.over, OVER))
    if problems:
        raise NeobenchError(problems)


@dataclass
class Side:
    """One run's resampling material, over the tasks it was asked for."""

    run: Run
    scores: dict[str, float]  # task -> main score, from the result files
    units: dict[str, list[TaskUnits]] = field(default_factory=dict)  # task -> one per seed
    draws: dict[str, np.ndarray] = field(default_factory=dict)  # task -> [resamples]
    # task -> why its units cannot be used (a damaged file, or one that gives another score)
    refused: dict[str, str] = field(default_factory=dict)


def member_units(run: Run, task: str) -> tuple[list[TaskUnits] | None, str | None]:
    """The task's units of every member, checked (report/verified.py), on the units all of them
    hold in the first member's order (index b names the same item for every seed): (units,
    None); (None, None) when a member saved none; (None, why) when a file fails the check."""
    found = []
    for member in run.each():
        units, problem = verified.read(member, task)
        if units is None:
            return None, problem
        found.append(units)
    if len(found) == 1:
        return found, None
    return bootstrap.on_units(bootstrap.common(found), found), None


def draws_of(run: Run, found: list[TaskUnits], settings: Settings) -> np.ndarray:
    """A row's draws from its members' units (two-level, seeds then items, for replicates)."""
    per_seed = [bootstrap.task_draws(u, settings.resamples, settings.seed) for u in found]
    if len(per_seed) == 1:
        return per_seed[0]
    stacked = np.stack(per_seed)
    return bootstrap.replicate_draws(stacked, settings.resamples, settings.seed, run.draw_key)


def side(run: Run, tasks: set[str], settings: Settings) -> Side:
    """The run's units and draws for each of ``tasks`` it holds with checked units for every
    member: THE place a run's resampled scores are computed."""
    out = Side(run, run.scores)
    for task in sorted(run.scores.keys() & tasks):
        found, problem = member_units(run, task)
        if problem is not None:
            out.refused[task] = problem
        elif found is not None:
            out.units[task] = found
            out.draws[task] = draws_of(run, found, settings)
    return out


def column_draws(
    data: Side, names: list[str], column: str, settings: Settings
) -> np.ndarray | None:
    """A column's draws over the tasks of ``names`` the run holds; None where they cannot be
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


def interval(draws: np.ndarray, alpha: float) -> tuple[float, float]:
    low, high = np.quantile(draws, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


@dataclass(frozen=True)
class Test:
    """``other`` minus ``base`` on one column: points, draws on the same resamples, the paired
    result and (after `family`) the Holm-adjusted p."""

    base_point: float
    point: float
    base_draws: np.ndarray
    draws: np.ndarray
    paired: bootstrap.Paired
    p_holm: float
    significant: bool
    dropped: dict[str, tuple[int, int, TaskUnits]] = field(default_factory=dict)

    @property
    def delta(self) -> float:
        return self.paired.delta

    @property
    def mark(self) -> int:
        """+1 / -1 where significantly above / below the baseline, else 0."""
        return (1 if self.delta > 0 else -1) if self.significant else 0


def _test(
    base_point: float,
    point: float,
    a: np.ndarray,
    b: np.ndarray,
    alpha: float,
    dropped: dict[str, tuple[int, int, TaskUnits]] | None = None,
) -> Test:
    paired = bootstrap.paired_from_draws(base_point, point, a, b, alpha)
    return Test(base_point, point, a, b, paired, paired.p, paired.p < alpha, dropped or {})


def task_test(base: Side, other: Side, task: str, settings: Settings) -> Test | None:
    """One task: both sides on the units all their seeds hold, in the baseline's order."""
    if task not in base.units or task not in other.units:
        return None
    order = bootstrap.common(base.units[task] + other.units[task])
    mine = bootstrap.on_units(order, base.units[task])
    theirs = bootstrap.on_units(order, other.units[task])
    if _unchanged(mine, base.units[task]) and _unchanged(theirs, other.units[task]):
        # The usual case: `side`'s draws are these; drawing again would cost a page of pairs.
        # The points are the stored scores, as the table and load_runs show them (the units
        # give the same score but for the result file's rounding: one number, one source).
        a, b = base.draws[task], other.draws[task]
        points = [base.scores[task], other.scores[task]]
    else:  # units one side lacks are left out of both: the scores recomputed on the rest
        a, b = draws_of(base.run, mine, settings), draws_of(other.run, theirs, settings)
        points = [float(np.mean([units_mod.main_score(u) for u in s])) for s in (mine, theirs)]
    left = [_left_out(s.units[task], order) for s in (base, other)]
    dropped = {task: (left[0], left[1], order)} if any(left) else {}
    return _test(points[0], points[1], a, b, settings.alpha, dropped)


def _unchanged(paired: list[TaskUnits], found: list[TaskUnits]) -> bool:
    """Whether `bootstrap.on_units` gave every seed's parts back as the same objects (it does
    when their units and order are unchanged), so the draws of ``found`` hold."""
    pairs = zip(paired, found, strict=True)
    return all(p is q for a, b in pairs for p, q in zip(a.parts, b.parts, strict=True))


def _left_out(found: list[TaskUnits], order: TaskUnits) -> int:
    """How many of one side's units (its first seed's) are not among ``order``'s."""
    return sum(p.n for p in found[0].parts) - sum(p.n for p in order.parts)


def test(base: Side, other: Side, names: list[str], column: str, settings: Settings) -> Test | None:
    """The column's test over the tasks of ``names`` both sides hold, or None."""
    shared = [n for n in names if n in base.scores and n in other.scores]
    if not shared:
        return None
    if settings.over == "tasks" and len(names) > 1:
        a = column_draws(base, shared, column, settings)
        b = column_draws(other, shared, column, settings)
        if a is None or b is None:
            return None
        base_point = float(np.mean([base.scores[n] for n in shared]))
        point = float(np.mean([other.scores[n] for n in shared]))
        return _test(base_point, point, a, b, settings.alpha)
    found = [task_test(base, other, n, settings) for n in shared]
    if any(f is None for f in found):
        return None
    if len(found) == 1:
        return found[0]
    points = [
        float(np.mean([f.base_point for f in found])),
        float(np.mean([f.point for f in found])),
    ]
    a, b = np.mean([f.base_draws for f in found], 0), np.mean([f.draws for f in found], 0)
    dropped = {k: v for f in found for k, v in f.dropped.items()}
    return _test(points[0], points[1], a, b, settings.alpha, dropped)


def family(
    base: Side, other: Side, columns: dict[str, list[str]], settings: Settings
) -> dict[str, Test]:
    """Every column's test, Holm-adjusted over the columns but Avg., a single test."""
    tests = {c: t for c, n in columns.items() if (t := test(base, other, n, c, settings))}
    adjusted = [c for c in tests if c != AVG]
    holm = bootstrap.holm([tests[c].paired.p for c in adjusted]) if adjusted else []
    out = {}
    for column, found in tests.items():
        p = holm[adjusted.index(column)] if column in adjusted else found.paired.p
        out[column] = replace(found, p_holm=p, significant=bool(p < settings.alpha))
    return out
