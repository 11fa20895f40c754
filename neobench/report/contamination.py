"""`neobench overlap`: each evaluation task's measured overlap with a manifest's training data
(evaluation/contamination.py measures it, protocol/contamination.py compares the texts), and with
--decontaminated a run's score on the test units that do not occur in training, with its 95%
interval, beside the full score (recomputed from the run's per-item units, by the table's
bootstrap).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import numpy as np

from neobench.core.errors import NeobenchError, collect
from neobench.core.runs import Run, find
from neobench.evaluation import units as units_mod
from neobench.evaluation.units import Part, TaskUnits
from neobench.protocol.config import BOOTSTRAP_SEED, DEFAULT_BENCHMARK, RESAMPLES
from neobench.protocol.contamination import TaskOverlap
from neobench.protocol.listing import Listing
from neobench.report import stats

PLURALS = {"query": "queries"}


@dataclass(frozen=True)
class Decontaminated:
    label: str
    task: str
    full: float  # x100, the stored score
    score: float | None  # x100, on the units not in training; None when none are left
    low: float | None
    high: float | None
    kept: int
    units: int


def score_without(
    label: str, run: Run, measured: TaskOverlap, settings: stats.Settings
) -> Decontaminated | str:
    """``run``'s score on ``measured.task`` without its contaminated units, or why there is
    none (no units file, or a task type whose units are not its items)."""
    task = measured.task
    if task not in run.scores:
        return f"{label}: {task} not evaluated"
    found, problem = stats.member_units(run, task)
    if problem is not None or found is None:
        return problem or f"{label}: {task} has no per-item predictions (re-run its eval)"
    dropped = {key: set(ids) for key, ids in measured.contaminated.items()}
    kept = [_without(units, dropped) for units in found]
    total = sum(p.n for p in found[0].parts)
    left = sum(p.n for p in kept[0].parts)
    full = 100 * run.scores[task]
    if left == 0 or any(p.n < 2 for p in kept[0].parts):
        return Decontaminated(label, task, full, None, None, None, left, total)
    point = float(np.mean([units_mod.main_score(u) for u in kept]))
    draws = stats.draws_of(run, kept, settings)
    low, high = stats.interval(draws, settings.alpha)
    return Decontaminated(label, task, full, 100 * point, 100 * low, 100 * high, left, total)


def _without(units: TaskUnits, dropped: dict[str, set[str]]) -> TaskUnits:
    """The units with those of ``dropped`` ("subset/split" -> ids) left out."""
    parts = []
    for part in units.parts:
        gone = dropped.get(f"{part.subset}/{part.split}", set())
        keep = np.asarray([i for i, unit in enumerate(part.ids) if unit not in gone], dtype=np.intp)
        data = {k: v[keep] for k, v in part.data.items()}
        ids = [part.ids[i] for i in keep]
        parts.append(Part(part.subset, part.split, ids, data, part.subtask, part.rows))
    return TaskUnits(units.task, units.type, units.main_score, units.unit, parts)


@dataclass
class OverlapReport:
    """`neobench overlap`'s answer: each task's overlap with the manifest's training data and,
    with results, each run's score with and without the units that occur in training."""

    manifest: str
    digest: str
    measured: list[TaskOverlap]
    cached: list[str]
    scores: list[Decontaminated] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def listing(self) -> Listing:
        head = ("task", "type", "units", "in training", "near-duplicates", "texts", "in training",
                "near-duplicates")  # fmt: skip
        rows = []
        for m in self.measured:
            rows.append((
                m.task, m.type, f"{m.units:,} {PLURALS.get(m.unit, m.unit + 's')}",
                _share(m.exact_units, m.units),
                _share(m.near_units, m.units), f"{m.texts:,}", _share(m.exact_texts, m.texts),
                _share(m.near_texts, m.texts),
            ))  # fmt: skip
        return Listing(f"Overlap with the training data of manifest {self.manifest}", head, rows)

    def score_listing(self) -> Listing:
        head = ("model", "task", "score", "decontaminated [95%]", "units kept")
        rows = []
        for s in self.scores:
            shown = "—" if s.score is None else f"{s.score:.1f} [{s.low:.1f}, {s.high:.1f}]"
            rows.append((s.label, s.task, f"{s.full:.1f}", shown, f"{s.kept:,} of {s.units:,}"))
        return Listing("Scores without the units that occur in training (x100)", head, rows)

    def to_json(self) -> str:
        body = {
            "manifest": self.manifest,
            "manifest_digest": self.digest,
            "tasks": [_task_record(m) for m in self.measured],
            "contaminated_units": {m.task: m.contaminated for m in self.measured},
            "scores": [asdict(s) for s in self.scores],
            "notes": self.notes,
        }
        return json.dumps(body, indent=1) + "\n"


def _task_record(measured: TaskOverlap) -> dict[str, object]:
    """A task's counts and their shares, without the ids (those are under contaminated_units)."""
    counts = {k: v for k, v in asdict(measured).items() if k != "contaminated"}
    return counts | {"shares": measured.summary}


def _share(count: int, total: int) -> str:
    return f"{count:,} ({count / total:.1%})" if total else "0"


def overlap_report(
    manifest: str,
    *,
    tasks: list[str] | None = None,
    benchmark: str = DEFAULT_BENCHMARK,
    data_dir: str | None = None,
    train_data_dir: str | None = None,
    results: list[str] | None = None,
    models: list[str] | None = None,
    decontaminated: bool = False,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> OverlapReport:
    """The overlap of ``manifest``'s training data with the benchmark's tasks (or ``tasks``),
    and with ``decontaminated`` each run under ``results`` scored without the units in it."""
    from neobench.evaluation.contamination import measure
    from neobench.protocol.tasks import load_benchmark, select_tasks

    problems = []
    if decontaminated and not results:
        problems.append("--decontaminated scores runs: give their results with --results.")
    settings = stats.Settings(resamples, seed)
    if decontaminated:
        collect(problems, stats.check, settings)
    chosen = collect(problems, lambda: select_tasks(load_benchmark(benchmark), tasks))
    if problems:
        raise NeobenchError(problems)
    found = measure(manifest, chosen, benchmark, data_dir, train_data_dir)
    report = OverlapReport(found.manifest, found.digest, found.tasks, found.cached)
    if found.cached:
        report.notes.append(
            f"read from the cache (measured before, same manifest and data): "
            f"{', '.join(found.cached)}"
        )
    if decontaminated and results:
        from neobench.report.load import load

        runs, _, _ = load(results, chosen)
        for label, run in find(runs, models):
            for measured in found.tasks:
                if measured.task not in run.scores:
                    continue
                scored = score_without(label, run, measured, settings)
                if isinstance(scored, str):
                    report.notes.append(scored)
                else:
                    report.scores.append(scored)
    return report
