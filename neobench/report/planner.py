"""`neobench plan`: from a pilot's results, how large a difference between two backbones
neobench's paired test detects with N seeds each, and how many seeds a given difference needs
(docs/uncertainty.md, "How many seeds: the planner").

Two variances make the test's noise: the seeds' (how much another fine-tuning seed moves a
row's score, pooled over the pilot's rows of seed replicates; it shrinks as 1/N) and the
items' (how much the difference of two rows moves if the test items were drawn again, paired on
the same resamples; more seeds do not shrink it). The power is that of the test the table and
`compare` run: its two-level bootstrap sees (N - 1) / N of the seed variance, and its estimate
of it from N seeds is itself noisy; both are taken into account, so the planner also says how
often the test calls a difference where there is none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import TYPE_CHECKING

import numpy as np

from neobench.core.errors import NeobenchError
from neobench.core.runs import Run, find
from neobench.protocol.config import ALPHA, BOOTSTRAP_SEED, PLAN_SEEDS, POWER, RESAMPLES
from neobench.protocol.listing import Listing
from neobench.report import bootstrap, stats
from neobench.report.columns import AVG

if TYPE_CHECKING:
    import pandas as pd
    from mteb.abstasks.abstask import AbsTask

    from neobench.evaluation.units import TaskUnits

MOST_SEEDS = 1_000  # the planner looks no further
PLAN_LEGEND = (
    "x100. seed sd: how much another fine-tuning seed moves a row's score; item sd: how much the "
    "difference of two rows moves if the test items were drawn again; detectable: the smallest "
    f"true difference the paired test (table --baseline, compare) calls significant with "
    f"{POWER:.0%} power; false positives: how often it calls one where there is none (above 5%: "
    "too few seeds for the bootstrap to see their spread). docs/uncertainty.md, 'How many seeds'."
)
# Draws of the seed variance's estimate (a scaled chi-square) the power is averaged over.
ESTIMATE_DRAWS = 4_000


@dataclass(frozen=True)
class Noise:
    """One column's noise, x100: the seeds' sd of one row's score; the items' sd of the
    difference of two rows that no number of seeds removes (each backbone's own hard and easy
    items); and the part of the items' sd that averages out over seeds (seed-by-item), for one
    seed per row. ``paired``: the items' part measured on two rows' same resamples; else an
    upper bound from one row."""

    seed_sd: float
    item_sd: float
    paired: bool
    seed_item_sd: float = 0.0


def power(noise: Noise, delta: float, seeds: int, alpha: float = ALPHA) -> float:
    """The chance that neobench's paired test on a column calls a true difference ``delta``
    (x100) between two rows of ``seeds`` seeds each significant (``delta`` 0: its false-positive
    rate)."""
    z = NormalDist().inv_cdf(1 - alpha / 2)
    # The difference's spread over new items and new seeds (the seed sd holds the seed-by-item
    # noise on fixed items already), and the spread the two-level bootstrap sees: (N - 1) / N of
    # an estimate of the seed variance on 2(N - 1) degrees of freedom, plus the items' part of
    # the drawn seeds' draws, whose seed-by-item share it counts a second time, over seeds drawn
    # with replacement (N draws of N hold a seed c times, E[sum c^2] = 2N - 1).
    true_var = 2 * noise.seed_sd**2 / seeds + noise.item_sd**2
    items_seen = noise.item_sd**2 + noise.seed_item_sd**2 * (2 * seeds - 1) / seeds**2
    if seeds > 1:
        rng = np.random.default_rng(0)
        estimate = rng.chisquare(2 * (seeds - 1), ESTIMATE_DRAWS) / (2 * (seeds - 1))
        seen = 2 * noise.seed_sd**2 * estimate * (seeds - 1) / seeds**2 + items_seen
    else:  # one seed: no seed level to resample
        seen = np.full(ESTIMATE_DRAWS, items_seen)
    sd, limit = math.sqrt(true_var), z * np.sqrt(seen)
    cdf = NormalDist().cdf
    found = [cdf((delta - c) / sd) + cdf((-delta - c) / sd) for c in limit] if sd > 0 else [1.0]
    return float(np.mean(found))


def detectable(noise: Noise, seeds: int, target: float = POWER, alpha: float = ALPHA) -> float:
    """The smallest difference (x100) the test detects with ``target`` power at ``seeds``."""
    low, high = 0.0, 1.0
    while power(noise, high, seeds, alpha) < target:
        high *= 2
    for _ in range(50):
        middle = (low + high) / 2
        low, high = (middle, high) if power(noise, middle, seeds, alpha) < target else (low, middle)
    return high


def seeds_for(
    noise: Noise, delta: float, target: float = POWER, alpha: float = ALPHA
) -> int | None:
    """The fewest seeds per row that detect ``delta`` with ``target`` power; None when more
    seeds cannot (the items' variance alone is too large: more test items would)."""
    if power(noise, delta, MOST_SEEDS, alpha) < target:
        return None
    low, high = 1, MOST_SEEDS
    while low < high:  # power grows with the seeds
        middle = (low + high) // 2
        low, high = (
            (middle + 1, high) if power(noise, delta, middle, alpha) < target else (low, middle)
        )
    return low


@dataclass(frozen=True)
class ColumnPlan:
    column: str
    noise: Noise
    seeds: int
    detectable: float  # x100, at POWER with ``seeds``
    false_positives: float  # the test's rate of significant calls with no true difference
    delta: float | None = None
    power: float | None = None  # at ``delta`` with ``seeds``
    seeds_for_delta: int | None = None  # None: no number of seeds reaches POWER


@dataclass
class SeedsPlan:
    results: list[str]
    rows: dict[str, int]  # row label -> its seeds in the pilot
    tasks: int  # the tasks the rows all hold with per-item predictions
    columns: list[ColumnPlan]
    notes: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        pilot = ", ".join(label + ("" if n > 1 else " (1 seed)") for label, n in self.rows.items())
        return f"Pilot: {pilot}; {self.tasks} tasks every row holds with per-item predictions."

    def listing(self) -> Listing:
        """One row per column (x100): the noise, the difference ``seeds`` detect at 80% power,
        the test's false-positive rate there, and with a delta its power and the seeds it needs."""
        first = self.columns[0]
        head = ["column", "seed sd", "item sd", f"detectable ({first.seeds} seeds)"]
        head.append("false positives")
        if first.delta is not None:
            head += [f"power at {first.delta:g}", f"seeds for {first.delta:g}"]
        rows = []
        for c in self.columns:
            row = [c.column, f"{c.noise.seed_sd:.2f}", f"{c.noise.item_sd:.2f}"]
            row += [f"{c.detectable:.2f}", f"{c.false_positives:.1%}"]
            if c.delta is not None and c.power is not None:
                needed = "more items" if c.seeds_for_delta is None else str(c.seeds_for_delta)
                row += [f"{c.power:.0%}", needed]
            rows.append(tuple(row))
        return Listing(self.title, tuple(head), rows)

    def lines(self) -> list[str]:
        """The plan as plain lines (a study's dry run prints them): the listing, then the notes."""
        found = self.listing()
        return [found.title, *found.plain(), *self.notes]

    def to_pandas(self) -> pd.DataFrame:
        """One row per column: its noise, the detectable difference, power and seeds needed."""
        from neobench.core.frames import frame

        rows = [
            {
                "column": c.column,
                "seed_sd": c.noise.seed_sd,
                "item_sd": c.noise.item_sd,
                "paired": c.noise.paired,
                "seeds": c.seeds,
                "detectable": c.detectable,
                "false_positives": c.false_positives,
                "delta": c.delta,
                "power": c.power,
                "seeds_for_delta": c.seeds_for_delta,
            }
            for c in self.columns
        ]
        return frame(rows, ["seed_sd", "item_sd", "detectable", "delta"])


def plan_seeds(
    results: list[str | Path],
    benchmark: str,
    *,
    models: list[str] | None = None,
    delta: float | None = None,
    seeds: int = PLAN_SEEDS,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> SeedsPlan:
    """The seeds plan of the pilot under ``results``: per task type and for Avg."""
    from neobench.protocol.tasks import load_benchmark, select_tasks
    from neobench.report.load import load

    problems = []
    if seeds < 1:
        problems.append(f"--seeds {seeds}: plan for at least one seed per backbone.")
    if delta is not None and not delta > 0:
        problems.append(
            f"--delta {delta:g}: a difference to detect is a positive number of points (x100)."
        )
    if problems:
        raise NeobenchError(problems)
    settings = stats.Settings(resamples, seed)
    stats.check(settings)
    tasks = select_tasks(load_benchmark(benchmark))
    runs, _, _ = load(results, tasks)
    chosen = dict(find(runs, models))
    if not chosen:
        raise NeobenchError(f"--results {', '.join(map(str, results))}: no evaluated run found.")
    pilot = _pilot(chosen, tasks, settings)
    columns = []
    for column, names in pilot.columns.items():
        noise = pilot.noise(names)
        plan = ColumnPlan(column, noise, seeds, detectable(noise, seeds), power(noise, 0.0, seeds))
        if delta is not None:
            plan = ColumnPlan(
                column, noise, seeds, plan.detectable, plan.false_positives, delta,
                power(noise, delta, seeds), seeds_for(noise, delta),
            )  # fmt: skip
        columns.append(plan)
    return SeedsPlan([str(r) for r in results], pilot.seeds, len(pilot.tasks), columns, pilot.notes)


@dataclass
class _Pilot:
    """The pilot's rows resampled on the tasks they all hold: per task, each row's seed scores
    and its items-only draws (the mean over its seeds of each seed's draws, on the same items)."""

    seeds: dict[str, int]
    tasks: list[str]
    columns: dict[str, list[str]]
    scores: dict[str, dict[str, list[float]]]  # row -> task -> its seeds' scores
    draws: dict[str, dict[str, np.ndarray]]  # row -> task -> [seeds, resamples] item draws
    notes: list[str]

    def noise(self, names: list[str]) -> Noise:
        """The column of ``names``' noise, x100."""
        variances, weights, seed_item = [], [], []
        for row, by_task in self.scores.items():
            per_seed = np.mean([by_task[n] for n in names], axis=0)
            k = len(per_seed)
            if k > 1:
                variances.append(float(np.var(per_seed, ddof=1)))
                weights.append(k - 1)
                # Each seed's item draws spread more than their mean: by the seed-by-item part.
                each = np.mean([self.draws[row][n] for n in names], axis=0)  # [seeds, resamples]
                single, mean = float(np.mean(each.var(axis=1))), float(each.mean(axis=0).var())
                seed_item.append(max(single - mean, 0.0) * k / (k - 1))
        seed_var = float(np.average(variances, weights=weights)) if variances else 0.0
        # the seed-by-item variance of one row's score for one seed (a difference holds two)
        one = float(np.average(seed_item, weights=weights)) if seed_item else 0.0
        means = {
            r: np.mean([d[n].mean(axis=0) for n in names], axis=0) for r, d in self.draws.items()
        }
        rows = list(means)
        if len(rows) > 1:
            pairs = [(a, b) for i, a in enumerate(rows) for b in rows[i + 1 :]]
            found = [
                np.var(means[a] - means[b]) - one / self.seeds[a] - one / self.seeds[b]
                for a, b in pairs
            ]
            item_var = max(float(np.mean(found)), 0.0)
        else:  # one row: the difference of two independent rows, an upper bound
            item_var = max(2 * (float(np.var(means[rows[0]])) - one / self.seeds[rows[0]]), 0.0)
        return Noise(
            100 * math.sqrt(seed_var), 100 * math.sqrt(item_var), len(rows) > 1,
            100 * math.sqrt(2 * one),
        )  # fmt: skip


def _pilot(chosen: dict[str, Run], tasks: list[AbsTask], settings: stats.Settings) -> _Pilot:
    usable: dict[str, dict[str, list]] = {}
    notes: list[str] = []
    for label, run in chosen.items():
        held = {}
        for name in sorted(run.scores):
            found, problem = stats.member_units(run, name)
            if problem is None and found is not None:
                held[name] = found
        if held:
            usable[label] = held
        else:
            notes.append(f"Left out: {label} (no task with per-item predictions).")
    if not usable:
        raise NeobenchError(
            "no run of the pilot has per-item predictions (evaluated before neobench saved "
            "them, or with --no-predictions): re-run the same `neobench eval` to add them."
        )
    shared = sorted(set.intersection(*(set(h) for h in usable.values())))
    if not shared:
        raise NeobenchError("the pilot's rows hold no task in common with per-item predictions.")
    if not any(len(chosen[label].each()) > 1 for label in usable):
        raise NeobenchError(
            "the pilot has no row of seed replicates, so the seeds' variance is unknown: "
            "fine-tune one backbone with two or more seeds (`neobench finetune --seeds 0,1`), "
            "evaluate it, and plan again."
        )
    by_type: dict[str, list[str]] = {}
    for task in tasks:
        if task.metadata.name in shared:
            by_type.setdefault(task.metadata.type, []).append(task.metadata.name)
    columns = {AVG: shared, **by_type}
    scores = {
        label: {n: [m.scores[n] for m in chosen[label].each()] for n in shared} for label in usable
    }

    def each_seed(units: list[TaskUnits]) -> np.ndarray:  # [seeds, resamples], the same items
        return np.stack([bootstrap.task_draws(u, settings.resamples, settings.seed) for u in units])

    draws = {label: {n: each_seed(usable[label][n]) for n in shared} for label in usable}
    if len(usable) == 1:
        notes.append(
            "One row: the items' variance of a difference is taken as that of two independent "
            "rows (an upper bound; a second backbone in the pilot measures the pairing's gain)."
        )
    seeds = {label: len(chosen[label].each()) for label in usable}
    return _Pilot(seeds, shared, columns, scores, draws, notes)
