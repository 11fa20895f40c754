"""Bootstrap intervals and paired tests over a task's evaluation units (neobench/evaluation/units).

Every resample is drawn from a generator seeded by (seed, task name, part index), so two models on
the same units are resampled with the same indices; units are resampled within each part, parts
kept, as mteb averages over them. The method and why: docs/uncertainty.md.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from neobench.core.errors import NeobenchError
from neobench.evaluation import units as units_mod
from neobench.evaluation.units import TaskUnits
from neobench.protocol import config

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


# Unit indices drawn (and scored) at a time: 32 MB of int64. All at once, AmazonPolarity's
# 400,000 test items x 1,000 resamples would take 3.2 GB.
BLOCK = 4_000_000


def _indices(units: TaskUnits, part: int, resamples: int, seed: int) -> np.ndarray:
    """[resamples, n] unit indices drawn with replacement (all at once: for tests)."""
    n = units.parts[part].n
    return _rng(seed, units.task, part).integers(0, n, size=(resamples, n))


def _part_draws(units: TaskUnits, part: int, resamples: int, seed: int) -> np.ndarray:
    """[resamples] scores of one part, drawn and scored in blocks of rows (a generator gives the
    same numbers in blocks as in one call: `_indices`'s, whatever the block size)."""
    n = units.parts[part].n
    rng = _rng(seed, units.task, part)
    rows = max(1, BLOCK // max(1, n))
    out = []
    for start in range(0, resamples, rows):
        idx = rng.integers(0, n, size=(min(rows, resamples - start), n))
        out.append(units_mod.part_scores(units, units.parts[part], idx))
    return np.concatenate(out)


def task_draws(units: TaskUnits, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """[resamples] main scores of the task on resampled units."""
    check_resamples(resamples)
    per_part = [_part_draws(units, i, resamples, seed) for i in range(len(units.parts))]
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
    """``other`` minus ``baseline`` on the same resampled units they share (`shared`)."""
    pair = shared(baseline, other)
    a, b = task_draws(pair.baseline, resamples, seed), task_draws(pair.other, resamples, seed)
    point_a, point_b = units_mod.main_score(pair.baseline), units_mod.main_score(pair.other)
    return paired_from_draws(point_a, point_b, a, b, alpha)


def paired_from_draws(
    point_a: float, point_b: float, a: np.ndarray, b: np.ndarray, alpha: float
) -> Paired:
    delta = point_b - point_a
    diffs = b - a
    low, high = np.quantile(diffs, [alpha / 2, 1 - alpha / 2])
    return Paired(point_a, point_b, delta, float(low), float(high), p_value(diffs, delta))


def p_value(diffs: np.ndarray, delta: float) -> float:
    """Two-sided p of an observed ``delta`` from its draws ``diffs``, centred on their mean (the
    distribution under "no difference"); the +1 terms keep p above 0."""
    extreme = np.abs(diffs - diffs.mean()) >= abs(delta) - 1e-12
    return min(1.0, (1 + int(extreme.sum())) / (1 + len(diffs)))


@dataclass(frozen=True)
class Shared:
    """Two results' units of one task on the same items in the same order (`shared`)."""

    baseline: TaskUnits
    other: TaskUnits
    only_baseline: int  # units left out because only the baseline's result holds them
    only_other: int  # ... only the other's

    @property
    def dropped(self) -> int:
        return self.only_baseline + self.only_other


def shared(baseline: TaskUnits, other: TaskUnits) -> Shared:
    """Both results on the units both hold, ``other``'s in the baseline's order. Where mteb leaves
    units out per model (`units.drops_units`: SummEval), units only one holds are left out of
    both; anything else that differs is refused."""
    if _layout(baseline) != _layout(other):
        raise NeobenchError(
            f"{baseline.task}: the two results cover different subsets or splits; re-run both "
            "with the same neobench and mteb versions."
        )
    mine, theirs, only_mine, only_theirs = [], [], 0, 0
    for a, b in zip(baseline.parts, other.parts, strict=True):
        kept_a, kept_b = _shared_part(baseline, a, b)
        mine.append(kept_a)
        theirs.append(kept_b)
        only_mine, only_theirs = only_mine + a.n - kept_a.n, only_theirs + b.n - kept_b.n
    return Shared(_with_parts(baseline, mine), _with_parts(other, theirs), only_mine, only_theirs)


def _shared_part(
    units: TaskUnits, mine: units_mod.Part, theirs: units_mod.Part
) -> tuple[units_mod.Part, units_mod.Part]:
    if mine.ids == theirs.ids:
        return mine, theirs
    position = {unit: i for i, unit in enumerate(theirs.ids)}
    unique = len(position) == theirs.n and len(set(mine.ids)) == mine.n
    same = unique and set(position) == set(mine.ids)
    keep = [i for i, unit in enumerate(mine.ids) if unit in position]
    if not same and not (unique and keep and _may_drop(units.type, mine, theirs)):
        raise NeobenchError(
            f"{units.task} ({mine.subset}/{mine.split}): the two results were computed on "
            f"different items ({mine.n} vs {theirs.n} units, "
            f"{len(set(mine.ids) ^ set(position))} not shared); a paired comparison needs the "
            "same items. Re-run both on the same task data."
        )
    ids = [mine.ids[i] for i in keep]
    index = np.asarray([position[unit] for unit in ids], dtype=np.intp)
    return _take(mine, np.asarray(keep), ids), _take(theirs, index, ids)


def _may_drop(task_type: str, mine: units_mod.Part, theirs: units_mod.Part) -> bool:
    """Units missing on one side were left out by mteb: the type drops units, and both parts
    had the same candidates (unknown in files written before ``rows``)."""
    known = mine.rows is not None and theirs.rows is not None
    return units_mod.drops_units(task_type) and (not known or mine.rows == theirs.rows)


def _take(part: units_mod.Part, index: np.ndarray, ids: list[str]) -> units_mod.Part:
    data = {k: v[index] for k, v in part.data.items()}
    return units_mod.Part(part.subset, part.split, ids, data, part.subtask, part.rows)


def _with_parts(units: TaskUnits, parts: list[units_mod.Part]) -> TaskUnits:
    return TaskUnits(units.task, units.type, units.main_score, units.unit, parts)


def common(found: list[TaskUnits]) -> TaskUnits:
    """The first result's units restricted to those every result holds (`shared` in turn)."""
    order = found[0]
    for other in found[1:]:
        order = shared(order, other).baseline
    return order


def on_units(order: TaskUnits, found: list[TaskUnits]) -> list[TaskUnits]:
    """Each result of ``found`` on ``order``'s units, in ``order``'s order."""
    return [shared(order, u).other for u in found]


def over_tasks(
    points: np.ndarray, resamples: int = RESAMPLES, seed: int = SEED, key: str = "tasks"
) -> np.ndarray:
    """[resamples] means of ``points`` (one per task) over tasks drawn with replacement; the same
    ``key`` and task count give the same draws, so two models are paired."""
    check_resamples(resamples)
    rng = np.random.default_rng([seed, zlib.crc32(key.encode())])
    return points[rng.integers(0, len(points), size=(resamples, len(points)))].mean(axis=1)


def replicate_draws(
    per_seed: np.ndarray, resamples: int = RESAMPLES, seed: int = SEED, key: str = "seeds"
) -> np.ndarray:
    """[resamples] two-level draws of the mean over seed replicates (docs/uncertainty.md, "Seed
    replicates"). ``per_seed``: [seeds, resamples], the b-th of each seed on the same items. The
    seed draws depend on ``seed`` and ``key`` only: one key per row, for all its columns."""
    check_resamples(resamples)
    per_seed = np.asarray(per_seed, dtype=float)
    count = per_seed.shape[0]
    rng = np.random.default_rng([seed, zlib.crc32(key.encode()), count])
    drawn = rng.integers(0, count, size=(resamples, count))  # [resamples, seeds]
    return per_seed[drawn, np.arange(resamples)[:, None]].mean(axis=1)


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
