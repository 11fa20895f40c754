"""Results -> the paper's Table 4 layout (rendered by report/render/table.py): rows are runs and,
on request, the paper's; scores x100. Rows holding different tasks are averaged over the tasks
they all hold, the count shown ("81.6 (2/10)"); the notes say so (docs/guide.md, `neobench table`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from importlib import resources
from statistics import fmean
from typing import TYPE_CHECKING, Any

import yaml

from neobench.core.conditions import RECIPE, RECORD, Conditions, groups
from neobench.core.errors import NeobenchError, unknown
from neobench.core.runs import NAMES, Run, find, identity
from neobench.report.columns import AVG, MEAN_TYPES, MEASURED, SHORT, TYPE_ORDER, ZERO_SHOT
from neobench.report.ranks import Rank

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

logger = logging.getLogger(__name__)

CHANGED = "✗"  # a task whose result file differs from what its run card recorded
RANK = "Rank"  # the header of a ranked column's rank (--ranks)


@dataclass
class Cell:
    value: float | None  # x100
    present: int
    total: int

    @property
    def count(self) -> str:
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
    # column -> 95% interval x100 (--ci); column -> ▲ / ▼ against the baseline (--baseline)
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    marks: dict[str, str] = field(default_factory=dict)
    avg_of: tuple[int, int] = (0, 0)  # Avg. averages (k, n): k of the benchmark's n tasks
    finetuned: bool = False  # fine-tuned by neobench (its run cards name a recipe)
    tag: str = ""  # shown after the label, e.g. "(not fine-tuned)"
    # Columns holding a task the model trained on ("†"), mteb's zero-shot % (report/overlap.py)
    in_domain: set[str] = field(default_factory=set)
    # Columns holding a task whose test units occur in the row's training data, measured ("‡")
    measured: set[str] = field(default_factory=set)
    zero_shot: int | None = None
    sd: dict[str, float] = field(default_factory=dict)  # column -> seed sd x100 (replicates)
    identity: dict[str, Any] = field(default_factory=dict)  # core/runs.NAMES
    # Tasks whose stored score is not what its run card recorded: their cells, and the columns
    # they belong to (flagged), read CHANGED.
    mismatched: list[str] = field(default_factory=list)
    flagged: set[str] = field(default_factory=set)
    ranks: dict[str, Rank] = field(default_factory=dict)  # column -> rank (--ranks)

    def text(self, column: str, value: float | None, partial: str = "") -> str:
        """A cell: value, "†", ± half the interval's width, seed sd, task count, mark, CHANGED."""
        flag = f" {CHANGED}" if column in self.flagged else ""
        if value is None:
            return CHANGED if flag else "—"
        low_high = self.ci.get(column)
        spread = f" ±{(low_high[1] - low_high[0]) / 2:.1f}" if low_high else ""
        sd = f" sd {self.sd[column]:.1f}" if column in self.sd else ""
        mark = f" {self.marks[column]}" if column in self.marks else ""
        dagger = "†" if column in self.in_domain else ""
        dagger += MEASURED if column in self.measured else ""
        return f"{value:.1f}{dagger}{spread}{sd}{partial}{mark}{flag}"

    def rank_text(self, column: str) -> str:
        """``2 [1–3] ab``: rank, its 95% interval, its letter group; — for an unranked row."""
        found = self.ranks.get(column)
        return "—" if found is None else f"{found.text()} {found.group}"

    def zero_shot_text(self) -> str:
        if self.quoted:
            return ""
        return "unknown" if self.zero_shot is None else f"{self.zero_shot}%"

    def avg_text(self) -> str:
        k, n = self.avg_of
        return self.text(AVG, self.avg, f" ({k}/{n})" if k < n else "")

    @property
    def name(self) -> str:
        return f"{self.label} {self.tag}" if self.tag else self.label


