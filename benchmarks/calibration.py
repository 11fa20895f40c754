"""Calibration of `neobench table --ranks` by simulation: results with known true differences,
drawn around the golden runs' variances, ranked by neobench's own engine many times over.

A row's value on an item of a task is its true score + an item difficulty every row shares + a
row-by-item part (the row's own hard and easy items, the same for all its seeds) + a seed effect
+ a seed-by-item noise. The per-item spread and the share of it the rows have in common are the
golden runs' (their units files, tests/golden/runs), and so is the seed spread (half a seed effect,
half seed-by-item noise); a scenario may scale the seed spread up (the golden replicates are a
4-step tiny BERT whose seeds barely differ).

Ranks: tables of six rows whose true differences are multiples of the standard error of a paired
difference on Avg. (a tie, near rows, far ones), ranked by neobench's engine; printed: how often a
row's 95% rank interval holds its true rank (neobench's, and percentile intervals of the resampled
rank for comparison), how often the tied rows share a letter, how often the best and the worst row
are told apart.

The planner: a pilot of two rows estimates the noise (report/planner.py); its power for the
difference it calls detectable (80%) and for no difference is compared with how often the paired
test on Avg. is significant over simulated experiments of that design.

    python benchmarks/calibration.py [--repetitions 300] [--seeds 3] [--resamples 500]
"""

from __future__ import annotations

import argparse
import functools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neobench.core.runs import Run
from neobench.evaluation import units as units_mod
from neobench.evaluation.units import Part, TaskUnits, TypeSpec
from neobench.report import ranks, stats
from neobench.report.columns import AVG

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "golden" / "runs"
SIMULATED = "Simulated"  # a task type whose main score is the mean of its units
# The true differences between the six rows, in standard errors of a paired difference on
# Avg.: rows 0 and 1 tie, the others are 1, 2.5, 4 and 6 standard errors from them.
SHIFTS = (0.0, 0.0, 1.0, 2.5, 4.0, 6.0)
TIED = (0, 1)
SEED_SCALE = 20.0  # the planner's second scenario: seeds that matter


@dataclass(frozen=True)
class TaskShape:
    """One golden task's noise: items, per-item sd, the share of it rows have in common, seed sd."""

    name: str
    items: int
    item_sd: float
    shared: float  # 0-1: the item difficulty every row sees
    seed_sd: float

    @property
    def seed_item_sd(self) -> float:
        """The seed-by-item noise's sd: half the seed variance comes from it."""
        return float(np.sqrt(self.items * self.seed_sd**2 / 2))

    @property
    def row_item_sd(self) -> float:
        """The row-by-item part's sd: the rest of the spread the rows do not share."""
        rest = (1 - self.shared) * self.item_sd**2 - self.seed_item_sd**2
        return float(np.sqrt(max(rest, 0.0)))

    def with_seed_sd(self, scale: float) -> TaskShape:
        return TaskShape(self.name, self.items, self.item_sd, self.shared, self.seed_sd * scale)


def _mean(data: dict[str, np.ndarray], idx: np.ndarray, _main: str) -> float:
    return float(data["value"][idx].mean())


def _means(data: dict[str, np.ndarray], idx: np.ndarray, _main: str) -> np.ndarray:
    return data["value"][idx].mean(axis=-1)


def register() -> None:
    """The simulated type in the units registry: the mean of the drawn units, vectorised."""
    units_mod.registry()[SIMULATED] = TypeSpec("item", None, _mean, _means)  # type: ignore[arg-type]


@functools.cache
def golden_shapes(resamples: int = 1000) -> tuple[TaskShape, ...]:
    """The golden runs' tasks as noise shapes: per-item sd from a single run's bootstrap
    variance (var x n), the shared share from the paired variance of two single runs, the seed
    sd from the two-seed row."""
    from neobench.protocol.tasks import load_benchmark, select_tasks
    from neobench.report.load import load

    tasks = select_tasks(load_benchmark("MTEB(eng, v1)"))
    runs, _, _ = load([GOLDEN], tasks)
    by_model = {run.model: run for run in runs}
    single = [by_model["golden/MiniLM"], by_model["golden/MiniLM-ft"]]
    replicate = by_model["golden/tiny-bert"]
    settings = stats.Settings(resamples)
    sides = [stats.side(run, set(run.scores), settings) for run in single]
    shapes = []
    for name in sorted(set(sides[0].draws) & set(sides[1].draws)):
        a, b = sides[0].draws[name], sides[1].draws[name]
        n = sum(p.n for p in sides[0].units[name][0].parts)
        var = (a.var() + b.var()) / 2
        shared = float(np.clip(1 - (a - b).var() / (2 * var), 0.0, 0.99))
        seed_sd = float(np.std([m.scores[name] for m in replicate.members], ddof=1))
        shapes.append(TaskShape(name, n, float(np.sqrt(var * n)), shared, seed_sd))
    return tuple(shapes)


