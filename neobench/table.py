"""Results -> the paper's Table 4 layout (rendered by neobench/render.py).

Rows are runs (one model revision under one set of conditions) and, on request, the paper's
published rows. Columns are the benchmark's task types with their task counts, then Avg. = the
plain mean over ALL tasks of the benchmark (as the paper computes it, not the mean of the type
means), then Mean(TaskType). Scores are x100 with one decimal.

The rule for partial results: a type column over fewer tasks than the benchmark has shows the
mean of the tasks present with their count, e.g. "81.6 (2/10)"; Avg. and Mean(TaskType) are
left empty unless every task of the benchmark is present, and the row's missing tasks are
listed in the notes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from importlib import resources
from statistics import fmean
from typing import TYPE_CHECKING, Any

import yaml

from neobench.config import BOOTSTRAP_SEED, RESAMPLES
from neobench.errors import NeobenchError, unknown
from neobench.results import CONDITION_FIELDS, Run

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

logger = logging.getLogger(__name__)

TYPE_ORDER = (
    "Classification",
    "Clustering",
    "PairClassification",
    "Reranking",
    "Retrieval",
    "STS",
    "Summarization",
)
AVG = "Avg."
SHORT = {
    "Classification": "Class.",
    "Clustering": "Clust.",
    "PairClassification": "PairClass.",
    "Reranking": "Rerank.",
    "Retrieval": "Retr.",
    "STS": "STS",
    "Summarization": "Summ.",
}


@dataclass
class Cell:
    value: float | None  # x100
    present: int
    total: int

    @property
    def count(self) -> str:
        """ " (k/n)" when the column averages fewer tasks than the benchmark has."""
        return f" ({self.present}/{self.total})" if self.present < self.total else ""

    def text(self) -> str:
        return "—" if self.value is None else f"{self.value:.1f}{self.count}"


@dataclass
class Row:
    label: str
    quoted: bool  # a published row, not computed here
    types: dict[str, Cell]
    avg: float | None
    mean_types: float | None
    missing: list[str]
    tasks: dict[str, float] = field(default_factory=dict)  # x100
    conditions: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    # With --ci: column (type, task or "Avg.") -> 95% interval x100; with --baseline: column ->
    # "▲" / "▼" where the row is significantly above / below the baseline row.
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    marks: dict[str, str] = field(default_factory=dict)
    # A row of seed replicates (neobench/replicates.py): column -> seed standard deviation x100.
    sd: dict[str, float] = field(default_factory=dict)

    def text(self, column: str, value: float | None, partial: str = "") -> str:
        """A cell: value, "±" half the interval's width (with --ci), the seed sd (replicate
        rows), task count, mark."""
        if value is None:
            return "—"
        low_high = self.ci.get(column)
        spread = f" ±{(low_high[1] - low_high[0]) / 2:.1f}" if low_high else ""
        sd = f" sd {self.sd[column]:.1f}" if column in self.sd else ""
        mark = f" {self.marks[column]}" if column in self.marks else ""
        return f"{value:.1f}{spread}{sd}{partial}{mark}"


@dataclass
class LeaderTable:
    benchmark: str
    types: list[tuple[str, int]]
    task_names: list[str]
    rows: list[Row]
    notes: list[str]
    sources: list[str]
    per_task: bool = False

    def header(self) -> list[str]:
        if self.per_task:
            return ["Model", *self.task_names, "Avg.", "Missing"]
        return [
            "Model",
            *(f"{SHORT.get(t, t)} ({n})" for t, n in self.types),
            "Avg.",
            "Mean(TaskType)",
            "Missing",
        ]

    def cells(self, row: Row) -> list[str]:
        tail = [row.text(AVG, row.avg)]
        if not self.per_task:
            tail.append("—" if row.mean_types is None else f"{row.mean_types:.1f}")
        missing = "" if row.quoted else str(len(row.missing) or "")
        if self.per_task:
            tasks = [row.text(t, row.tasks.get(t)) for t in self.task_names]
            return [row.label, *tasks, *tail, missing]
        return [row.label, *(_type_cell(row, t) for t, _ in self.types), *tail, missing]


def _type_cell(row: Row, type_: str) -> str:
    cell = row.types[type_]
    return row.text(type_, cell.value, cell.count)


def benchmark_layout(tasks: list[AbsTask]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for task in tasks:
        counts[task.metadata.type] = counts.get(task.metadata.type, 0) + 1
    order = [t for t in TYPE_ORDER if t in counts] + sorted(set(counts) - set(TYPE_ORDER))
    return [(t, counts[t]) for t in order]


def result_row(run: Run, label: str, tasks: list[AbsTask]) -> Row:
    by_type: dict[str, list[str]] = {}
    for task in tasks:
        by_type.setdefault(task.metadata.type, []).append(task.metadata.name)
    types = {}
    for type_, names in by_type.items():
        present = [run.scores[n] * 100 for n in names if n in run.scores]
        types[type_] = Cell(fmean(present) if present else None, len(present), len(names))
    missing = [t.metadata.name for t in tasks if t.metadata.name not in run.scores]
    complete = not missing
    return Row(
        label=label,
        quoted=False,
        types=types,
        avg=fmean(run.scores[t.metadata.name] * 100 for t in tasks) if complete else None,
        mean_types=fmean(c.value for c in types.values()) if complete else None,
        missing=missing,
        tasks={k: v * 100 for k, v in run.scores.items()},
        conditions=run.conditions,
        source=f"{run.folder} (run cards: "
        + (", ".join(f"{k} sha256:{v}" for k, v in run.cards.items()) or "none")
        + ")",
    )


def paper_rows(benchmark: str) -> list[Row]:
    data = yaml.safe_load(
        resources.files("neobench.references").joinpath("paper_table4.yaml").read_text()
    )
    if benchmark != data["benchmark"]:
        raise NeobenchError(
            f"--reference paper: the paper's Table 4 is {data['benchmark']}, not {benchmark}."
        )
    counts = data["task_counts"]
    rows = []
    for name, values in data["rows"].items():
        named = dict(zip(data["columns"], values, strict=True))
        types = {t: Cell(named[t], counts[t], counts[t]) for t in counts}
        rows.append(
            Row(
                label=f"{name} (paper)",
                quoted=True,
                types=types,
                avg=named["Avg"],
                mean_types=fmean(named[t] for t in counts),
                missing=[],
                source=f"quoted: {data['source']}",
            )
        )
    return rows


def labels_for(runs: list[Run]) -> list[str]:
    """Model name, plus the experiment, plus "(N seeds)" for seed replicates, plus the
    revision where names would collide."""
    from neobench.replicates import label_suffix

    base = [
        r.model + (f" [{r.experiment}]" if r.experiment else "") + label_suffix(r) for r in runs
    ]
    return [
        b + (f" @{r.revision[:12]}" if base.count(b) > 1 else "")
        for b, r in zip(base, runs, strict=True)
    ]


def select_runs(runs: list[Run], wanted: list[str] | None) -> list[tuple[str, Run]]:
    labelled = list(zip(labels_for(runs), runs, strict=True))
    if not wanted:
        return labelled
    problems, chosen = [], []
    for name in wanted:
        hits = [(label, r) for label, r in labelled if name in (label, r.model)]
        if not hits:
            problems.append(
                unknown(
                    "model",
                    name,
                    sorted({r.model for r in runs} | {lb for lb, _ in labelled}),
                    "Models found under --results are listed by `neobench table`.",
                )
            )
        chosen += [h for h in hits if h not in chosen]
    if problems:
        raise NeobenchError(problems)
    return chosen


def condition_differences(rows: list[Row]) -> dict[str, dict[str, list[str]]]:
    """For each condition field whose value differs between computed rows: value -> row labels."""
    computed = [r for r in rows if not r.quoted]
    out: dict[str, dict[str, list[str]]] = {}
    for key in CONDITION_FIELDS:
        groups: dict[str, list[str]] = {}
        for row in computed:
            groups.setdefault(str(row.conditions.get(key)), []).append(row.label)
        if len(groups) > 1:
            out[key] = groups
    return out


def build_table(
    runs: list[Run],
    tasks: list[AbsTask],
    benchmark: str,
    *,
    models: list[str] | None = None,
    reference: str | None = None,
    per_task: bool = False,
    strict: bool = False,
    problems: list[str] | None = None,
) -> LeaderTable:
    rows = [result_row(run, label, tasks) for label, run in select_runs(runs, models)]
    notes: list[str] = []
    differences = condition_differences(rows)
    if differences:
        described = "; ".join(
            f"{key}: "
            + ", ".join(f"{value} ({', '.join(labels)})" for value, labels in groups.items())
            for key, groups in differences.items()
        )
        if strict:
            raise NeobenchError(
                f"--strict: the rows were not produced under identical conditions. {described}."
            )
        notes.append(f"Conditions differ between rows. {described}.")
    for row in rows:
        if row.missing:
            shown = ", ".join(row.missing[:12]) + (" ..." if len(row.missing) > 12 else "")
            notes.append(
                f"{row.label}: incomplete, {len(row.missing)} of {len(tasks)} tasks missing "
                f"({shown}); Avg. left empty, type columns over the tasks present (k/n)."
            )
    if reference == "paper":
        rows += paper_rows(benchmark)
        notes.append(
            "Rows marked (paper) are quoted from the NeoBERT paper, Table 4, not computed here."
        )
    elif reference is not None:
        raise NeobenchError(unknown("reference", reference, ["paper"]))
    notes.append(
        f"Avg. = mean over all {len(tasks)} tasks of {benchmark} (as the paper computes it); "
        "Mean(TaskType) = mean of the type columns. Scores x100."
    )
    notes += [f"skipped: {p}" for p in problems or []]
    task_names = [t.metadata.name for t in tasks]
    return LeaderTable(
        benchmark,
        benchmark_layout(tasks),
        task_names,
        rows,
        notes,
        [f"{r.label}: {r.source}" for r in rows],
        per_task,
    )


def leaderboard(
    results: list[str],
    benchmark: str,
    *,
    models: list[str] | None = None,
    reference: str | None = None,
    per_task: bool = False,
    strict: bool = False,
    ci: bool = False,
    baseline: str | None = None,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    over: str = "items",
) -> LeaderTable:
    """`neobench table`: the runs of every results root on one benchmark's tasks, as a table.
    Files that cannot be read are skipped with a warning and a note under the table. ``ci``
    adds intervals, ``baseline`` marks cells significantly above or below that row
    (neobench/intervals.py)."""
    from neobench import replicates
    from neobench.results import load_roots
    from neobench.tasks import load_benchmark, select_tasks

    bench = load_benchmark(benchmark)
    tasks = select_tasks(bench)
    runs, problems = load_roots(results, tasks)
    for problem in problems:
        logger.warning("skipped: %s", problem)
    runs, merged = replicates.merge(runs)  # the seeds of one fine-tune: one row
    table = build_table(
        runs,
        tasks,
        bench.name,
        models=models,
        reference=reference,
        per_task=per_task,
        strict=strict,
        problems=problems,
    )
    table.notes += merged
    replicates.annotate(table, dict(select_runs(runs, models)), tasks, ci=ci)
    if ci or baseline:
        from neobench import intervals

        selected = dict(select_runs(runs, models))
        intervals.annotate(
            table, selected, tasks, resamples, seed, ci=ci, baseline=baseline, over=over
        )
    return table
