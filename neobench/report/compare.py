"""`neobench compare`: is each model better or worse than a baseline, task by task and on average?
Paired tests by report/stats.py; what each row holds and why: docs/uncertainty.md, "Paired
comparisons".
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from neobench.core.conditions import RECORD
from neobench.core.errors import NeobenchError
from neobench.core.replicates import seed_sd
from neobench.core.runs import NAMES, Run, find, find_one, identity
from neobench.evaluation import units
from neobench.evaluation.units import TaskUnits
from neobench.protocol import overlap
from neobench.protocol.config import ALPHA, BOOTSTRAP_SEED, RESAMPLES
from neobench.report import stats
from neobench.report.columns import AVG
from neobench.report.load import load, load_zero_shot


@dataclass(frozen=True)
class Row:
    # The compared run (core/runs.NAMES) and, below, its conditions (conditions.RECORD).
    identity: dict[str, Any]
    task: str
    baseline_score: float
    score: float
    score_ci_low: float  # interval of the model's own score
    score_ci_high: float
    delta: float  # score - baseline_score
    ci_low: float  # interval of the difference
    ci_high: float
    p: float
    p_holm: float
    significant: bool
    # Whether the model trained on the task (any compared task, for Avg.); None: not declared.
    in_domain: bool | None = None
    seed_sd: float | None = None
    conditions: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.identity["label"]

    @property
    def seeds(self) -> list[int] | None:
        return self.identity["seeds"]

    def record(self) -> dict[str, Any]:
        """The row for a program: names, statistics, conditions; the same keys in every row."""
        data = asdict(self)
        run, conditions = data.pop("identity"), data.pop("conditions")
        return {**run, **data, **conditions}


def record_keys() -> list[str]:
    """The keys of every `Row.record` (the CSV header), in order."""
    stats = [f.name for f in dataclasses.fields(Row) if f.name not in ("identity", "conditions")]
    return [*NAMES, *stats, *RECORD]


@dataclass
class Comparison:
    baseline: str  # the baseline's label
    resamples: int
    seed: int
    alpha: float
    rows: list[Row]
    notes: list[str]
    baseline_seeds: list[int] | None = None  # when the baseline is a row of seed replicates
    baseline_fields: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def record_keys() -> list[str]:
        """`record_keys`, reachable without importing this module."""
        return record_keys()

    def to_pandas(self) -> Any:
        """A row per model and task (or column) compared with the baseline (report/frames.py)."""
        from neobench.report.frames import comparison_frame

        return comparison_frame(self)


def compare(
    results: list[str | Path],
    baseline: str,
    *,
    benchmark: str,
    models: list[str] | None = None,
    tasks: list[str] | None = None,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    alpha: float = ALPHA,
    zero_shot_only: bool = False,
) -> Comparison:
    """Compare every model (or ``models``) found under ``results`` with ``baseline``;
    ``zero_shot_only`` keeps the tasks none of them trained on."""
    from neobench.protocol.tasks import load_benchmark, select_tasks

    settings = stats.Settings(resamples, seed, "items", alpha)
    stats.check(settings)
    chosen = select_tasks(load_benchmark(benchmark), tasks)
    runs, _, notes = load(results, chosen)  # the seeds of one fine-tune: one model
    labelled = dict(find(runs, None))
    base_label, _ = find_one(list(labelled.items()), baseline)
    others = [label for label, _ in find(runs, models)] if models else list(labelled)
    others = [m for m in others if m != base_label]
    if not others:
        raise NeobenchError(
            f"--baseline {baseline}: no other model to compare with under --results "
            f"{', '.join(map(str, results))}."
        )
    _check_conditions(labelled, base_label, others)
    if zero_shot_only:
        compared = {label: labelled[label] for label in [base_label, *others]}
        _, (runs, _, _), note = load_zero_shot(results, chosen, compared)
        labelled = dict(find(runs, None))
        notes.append(note)
    found = compare_runs(labelled, base_label, others, settings)
    found.notes = notes + found.notes
    return found


def compare_runs(
    labelled: dict[str, Run],
    base_label: str,
    others: list[str],
    settings: stats.Settings,
    sides: dict[str, stats.Side] | None = None,
) -> Comparison:
    """`compare` on runs already read (label -> run). ``sides`` are used where given and filled
    where missing, so a caller comparing many pairs draws each run once; a side may hold fewer
    tasks than its run, which then compares on those only."""
    _check_conditions(labelled, base_label, others)
    sides = {} if sides is None else sides
    for label in [base_label, *others]:
        if label not in sides:
            sides[label] = side(labelled[label], label, settings)
    base = sides[base_label]
    rows, notes = [], []
    for label in others:
        found, dropped = _compare_one(label, base, sides[label], settings)
        rows += found
        notes += dropped
    rows = [_with_in_domain(r, labelled[r.label], sorted(base.units)) for r in rows]
    notes += _overlap_notes(rows)
    seeds = base.run.seeds if base.run.replicated else None
    fields = {**identity(base_label, base.run), **base.run.conditions.record()}
    return Comparison(
        base_label, settings.resamples, settings.seed, settings.alpha, rows, notes, seeds, fields
    )


def _with_in_domain(row: Row, run: Run, tasks: list[str]) -> Row:
    trained = overlap.trained_on(run, tasks if row.task == AVG else [row.task])
    return replace(row, in_domain=None if trained is None else bool(trained))


def _overlap_notes(rows: list[Row]) -> list[str]:
    """Which compared model trained on which task, under the † the cells carry."""
    trained: dict[str, list[str]] = {}
    for row in rows:
        if row.in_domain and row.task != AVG:
            trained.setdefault(row.label, []).append(row.task)
    if not trained:
        return []
    named = "; ".join(f"{model}: {', '.join(tasks)}" for model, tasks in trained.items())
    return [
        f"† = in-domain, the model trained on the task (mteb's ModelMeta training datasets): "
        f"{named}. --zero-shot-only leaves those tasks out."
    ]


def _check_conditions(labelled: dict[str, Run], base: str, others: list[str]) -> None:
    """Refuse pairs whose conditions (or recipes) differ, naming a deleted run card rather than
    the difference it causes."""
    missing = [
        f"{label}: {why}"
        for label in [base, *others]
        for member in labelled[label].each()
        for why in member.card_missing.values()
    ]
    if missing:
        raise NeobenchError(missing)
    problems = []
    for label in others:
        mine, theirs = labelled[label].conditions, labelled[base].conditions
        for key, (a, b) in mine.differences(theirs).items():
            problems.append(f"{label} vs {base}: {key} {a} vs {b}")
    if problems:
        raise NeobenchError(
            "the models compared were not evaluated under identical conditions ("
            + "; ".join(problems)
            + "). Evaluate them again under the same conditions (same instructions, "
            "--max-seq-length, dtype and mteb version; fine-tuned rows: the same recipe), or "
            "leave a model out with --models."
        )


def side(run: Run, label: str, settings: stats.Settings) -> stats.Side:
    """The run's units and draws on every task it holds; refused, with the fix, where units are
    missing or a result file differs from its run card."""
    if run.mismatched:
        raise NeobenchError(
            f"{label}: {len(run.mismatched)} stored score(s) differ from their run cards, so "
            "the model is not compared: " + " ".join(run.mismatched.values())
        )
    if run.unreadable:
        raise NeobenchError(
            [
                f"{label}: {why}, so {task} cannot be compared. Delete the file and re-run the "
                "same `neobench eval` to write it again, or leave the task out with --tasks."
                for task, why in sorted(run.unreadable.items())
            ]
        )
    missing = [
        t
        for t in sorted(run.scores)
        if not all(units.path_for(m.folder, t).is_file() for m in run.each())
    ]
    if missing:
        raise NeobenchError(
            f"{label}: no per-item predictions for {', '.join(missing)} (evaluated before neobench "
            "saved them, or with --no-predictions), so no interval or paired test can be computed. "
            f"Delete those task files in {run.folder} and re-run the same `neobench eval` to add "
            "them, or leave the tasks out with --tasks."
        )
    found = stats.side(run, set(run.scores), settings)
    if found.refused:
        raise NeobenchError([f"{label}: {why}" for _, why in sorted(found.refused.items())])
    return found


def _compare_one(
    label: str, base: stats.Side, mine: stats.Side, settings: stats.Settings
) -> tuple[list[Row], list[str]]:
    """One model's rows (its tasks, then Avg.) and the notes on units left out."""
    if set(base.units) != set(mine.units):
        only_base = sorted(set(base.units) - set(mine.units))
        only_mine = sorted(set(mine.units) - set(base.units))
        raise NeobenchError(
            f"{label} and the baseline were evaluated on different tasks (only the baseline: "
            f"{', '.join(only_base) or 'none'}; only {label}: {', '.join(only_mine) or 'none'}). "
            "Evaluate the missing tasks, or restrict the comparison with --tasks."
        )
    if not base.units:
        raise NeobenchError(
            f"{label}: no task with per-item predictions to compare; re-run `neobench eval`."
        )
    names = sorted(base.units)
    columns = {task: [task] for task in names} | {AVG: names}
    tests = stats.family(base, mine, columns, settings)
    rows = [_row(label, column, tests[column], mine, names if column == AVG else [column],
                 settings.alpha) for column in columns]  # fmt: skip
    notes = []
    for task in names:
        if task in tests[task].dropped:
            left_base, left_mine, order = tests[task].dropped[task]
            notes.append(_dropped_note(label, task, order, left_base, left_mine))
    return rows, notes


def _dropped_note(label: str, task: str, order: TaskUnits, base: int, mine: int) -> str:
    kept = sum(p.n for p in order.parts)
    return (
        f"{task}: {label} and the baseline compared on the {kept} {order.unit}s both kept; "
        f"{base + mine} left out ({base} kept only by the baseline, {mine} only by {label}: mteb "
        f"leaves out a model's {order.unit}s it scores all alike), and both scores recomputed on "
        "the shared ones."
    )


def _row(
    label: str, task: str, test: stats.Test, mine: stats.Side, tasks: list[str], alpha: float
) -> Row:
    low, high = stats.interval(test.draws, alpha)
    pair = test.paired
    sd = None
    if mine.run.replicated:  # from the seeds' stored scores, as the table's sd
        sd = seed_sd([[member.scores[t] for t in tasks] for member in mine.run.members])
    return Row(
        identity(label, mine.run), task, test.base_point, test.point, low, high,
        pair.delta, pair.low, pair.high, pair.p, test.p_holm, test.significant,
        seed_sd=sd, conditions=mine.run.conditions.record(),
    )  # fmt: skip