def paired_se(shapes: tuple[TaskShape, ...], seeds: int) -> float:
    """The standard error of a paired difference of two rows on Avg. (the mean over tasks), the
    items and the seeds drawn anew."""
    each = [2 * s.row_item_sd**2 / s.items + 2 * s.seed_sd**2 / seeds for s in shapes]
    return float(np.sqrt(sum(each)) / len(shapes))


def simulated_sides(
    rng: np.random.Generator,
    shapes: tuple[TaskShape, ...],
    truth: np.ndarray,
    seeds: int,
    settings: stats.Settings,
) -> dict[str, stats.Side]:
    """One simulated table: per row, its seeds' units on every task and its draws."""
    sides = {}
    difficulty = {s.name: rng.normal(0, s.item_sd * np.sqrt(s.shared), s.items) for s in shapes}
    for r, true in enumerate(truth):
        members, found = [], {}
        for s in shapes:
            own = rng.normal(0, s.row_item_sd, s.items)  # the row's own hard and easy items
            effects = rng.normal(0, s.seed_sd / np.sqrt(2), seeds)
            per_seed = []
            for k in range(seeds):
                values = 0.5 + true + effects[k] + difficulty[s.name] + own
                values = values + rng.normal(0, s.seed_item_sd, s.items)
                part = Part("default", "test", [f"i{i}" for i in range(s.items)], {"value": values})
                per_seed.append(TaskUnits(s.name, SIMULATED, "mean", "item", [part]))
            found[s.name] = per_seed
        for k in range(seeds):
            scores = {t: units_mod.main_score(u[k]) for t, u in found.items()}
            members.append(Run(f"row{r}", f"r{r}s{k}", None, Path("."), scores=scores))
        mean = {t: float(np.mean([m.scores[t] for m in members])) for t in found}
        run = Run(f"row{r}", "+".join(m.revision for m in members), None, Path("."), scores=mean)
        if seeds > 1:
            run.members, run.seeds = members, list(range(seeds))
        side = stats.Side(run, mean)
        for t, u in found.items():
            side.units[t] = u
            side.draws[t] = stats.draws_of(run, u, settings)
        sides[f"row{r}"] = side
    return sides


@dataclass
class Figures:
    repetitions: int = 0
    covered: int = 0  # rows whose interval holds the true rank
    percentile_covered: int = 0  # the same, by percentile intervals of the resampled rank
    rows: int = 0
    width: int = 0  # ranks an interval spans, summed over the rows (high - low + 1)
    percentile_width: int = 0
    tied_share: int = 0  # repetitions where the tied rows share a letter
    extremes_apart: int = 0  # repetitions where the best and the worst row differ

    def lines(self) -> list[str]:
        n, rows = max(1, self.repetitions), max(1, self.rows)
        return [
            f"repetitions: {self.repetitions}, row intervals: {self.rows}",
            f"rank intervals holding the true rank: {self.covered / rows:.1%} (neobench's); "
            f"{self.percentile_covered / rows:.1%} (percentile intervals of the resampled rank)",
            f"ranks an interval spans, on average: {self.width / rows:.2f} (neobench's); "
            f"{self.percentile_width / rows:.2f} (percentile) of {len(SHIFTS)}",
            f"tied rows sharing a letter: {self.tied_share / n:.1%}",
            f"best and worst row told apart: {self.extremes_apart / n:.1%}",
        ]


def simulate(repetitions: int, seeds: int, resamples: int, seed: int = 2026) -> Figures:
    """Rank ``repetitions`` simulated tables; the figures of their intervals and groups."""
    register()
    shapes = golden_shapes()
    scale = paired_se(shapes, seeds)
    truth = np.asarray(SHIFTS) * scale
    true_rank = [1 + int((truth > t).sum()) for t in truth]  # ties: the better rank
    tied_ranks = [int((truth >= t).sum()) for t in truth]  # ... to the worse one
    rng = np.random.default_rng(seed)
    figures = Figures()
    names = [s.name for s in shapes]
    for k in range(repetitions):
        settings = stats.Settings(resamples, seed=k)
        sides = simulated_sides(rng, shapes, truth, seeds, settings)
        found = ranks.rank_column(sides, names, AVG, settings)
        percentile = _percentile_ranks(sides, names, AVG, settings)
        figures.repetitions += 1
        for r in range(len(truth)):
            got, lo_hi = found[f"row{r}"], percentile[r]
            figures.rows += 1
            figures.covered += got.low <= tied_ranks[r] and true_rank[r] <= got.high
            figures.percentile_covered += lo_hi[0] <= tied_ranks[r] and true_rank[r] <= lo_hi[1]
            figures.width += got.high - got.low + 1
            figures.percentile_width += lo_hi[1] - lo_hi[0] + 1
        a, b = (found[f"row{i}"].group for i in TIED)
        figures.tied_share += bool(set(a) & set(b))
        best, worst = found[f"row{len(truth) - 1}"].group, found["row0"].group
        figures.extremes_apart += not set(best) & set(worst)
    return figures


