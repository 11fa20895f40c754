"""`neobench compare`: is each model better or worse than a baseline, task by task and on average?

Every difference is paired: both models' scores are recomputed on the same resampled units of
each task (neobench/report/bootstrap.py), from the per-item files `neobench eval` saves beside each
result (neobench/evaluate/units). Per task: the baseline's and the model's score, the difference with its
95% interval, a two-sided p-value, and the Holm-adjusted p-value over the tasks compared (the
family is one model's tasks). The "Avg." row is the mean over those tasks with the tasks fixed
(units resampled within every task); its p-value is a single test, not adjusted. A model
fine-tuned with several seeds is one row (neobench/report/replicates.py): its scores are the means over
the seeds, and its draws resample the seeds, then the items.

Units are paired by id. Where mteb leaves units out per model (SummEval drops the texts whose
summaries a model scores all alike), a task is compared on the units both models kept, both
scores recomputed on them, and a note names the task and how many units were left out.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from neobench.core.errors import NeobenchError, unknown
from neobench.core.runs import Run, differences, load_roots
from neobench.evaluate import units
from neobench.evaluate.units import TaskUnits
from neobench.report import bootstrap, replicates
from neobench.report.table import labels_for

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

AVG = "Avg."


@dataclass(frozen=True)
class Row:
    model: str
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
    # Whether the model trained on the task (on one of the compared tasks, for Avg.); None when
    # its training data is not declared (neobench/protocol/overlap.py).
    in_domain: bool | None = None
    # A row of seed replicates (neobench/report/replicates.py): its seeds, and the standard deviation
    # of its score over them; absent from the JSON and CSV of other rows.
    seeds: list[int] | None = None
    seed_sd: float | None = None

    def record(self) -> dict:
        data = asdict(self)
        return data if self.seeds is not None else {k: data[k] for k in data if k not in SEEDED}


SEEDED = ("seeds", "seed_sd")


@dataclass
class Comparison:
    baseline: str
    resamples: int
    seed: int
    alpha: float
    rows: list[Row]
    notes: list[str]
    baseline_seeds: list[int] | None = None  # when the baseline is a row of seed replicates

    def to_json(self) -> str:
        body = {
            "baseline": self.baseline,
            "resamples": self.resamples,
            "seed": self.seed,
            "alpha": self.alpha,
            "rows": [r.record() for r in self.rows],
            "notes": self.notes,
        }
        if self.baseline_seeds is not None:
            body["baseline_seeds"] = self.baseline_seeds
        return json.dumps(body, indent=1) + "\n"


def compare(
    results: list[str],
    baseline: str,
    *,
    benchmark: str,
    models: list[str] | None = None,
    tasks: list[str] | None = None,
    resamples: int = bootstrap.RESAMPLES,
    seed: int = bootstrap.SEED,
    alpha: float = bootstrap.ALPHA,
    zero_shot_only: bool = False,
) -> Comparison:
    """Compare every model (or ``models``) found under ``results`` with ``baseline``;
    ``zero_shot_only`` keeps the tasks none of them trained on."""
    from neobench.protocol.tasks import load_benchmark, select_tasks

    bootstrap.check_resamples(resamples)
    chosen = select_tasks(load_benchmark(benchmark), tasks)
    runs, _ = load_roots(results, chosen)
    runs, notes = replicates.merge(runs)  # the seeds of one fine-tune: one model
    labelled = dict(zip(labels_for(runs), runs, strict=True))
    base_label = _find(baseline, labelled)
    others = [_find(m, labelled) for m in models] if models else list(labelled)
    others = [m for m in others if m != base_label]
    if not others:
        raise NeobenchError(
            f"--baseline {baseline}: no other model to compare with under --results "
            f"{', '.join(map(str, results))}."
        )
    _check_conditions(labelled, base_label, others)
    if zero_shot_only:
        chosen, labelled, note = _zero_shot_only(results, chosen, labelled, [base_label, *others])
        notes.append(note)
    base = _Side(labelled[base_label], _units_of(labelled[base_label], base_label))
    rows = []
    for label in others:
        mine = _Side(labelled[label], _units_of(labelled[label], label))
        found, dropped = _compare_one(label, base, mine, resamples, seed, alpha)
        rows += found
        notes += dropped
    rows = [_with_in_domain(r, labelled[r.model], sorted(base.units)) for r in rows]
    notes += _overlap_notes(rows)
    return Comparison(base_label, resamples, seed, alpha, rows, notes, base.seeds)


def _zero_shot_only(
    results: list[str], tasks: list[AbsTask], labelled: dict[str, Run], compared: list[str]
) -> tuple[list[AbsTask], dict[str, Run], str]:
    """The tasks no compared model trained on, the runs read again on them, and the note."""
    from neobench.protocol import overlap

    subset = overlap.zero_shot_subset({label: labelled[label] for label in compared}, tasks)
    kept = overlap.keep_tasks(tasks, subset)
    runs, _ = replicates.merge(load_roots(results, kept)[0])
    return kept, dict(zip(labels_for(runs), runs, strict=True)), subset.note()


def _with_in_domain(row: Row, run: Run, tasks: list[str]) -> Row:
    from neobench.protocol import overlap

    trained = overlap.trained_on(run, tasks if row.task == AVG else [row.task])
    return replace(row, in_domain=None if trained is None else bool(trained))


def _overlap_notes(rows: list[Row]) -> list[str]:
    """Which compared model trained on which task, under the † the cells carry."""
    trained: dict[str, list[str]] = {}
    for row in rows:
        if row.in_domain and row.task != AVG:
            trained.setdefault(row.model, []).append(row.task)
    if not trained:
        return []
    named = "; ".join(f"{model}: {', '.join(tasks)}" for model, tasks in trained.items())
    return [
        f"† = in-domain, the model trained on the task (mteb's ModelMeta training datasets): "
        f"{named}. --zero-shot-only leaves those tasks out."
    ]


def _find(name: str, labelled: dict[str, Run]) -> str:
    hits = [label for label, run in labelled.items() if name in (label, run.model)]
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise NeobenchError(
            f"model {name!r} names {len(hits)} result folders ({', '.join(hits)}); "
            "pass one of these labels."
        )
    names = sorted({r.model for r in labelled.values()} | set(labelled))
    raise NeobenchError(
        unknown("model", name, names, "Models found under --results are listed by neobench table.")
    )


def _check_conditions(labelled: dict[str, Run], base: str, others: list[str]) -> None:
    """Refuse pairs evaluated under different conditions (or fine-tuned by different recipes):
    their difference would mix the model with the conditions."""
    problems = []
    for label in others:
        for key, (mine, theirs) in differences(labelled[label], labelled[base]).items():
            problems.append(f"{label} vs {base}: {key} {mine} vs {theirs}")
    if problems:
        raise NeobenchError(
            "the models compared were not evaluated under identical conditions ("
            + "; ".join(problems)
            + "). Evaluate them again under the same conditions (same benchmark, instructions, "
            "--max-seq-length, dtype and mteb version; fine-tuned rows: the same recipe), or "
            "leave a model out with --models."
        )


@dataclass
class _Side:
    """One model of a comparison: its run and, per task, the units of each of its seeds (one
    entry for a single run)."""

    run: Run
    units: dict[str, list[TaskUnits]]

    def draws(self, task: str, order: TaskUnits, resamples: int, seed: int) -> np.ndarray:
        """The task's draws with the units in ``order``'s order (the same items at the same
        indices on both sides); a replicate row resamples seeds too, independently of the
        other side unless both have the same members."""
        found = bootstrap.on_units(order, self.units[task])
        per_seed = [bootstrap.task_draws(u, resamples, seed) for u in found]
        return replicates.combine(self.run, per_seed, resamples, seed)

    @property
    def seeds(self) -> list[int] | None:
        return self.run.seeds if isinstance(self.run, replicates.Replicates) else None

    def point(self, task: str, order: TaskUnits) -> float:
        """The mean over seeds of the task's score on ``order``'s units."""
        found = bootstrap.on_units(order, self.units[task])
        return float(np.mean([units.main_score(u) for u in found]))

    def left_out(self, task: str, order: TaskUnits) -> int:
        """How many of this side's units (its first seed's) are not among ``order``'s."""
        return sum(p.n for p in self.units[task][0].parts) - sum(p.n for p in order.parts)

    def seed_sd(self, tasks: list[str]) -> float | None:
        """Standard deviation over the seeds of each seed's mean over ``tasks``."""
        if self.seeds is None:
            return None
        seeds = np.mean([[units.main_score(u) for u in self.units[t]] for t in tasks], axis=0)
        return float(np.std(seeds, ddof=1))