@dataclass
class LeaderTable:
    benchmark: str
    types: list[tuple[str, int]]
    task_names: list[str]  # the benchmark's tasks; per task, those some computed row holds
    rows: list[Row]
    notes: list[str]
    sources: list[str]
    per_task: bool = False
    # The tasks all computed rows share, where they hold different ones; else None.
    averaged: list[str] | None = None
    baseline: str | None = None  # with --baseline: the label of that row (report/intervals.py)
    zero_shot: bool = False  # a Zero-shot column (report/overlap.py fills it)
    ranked: list[str] = field(default_factory=list)  # --ranks: the columns ranked (Avg. last)
    # The conditions the writers record per row: an evaluation's (conditions.RECORD), or another
    # protocol's own fields read from Row.conditions as they are (report/glue.py).
    record_fields: tuple[str, ...] = RECORD
    # The zero_shot and in_domain fields of the CSV, JSON and frames: MTEB's notion of a row
    # trained on a task or not. False where every row trained on each task it is scored on (GLUE).
    zero_shot_fields: bool = True

    def row(self, label: str) -> Row:
        return next(r for r in self.rows if r.label == label)

    def columns(self, tasks: list[AbsTask]) -> dict[str, list[str]]:
        """Each score column (a task with --per-task, else a type; and Avg.) and the tasks it
        averages (``averaged`` where set)."""
        kept = [t for t in tasks if self.averaged is None or t.metadata.name in self.averaged]
        found = {t: [t] for t in self.task_names} if self.per_task else by_type(kept)
        return found | {AVG: [t.metadata.name for t in kept]}

    def record(self, row: Row) -> dict[str, Any]:
        """The row's conditions as CSV, JSON and frames write them (`record_fields`)."""
        if self.record_fields == RECORD:
            return Conditions(row.conditions).record()
        return {k: row.conditions.get(k) for k in self.record_fields}

    def to_pandas(self) -> Any:
        """A row per table row, intervals, seed sd and marks in columns of their own (frames.py)."""
        from neobench.report.frames import leader_frame

        return leader_frame(self)

    def columns_shown(self) -> list[str]:
        """The score columns before Avg."""
        return list(self.task_names) if self.per_task else [t for t, _ in self.types]

    def score(self, row: Row, column: str) -> float | None:
        """A row's value in one of `columns_shown`."""
        return row.tasks.get(column) if self.per_task else row.types[column].value

    @property
    def benchmark_tasks(self) -> int:
        return sum(n for _, n in self.types)

    def header(self) -> list[str]:
        extra = [ZERO_SHOT] if self.zero_shot else []
        avg = ["Avg.", *([RANK] if AVG in self.ranked else [])]
        if self.per_task:
            return ["Model", *self.task_names, *avg, *extra, "Missing"]
        types = []
        for t, n in self.types:
            types += [
                f"{SHORT.get(t, t)} ({n})",
                *([f"{RANK} {SHORT.get(t, t)}"] * (t in self.ranked)),
            ]
        return ["Model", *types, *avg, MEAN_TYPES, *extra, "Missing"]

    def cells(self, row: Row) -> list[str]:
        tail = [row.avg_text(), *([row.rank_text(AVG)] if AVG in self.ranked else [])]
        if not self.per_task:
            tail.append(row.text(MEAN_TYPES, row.mean_types))
        if self.zero_shot:
            tail.append(row.zero_shot_text())
        missing = "" if row.quoted else str(len(row.missing) or "")
        if self.per_task:
            tasks = [row.text(t, row.tasks.get(t)) for t in self.task_names]
            return [row.name, *tasks, *tail, missing]
        types = []
        for t, _ in self.types:
            types.append(row.text(t, row.types[t].value, row.types[t].count))
            types += [row.rank_text(t)] if t in self.ranked else []
        return [row.name, *types, *tail, missing]


def by_type(tasks: list[AbsTask]) -> dict[str, list[str]]:
    """Task type -> the names of ``tasks`` of that type, in their order."""
    found: dict[str, list[str]] = {}
    for task in tasks:
        found.setdefault(task.metadata.type, []).append(task.metadata.name)
    return found


def benchmark_layout(tasks: list[AbsTask]) -> list[tuple[str, int]]:
    counts = {t: len(names) for t, names in by_type(tasks).items()}
    order = [t for t in TYPE_ORDER if t in counts] + sorted(set(counts) - set(TYPE_ORDER))
    return [(t, counts[t]) for t in order]


def result_row(run: Run, label: str, tasks: list[AbsTask], shared: set[str] | None = None) -> Row:
    """A computed row; type columns and Avg. average the tasks of ``shared`` (default: all the
    run holds)."""
    averaged = run.scores.keys() if shared is None else shared & run.scores.keys()
    types = {}
    changed = sorted(t.metadata.name for t in tasks if t.metadata.name in run.mismatched)
    flagged = set(changed) | {t.metadata.type for t in tasks if t.metadata.name in changed}
    for type_, names in by_type(tasks).items():
        present = [run.scores[n] * 100 for n in names if n in averaged]
        types[type_] = Cell(fmean(present) if present else None, len(present), len(names))
    names = [t.metadata.name for t in tasks if t.metadata.name in averaged]
    complete = len(names) == len(tasks)
    return Row(
        label=label,
        quoted=False,
        types=types,
        avg=fmean(run.scores[n] * 100 for n in names) if names else None,
        mean_types=fmean(c.value for c in types.values()) if complete else None,
        missing=[
            t.metadata.name
            for t in tasks
            if t.metadata.name not in run.scores and t.metadata.name not in run.mismatched
        ],
        tasks={k: v * 100 for k, v in run.scores.items()},
        conditions=run.conditions,
        source=f"{run.folder} (run cards: "
        + (", ".join(f"{k} sha256:{v}" for k, v in run.cards.items()) or "none")
        + ")",
        avg_of=(len(names), len(tasks)),
        finetuned=run.finetuned,
        identity=identity(label, run),
        mismatched=changed,
        flagged=flagged | ({AVG} if changed else set()),
    )


def paper_rows(benchmark: str) -> list[Row]:
    data = yaml.safe_load(
        resources.files("neobench.report.references").joinpath("paper_table4.yaml").read_text()
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
                avg_of=(sum(counts.values()), sum(counts.values())),
                identity=dict.fromkeys(NAMES) | {"label": f"{name} (paper)", "model": name},
            )
        )
    return rows


