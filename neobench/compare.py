"""`neobench compare`: is each model better or worse than a baseline, task by task and on average?

Every difference is paired: both models' scores are recomputed on the same resampled units of
each task (neobench/bootstrap.py), from the per-item files `neobench eval` saves beside each
result (neobench/units). Per task: the baseline's and the model's score, the difference with its
95% interval, a two-sided p-value, and the Holm-adjusted p-value over the tasks compared (the
family is one model's tasks). The "Avg." row is the mean over those tasks with the tasks fixed
(units resampled within every task); its p-value is a single test, not adjusted.

Units are paired by id. Where mteb leaves units out per model (SummEval drops the texts whose
summaries a model scores all alike), a task is compared on the units both models kept, both
scores recomputed on them, and a note names the task and how many units were left out.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from neobench import bootstrap, units
from neobench.errors import NeobenchError, unknown
from neobench.results import Run, load_roots
from neobench.table import labels_for
from neobench.units import TaskUnits

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


@dataclass
class Comparison:
    baseline: str
    resamples: int
    seed: int
    alpha: float
    rows: list[Row]
    notes: list[str]

    def to_json(self) -> str:
        body = {
            "baseline": self.baseline,
            "resamples": self.resamples,
            "seed": self.seed,
            "alpha": self.alpha,
            "rows": [asdict(r) for r in self.rows],
            "notes": self.notes,
        }
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
) -> Comparison:
    """Compare every model (or ``models``) found under ``results`` with ``baseline``."""
    from neobench.tasks import load_benchmark, select_tasks

    bootstrap.check_resamples(resamples)
    chosen = select_tasks(load_benchmark(benchmark), tasks)
    runs, _ = load_roots(results, chosen)
    labelled = dict(zip(labels_for(runs), runs, strict=True))
    base_label = _find(baseline, labelled)
    others = [_find(m, labelled) for m in models] if models else list(labelled)
    others = [m for m in others if m != base_label]
    if not others:
        raise NeobenchError(
            f"--baseline {baseline}: no other model to compare with under --results "
            f"{', '.join(map(str, results))}."
        )
    base_units = _units_of(labelled[base_label], base_label)
    rows: list[Row] = []
    notes: list[str] = []
    for label in others:
        found = _compare_one(
            label, base_units, _units_of(labelled[label], label), resamples, seed, alpha
        )
        rows += found[0]
        notes += found[1]
    return Comparison(base_label, resamples, seed, alpha, rows, notes)


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


def _units_of(run: Run, label: str) -> dict[str, TaskUnits]:
    """The per-item units of each task of a run; a task saved without them is refused with the
    command that adds them."""
    missing = [t for t in sorted(run.scores) if not units.path_for(run.folder, t).is_file()]
    if missing:
        raise NeobenchError(
            f"{label}: no per-item predictions for {', '.join(missing)} (evaluated before neobench "
            "saved them, or with --no-predictions), so no interval or paired test can be computed. "
            f"Delete those task files in {run.folder} and re-run the same `neobench eval` to add "
            "them, or leave the tasks out with --tasks."
        )
    return {t: units.read(units.path_for(run.folder, t)) for t in sorted(run.scores)}


def _compare_one(
    label: str,
    base: dict[str, TaskUnits],
    mine: dict[str, TaskUnits],
    resamples: int,
    seed: int,
    alpha: float,
) -> tuple[list[Row], list[str]]:
    """One model's rows (its tasks, then Avg.) and the notes on tasks paired on shared units."""
    if set(base) != set(mine):
        only_base, only_mine = sorted(set(base) - set(mine)), sorted(set(mine) - set(base))
        raise NeobenchError(
            f"{label} and the baseline were evaluated on different tasks (only the baseline: "
            f"{', '.join(only_base) or 'none'}; only {label}: {', '.join(only_mine) or 'none'}). "
            "Evaluate the missing tasks, or restrict the comparison with --tasks."
        )
    if not base:
        raise NeobenchError(
            f"{label}: no task with per-item predictions to compare; re-run `neobench eval`."
        )
    names = sorted(base)
    draws_a, draws_b, found, notes = [], [], [], []
    for task in names:
        pair, a, b = bootstrap.paired_draws(base[task], mine[task], resamples, seed)
        draws_a.append(a)
        draws_b.append(b)
        points = units.main_score(pair.baseline), units.main_score(pair.other)
        found.append(_row(label, task, points, a, b, alpha))
        if pair.dropped:
            notes.append(_dropped_note(label, task, pair))
    adjusted = bootstrap.holm([r.p for r in found])
    rows = [_with_holm(r, p, alpha) for r, p in zip(found, adjusted, strict=True)]
    points = (
        float(np.mean([r.baseline_score for r in found])),
        float(np.mean([r.score for r in found])),
    )
    rows.append(_row(label, AVG, points, np.mean(draws_a, 0), np.mean(draws_b, 0), alpha))
    return rows, notes


def _dropped_note(label: str, task: str, pair: bootstrap.Shared) -> str:
    unit = pair.baseline.unit
    kept = sum(p.n for p in pair.baseline.parts)
    return (
        f"{task}: {label} and the baseline compared on the {kept} {unit}s both kept; "
        f"{pair.dropped} left out ({pair.only_baseline} kept only by the baseline, "
        f"{pair.only_other} only by {label}: mteb leaves out a model's {unit}s it scores all "
        "alike), and both scores recomputed on the shared ones."
    )


def _row(
    label: str,
    task: str,
    points: tuple[float, float],
    a: np.ndarray,
    b: np.ndarray,
    alpha: float,
) -> Row:
    """A row from the two point estimates and the two models' draws on the same resamples; its
    p_holm is its own p until the family's adjustment replaces it."""
    pair = bootstrap.paired_from_draws(points[0], points[1], a, b, alpha)
    low, high = np.quantile(b, [alpha / 2, 1 - alpha / 2])
    return Row(
        label, task, points[0], points[1], float(low), float(high),
        pair.delta, pair.low, pair.high, pair.p, pair.p, pair.p < alpha,
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
    return [
        row.model,
        row.task,
        f"{100 * row.baseline_score:.1f}",
        f"{100 * row.score:.1f} [{100 * row.score_ci_low:.1f}, {100 * row.score_ci_high:.1f}]",
        f"{100 * row.delta:+.1f} [{100 * row.ci_low:+.1f}, {100 * row.ci_high:+.1f}]",
        f"{row.p:.3f}",
        f"{row.p_holm:.3f}",
        mark,
    ]


def legend(comparison: Comparison) -> str:
    return (
        f"Baseline: {comparison.baseline}. Scores x100. [ ] = 95% paired-bootstrap interval "
        f"({comparison.resamples} resamples of each task's units, seed {comparison.seed}); "
        f"p two-sided; Holm over each model's tasks; higher/lower = significant at "
        f"{comparison.alpha:g} after Holm. Avg. = mean over the compared tasks, tasks fixed."
    )


def to_markdown(comparison: Comparison) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |"]
    lines.append("|" + "---|" * len(COLUMNS))
    lines += ["| " + " | ".join(cells(r)) + " |" for r in comparison.rows]
    return "\n".join([*lines, "", legend(comparison), *comparison.notes]) + "\n"


def to_csv(comparison: Comparison) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(Row.__dataclass_fields__), lineterminator="\n")
    writer.writeheader()
    for row in comparison.rows:
        writer.writerow(asdict(row))
    return buffer.getvalue()


WRITERS = {".md": to_markdown, ".csv": to_csv, ".json": Comparison.to_json}


def check_out(out: str) -> None:
    from neobench.errors import writable_folder_problems

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