def _units_of(run: Run, label: str) -> dict[str, list[TaskUnits]]:
    """The per-item units of each task of a run (of each seed, for replicates); a task saved
    without them is refused with the command that adds them."""
    everyone = replicates.members(run)
    missing = [
        t
        for t in sorted(run.scores)
        if not all(units.path_for(m.folder, t).is_file() for m in everyone)
    ]
    if missing:
        raise NeobenchError(
            f"{label}: no per-item predictions for {', '.join(missing)} (evaluated before neobench "
            "saved them, or with --no-predictions), so no interval or paired test can be computed. "
            f"Delete those task files in {run.folder} and re-run the same `neobench eval` to add "
            "them, or leave the tasks out with --tasks."
        )
    return {t: replicates.member_units(run, t) or [] for t in sorted(run.scores)}


def _compare_one(
    label: str, base: _Side, mine: _Side, resamples: int, seed: int, alpha: float
) -> tuple[list[Row], list[str]]:
    """One model's rows (its tasks, then Avg.) and the notes on tasks paired on shared units."""
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
    draws_a, draws_b, found, notes = [], [], [], []
    for task in names:
        # Both sides' units on the items all of them hold, in the baseline's order.
        order = bootstrap.common(base.units[task] + mine.units[task])
        a = base.draws(task, order, resamples, seed)
        b = mine.draws(task, order, resamples, seed)
        draws_a.append(a)
        draws_b.append(b)
        points = base.point(task, order), mine.point(task, order)
        found.append(_row(label, task, points, a, b, alpha, mine.seeds, mine.seed_sd([task])))
        dropped = base.left_out(task, order), mine.left_out(task, order)
        if any(dropped):
            notes.append(_dropped_note(label, task, order, *dropped))
    adjusted = bootstrap.holm([r.p for r in found])
    rows = [_with_holm(r, p, alpha) for r, p in zip(found, adjusted, strict=True)]
    points = (
        float(np.mean([r.baseline_score for r in found])),
        float(np.mean([r.score for r in found])),
    )
    a, b = np.mean(draws_a, 0), np.mean(draws_b, 0)
    rows.append(_row(label, AVG, points, a, b, alpha, mine.seeds, mine.seed_sd(names)))
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
    label: str,
    task: str,
    points: tuple[float, float],
    a: np.ndarray,
    b: np.ndarray,
    alpha: float,
    seeds: list[int] | None = None,
    seed_sd: float | None = None,
) -> Row:
    """A row from the two point estimates and the two models' draws on the same resamples; its
    p_holm is its own p until the family's adjustment replaces it."""
    pair = bootstrap.paired_from_draws(points[0], points[1], a, b, alpha)
    low, high = np.quantile(b, [alpha / 2, 1 - alpha / 2])
    return Row(
        label, task, points[0], points[1], float(low), float(high),
        pair.delta, pair.low, pair.high, pair.p, pair.p, pair.p < alpha,
        seeds=seeds, seed_sd=seed_sd,
    )  # fmt: skip