def shared_tasks(runs: list[Run], tasks: list[AbsTask]) -> set[str] | None:
    """The benchmark tasks every run holds, or None when all runs hold the same tasks."""
    held = [{t.metadata.name for t in tasks} & r.scores.keys() for r in runs]
    if not held or all(h == held[0] for h in held):
        return None
    return set.intersection(*held)


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
    chosen = find(runs, models)
    shared = shared_tasks([run for _, run in chosen], tasks)
    rows = [result_row(run, label, tasks, shared) for label, run in chosen]
    notes = _condition_notes(rows, strict) + _training_notes(rows)
    notes += _coverage_notes(rows, tasks, shared)
    names = {t.metadata.name for t in tasks}
    notes += [
        f"{label}: {CHANGED} {run.mismatched[task]}"
        for label, run in chosen
        for task in sorted(run.mismatched.keys() & names)
    ]
    notes += [
        f"{label}: {why}"
        for label, run in chosen
        for member in run.each()
        for task, why in sorted(member.card_missing.items())
        if task in names
    ]
    if reference == "paper":
        rows += paper_rows(benchmark)
        notes.append(
            "Rows marked (paper) are quoted from the NeoBERT paper, Table 4, not computed here."
        )
    elif reference is not None:
        raise NeobenchError(unknown("reference", reference, ["paper"]))
    notes.append(
        f"Avg. = mean over the tasks averaged ({len(tasks)} when complete: all of {benchmark}, "
        "as the paper computes it); Mean(TaskType) = mean of the type columns. Scores x100."
    )
    notes += [f"skipped: {p}" for p in problems or []]
    shown = [t.metadata.name for t in tasks]
    if per_task:
        shown, note = _held_tasks(rows, shown, benchmark)
        notes += note
    return LeaderTable(
        benchmark,
        benchmark_layout(tasks),
        shown,
        rows,
        notes,
        [f"{r.label}: {r.source}" for r in rows],
        per_task,
        averaged=sorted(shared) if shared is not None else None,
    )


def _held_tasks(rows: list[Row], names: list[str], benchmark: str) -> tuple[list[str], list[str]]:
    """Per task, the columns are the tasks some computed row holds, and a note says how many
    tasks no row holds."""
    held = {task for row in rows if not row.quoted for task in [*row.tasks, *row.mismatched]}
    shown = [name for name in names if name in held]
    if len(shown) == len(names):
        return shown, []
    return shown, [
        f"Per task: the {len(shown)} tasks the rows hold are shown; the other "
        f"{len(names) - len(shown)} of the {len(names)} tasks of {benchmark} no row holds."
    ]


def _condition_notes(rows: list[Row], strict: bool) -> list[str]:
    differences = groups([(r.label, r.conditions) for r in rows if not r.quoted])
    if not differences:
        return []
    described = "; ".join(
        f"{'recipe (among fine-tuned rows)' if key == RECIPE else key}: "
        + ", ".join(f"{value} ({', '.join(labels)})" for value, labels in groups.items())
        for key, groups in differences.items()
    )
    if strict:
        raise NeobenchError(
            f"--strict: the rows were not produced under identical conditions. {described}. "
            "Evaluate them again under the same conditions, or leave rows out with --models."
        )
    return [f"Conditions differ between rows. {described}."]


def _training_notes(rows: list[Row]) -> list[str]:
    """Label the rows neobench did not fine-tune when the table also holds fine-tuned ones."""
    computed = [r for r in rows if not r.quoted]
    tuned = [r for r in computed if r.finetuned]
    if not tuned or len(tuned) == len(computed):
        return []
    recipes = sorted({str(r.conditions.get(RECIPE)) for r in tuned})
    for row in computed:
        if not row.finetuned:
            row.tag = "(not fine-tuned)"
    return [
        "(not fine-tuned): evaluated as given, not fine-tuned by neobench; the other computed "
        f"rows were fine-tuned by neobench (recipe {', '.join(recipes)}). Evaluation conditions "
        "are the same for both kinds; only the training differs."
    ]


def _coverage_notes(rows: list[Row], tasks: list[AbsTask], shared: set[str] | None) -> list[str]:
    notes = []
    if shared is not None:
        notes.append(
            f"The computed rows hold different tasks: type columns and Avg. average the "
            f"{len(shared)} of {len(tasks)} tasks they all hold, so the rows are compared on the "
            "same tasks; each row's other tasks are listed below (--per-task shows them)."
        )
    for row in rows:
        outside = sorted(row.tasks.keys() - (shared if shared is not None else row.tasks.keys()))
        if row.missing or outside:
            missing = ", ".join(row.missing[:12]) + (" ..." if len(row.missing) > 12 else "")
            parts = [f"{len(row.missing)} of {len(tasks)} tasks missing ({missing})"] * bool(
                row.missing
            )
            if outside:
                parts.append(f"not averaged, held by this row only: {', '.join(outside[:12])}")
            notes.append(f"{row.label}: incomplete; " + "; ".join(parts) + ".")
    return notes
