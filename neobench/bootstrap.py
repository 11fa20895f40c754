"""Bootstrap intervals and paired tests over a task's evaluation units (neobench/units).

Every resample is drawn from a generator seeded by (seed, task name, part index), so the same
inputs and seed give the same numbers, and two models evaluated on the same units are resampled
with the same indices: the paired difference removes item difficulty (docs/uncertainty.md).

- `task_draws`: the task's main score on each of B resamples (units resampled within each part,
  parts kept, as mteb averages over them; an aggregate's parts are its subtasks' parts).
- `interval`: the percentile interval of those draws around the point estimate.
- `paired`: the difference B - A with its percentile interval and a two-sided p-value from the
  bootstrap distribution of the difference centred on the observed one.
- `holm`: Holm's step-down adjustment of p-values over the tasks compared.
- `benchmark_draws`: the mean over tasks; ``over="items"`` keeps the tasks and uses each task's
  item resamples (stratified: "if the test items were drawn again"), ``over="tasks"`` resamples
  the tasks themselves ("if the tasks were drawn again").
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from neobench import config
from neobench import units as units_mod
from neobench.errors import NeobenchError
from neobench.units import TaskUnits

RESAMPLES, SEED, ALPHA = config.RESAMPLES, config.BOOTSTRAP_SEED, config.ALPHA


@dataclass(frozen=True)
class Interval:
    point: float
    low: float
    high: float


@dataclass(frozen=True)
class Paired:
    baseline: float
    score: float
    delta: float  # score - baseline
    low: float  # interval of the difference
    high: float
    p: float  # two-sided


def _rng(seed: int, task: str, part: int) -> np.random.Generator:
    # crc32, not hash(): Python salts str hashes per process, which would change the draws.
    return np.random.default_rng([seed, zlib.crc32(task.encode()), part])


def _indices(units: TaskUnits, part: int, resamples: int, seed: int) -> np.ndarray:
    """[resamples, n] unit indices drawn with replacement."""
    n = units.parts[part].n
    return _rng(seed, units.task, part).integers(0, n, size=(resamples, n))


def task_draws(units: TaskUnits, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """[resamples] main scores of the task on resampled units."""
    check_resamples(resamples)
    per_part = []
    for i, part in enumerate(units.parts):
        per_part.append(units_mod.part_scores(units, part, _indices(units, i, resamples, seed)))
    return np.asarray(units_mod.combine(units, per_part), dtype=float)


def interval(
    units: TaskUnits, resamples: int = RESAMPLES, seed: int = SEED, alpha: float = ALPHA
) -> Interval:
    draws = task_draws(units, resamples, seed)
    low, high = np.quantile(draws, [alpha / 2, 1 - alpha / 2])
    return Interval(units_mod.main_score(units), float(low), float(high))


def paired(
    baseline: TaskUnits,
    other: TaskUnits,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    alpha: float = ALPHA,
) -> Paired:
    """``other`` minus ``baseline`` on the same resampled units (refused if the units differ)."""
    other = aligned(baseline, other)
    a = task_draws(baseline, resamples, seed)
    b = task_draws(other, resamples, seed)
    point_a, point_b = units_mod.main_score(baseline), units_mod.main_score(other)
    return paired_from_draws(point_a, point_b, a, b, alpha)


def paired_from_draws(
    point_a: float, point_b: float, a: np.ndarray, b: np.ndarray, alpha: float
) -> Paired:
    delta = point_b - point_a
    diffs = b - a
    low, high = np.quantile(diffs, [alpha / 2, 1 - alpha / 2])
    return Paired(point_a, point_b, delta, float(low), float(high), p_value(diffs, delta))


def p_value(diffs: np.ndarray, delta: float) -> float:
    """Two-sided p of an observed difference ``delta`` from its bootstrap draws ``diffs``.

    Centred on their mean, the draws approximate the difference's distribution under "no
    difference"; the +1 terms keep p above 0 with a finite number of resamples."""
    extreme = np.abs(diffs - diffs.mean()) >= abs(delta) - 1e-12
    return min(1.0, (1 + int(extreme.sum())) / (1 + len(diffs)))


def aligned(baseline: TaskUnits, other: TaskUnits) -> TaskUnits:
    """``other`` with its units in the baseline's order; a NeobenchError when the two did not
    see the same parts and items (nothing paired can be said then)."""
    if _layout(baseline) != _layout(other):
        raise NeobenchError(
            f"{baseline.task}: the two results cover different subsets or splits; re-run both "
            "with the same neobench and mteb versions."
        )
    parts = []
    for mine, theirs in zip(baseline.parts, other.parts, strict=True):
        if mine.ids == theirs.ids:
            parts.append(theirs)
            continue
        position = {unit: i for i, unit in enumerate(theirs.ids)}
        if len(position) != len(theirs.ids) or set(position) != set(mine.ids):
            raise NeobenchError(
                f"{baseline.task} ({mine.subset}/{mine.split}): the two results were computed on "
                f"different items ({mine.n} vs {theirs.n} units, "
                f"{len(set(mine.ids) ^ set(position))} not shared); a paired comparison needs the "
                "same items. Re-run both on the same task data."
            )
        order = np.asarray([position[u] for u in mine.ids])
        data = {k: v[order] for k, v in theirs.data.items()}
        parts.append(units_mod.Part(theirs.subset, theirs.split, list(mine.ids), data))
    return TaskUnits(other.task, other.type, other.main_score, other.unit, parts)


def benchmark_draws(
    tasks: list[TaskUnits], resamples: int = RESAMPLES, seed: int = SEED, over: str = "items"
) -> np.ndarray:
    """[resamples] draws of the mean over ``tasks`` (see the module docstring for ``over``)."""
    if over == "items":
        return np.mean([task_draws(t, resamples, seed) for t in tasks], axis=0)
    if over == "tasks":
        return over_tasks(np.asarray([units_mod.main_score(t) for t in tasks]), resamples, seed)
    raise NeobenchError(f"--over {over}: expected items or tasks.")


def over_tasks(
    points: np.ndarray, resamples: int = RESAMPLES, seed: int = SEED, key: str = "tasks"
) -> np.ndarray:
    """[resamples] means of ``points`` (one score per task) over tasks drawn with replacement;
    the same ``key`` and task count give the same draws, so two models are paired."""
    check_resamples(resamples)
    rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
    return points[rng.integers(0, len(points), size=(resamples, len(points)))].mean(axis=1)


def holm(pvalues: list[float]) -> list[float]:
    """Holm-adjusted p-values (step-down, monotone, capped at 1), in the input order."""
    m = len(pvalues)
    order = np.argsort(pvalues, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted.tolist()


def check_resamples(resamples: int) -> None:
    if resamples < 1:
        raise NeobenchError(
            f"--resamples {resamples}: must be a positive number of bootstrap resamples "
            f"(default {RESAMPLES})."
        )


def _layout(units: TaskUnits) -> list[tuple[str | None, str, str]]:
    return [(p.subtask, p.subset, p.split) for p in units.parts]