def _with_holm(row: Row, p_holm: float, alpha: float) -> Row:
    return Row(**(asdict(row) | {"p_holm": p_holm, "significant": bool(p_holm < alpha)}))


# ---------------------------------------------------------------- output


COLUMNS = (
    "model",
    "task",
    "baseline",
    "score [95% CI]",
    "delta [95% CI]",
    "p",
    "p (Holm)",
    "significant",
)


def cells(row: Row) -> list[str]:
    """One row as text: scores x100 with one decimal, as in the tables."""
    mark = ("higher" if row.delta > 0 else "lower") if row.significant else ""
    sd = "" if row.seed_sd is None else f" sd {100 * row.seed_sd:.1f}"
    return [
        row.model,
        row.task,
        f"{100 * row.baseline_score:.1f}",
        f"{100 * row.score:.1f}{'†' if row.in_domain else ''} "
        f"[{100 * row.score_ci_low:.1f}, {100 * row.score_ci_high:.1f}]" + sd,
        f"{100 * row.delta:+.1f} [{100 * row.ci_low:+.1f}, {100 * row.ci_high:+.1f}]",
        f"{row.p:.3f}",
        f"{row.p_holm:.3f}",
        mark,
    ]


def legend(comparison: Comparison) -> str:
    text = (
        f"Baseline: {comparison.baseline}. Scores x100. [ ] = 95% paired-bootstrap interval "
        f"({comparison.resamples} resamples of each task's units, seed {comparison.seed}); "
        f"p two-sided; Holm over each model's tasks; higher/lower = significant at "
        f"{comparison.alpha:g} after Holm. Avg. = mean over the compared tasks, tasks fixed."
    )
    if comparison.baseline_seeds is not None or any(r.seeds for r in comparison.rows):
        text += (
            " Models '(N seeds)': scores are means over N fine-tuning seeds, 'sd' their standard "
            "deviation over the seeds; their intervals and p-values resample the seeds (each "
            "side on its own), then the same items on both sides."
        )
    return text


def to_markdown(comparison: Comparison) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |"]
    lines.append("|" + "---|" * len(COLUMNS))
    lines += ["| " + " | ".join(cells(r)) + " |" for r in comparison.rows]
    return "\n".join([*lines, "", legend(comparison), *comparison.notes]) + "\n"


def to_csv(comparison: Comparison) -> str:
    buffer = io.StringIO()
    seeded = any(r.seeds is not None for r in comparison.rows)
    names = [f for f in Row.__dataclass_fields__ if seeded or f not in SEEDED]
    writer = csv.DictWriter(buffer, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    for row in comparison.rows:
        writer.writerow(row.record())
    return buffer.getvalue()


WRITERS = {".md": to_markdown, ".csv": to_csv, ".json": Comparison.to_json}


def check_out(out: str) -> None:
    from neobench.core.errors import writable_folder_problems

    problems = []
    if Path(out).suffix.lower() not in WRITERS:
        problems.append(f"--out {out}: name it *.md, *.csv or *.json.")
    problems += writable_folder_problems(
        Path(out).parent, f"--out {out}: its folder", "Write it somewhere else."
    )
    if problems:
        raise NeobenchError(problems)


def output_text(comparison: Comparison, out: str) -> str:
    """The content of the file ``--out`` names, by its suffix."""
    check_out(out)
    return WRITERS[Path(out).suffix.lower()](comparison)