def _percentile_ranks(
    sides: dict[str, stats.Side], names: list[str], column: str, settings: stats.Settings
) -> list[tuple[int, int]]:
    """Percentile 95% intervals of each row's rank over the bootstrap resamples."""
    draws = np.stack([stats.column_draws(s, names, column, settings) for s in sides.values()])
    resampled = 1 + (draws[None, :, :] > draws[:, None, :]).sum(axis=1)  # [rows, resamples]
    low, high = np.quantile(resampled, [0.025, 0.975], axis=1, method="nearest")
    return [(int(a), int(b)) for a, b in zip(low, high, strict=True)]


@dataclass
class PlannerFigures:
    seeds: int
    seed_scale: float
    detectable: float  # x100: what the planner calls detectable at 80% power
    predicted: float  # the planner's power there
    simulated: float  # how often the test was significant there
    predicted_null: float  # the planner's false-positive rate
    simulated_null: float

    def lines(self) -> list[str]:
        return [
            f"planner, {self.seeds} seeds per row, seed sd x{self.seed_scale:g}: detectable "
            f"{self.detectable:.2f} points; power there {self.predicted:.1%} planned, "
            f"{self.simulated:.1%} simulated; false positives {self.predicted_null:.1%} planned, "
            f"{self.simulated_null:.1%} simulated",
        ]


def planner_check(
    repetitions: int,
    seeds: int,
    resamples: int,
    seed_scale: float = 1.0,
    pilot_seeds: int | None = None,
    null: bool = True,
) -> PlannerFigures:
    """The planner's power, on the design's true noise (or the noise a simulated pilot of two
    rows and ``pilot_seeds`` seeds measures), against the paired test on Avg. over
    ``repetitions`` simulated experiments with ``seeds`` seeds per row (and, with ``null``, as
    many without a true difference)."""
    from neobench.report import planner

    register()
    shapes = tuple(s.with_seed_sd(seed_scale) for s in golden_shapes())
    names = [s.name for s in shapes]
    rng = np.random.default_rng(11)
    settings = stats.Settings(resamples)
    noise = (
        true_noise(shapes)
        if pilot_seeds is None
        else _pilot_noise(rng, shapes, pilot_seeds, settings)
    )
    delta = planner.detectable(noise, seeds)
    rates = []
    for true in (delta, 0.0) if null else (delta,):
        hits = 0
        for k in range(repetitions):
            sides = simulated_sides(rng, shapes, np.asarray([0.0, true / 100]), seeds,
                                    stats.Settings(resamples, seed=k))  # fmt: skip
            found = stats.test(sides["row0"], sides["row1"], names, AVG, settings)
            hits += found is not None and found.paired.p < settings.alpha
        rates.append(hits / repetitions)
    return PlannerFigures(
        seeds, seed_scale, delta, planner.power(noise, delta, seeds), rates[0],
        planner.power(noise, 0.0, seeds), rates[1] if null else float("nan"),
    )  # fmt: skip


def _pilot_noise(
    rng: np.random.Generator, shapes: tuple[TaskShape, ...], seeds: int, settings: stats.Settings
) -> Any:
    """The noise report/planner.py measures on a simulated pilot of two rows of ``seeds``."""
    from neobench.report import planner

    names = [s.name for s in shapes]
    pilot = simulated_sides(rng, shapes, np.zeros(2), seeds, settings)
    scores = {
        label: {n: [m.scores[n] for m in side.run.each()] for n in names}
        for label, side in pilot.items()
    }
    draws = {
        label: {n: np.stack([_items_draws(u, settings) for u in side.units[n]]) for n in names}
        for label, side in pilot.items()
    }
    counts = dict.fromkeys(pilot, seeds)
    return planner._Pilot(counts, names, {AVG: names}, scores, draws, []).noise(names)


def true_noise(shapes: tuple[TaskShape, ...]) -> Any:
    """The planner's noise of Avg. for the simulated design, from its parameters (x100)."""
    from neobench.report import planner

    t = len(shapes)
    seed = np.sqrt(sum(s.seed_sd**2 for s in shapes)) / t
    items = np.sqrt(sum(2 * s.row_item_sd**2 / s.items for s in shapes)) / t
    seed_items = np.sqrt(sum(2 * s.seed_item_sd**2 / s.items for s in shapes)) / t
    return planner.Noise(float(100 * seed), float(100 * items), True, float(100 * seed_items))


def _items_draws(units: TaskUnits, settings: stats.Settings) -> np.ndarray:
    from neobench.report import bootstrap

    return bootstrap.task_draws(units, settings.resamples, settings.seed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=300)
    parser.add_argument("--seeds", type=int, default=3, help="seeds per row")
    parser.add_argument("--resamples", type=int, default=500)
    args = parser.parse_args()
    for shape in golden_shapes():
        print(
            f"{shape.name}: {shape.items} items, per-item sd {shape.item_sd:.3f}, shared "
            f"{shape.shared:.0%}, seed sd {shape.seed_sd:.4f}"
        )
    figures = simulate(args.repetitions, args.seeds, args.resamples)
    for line in figures.lines():
        print(line)
    for scale in (1.0, SEED_SCALE):
        for line in planner_check(args.repetitions, args.seeds, args.resamples, scale).lines():
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
