"""`neobench table --glue`: the GLUE runs under results roots (`neobench glue`'s folders) in the
layout of the paper's GLUE table (its Table 3): a row per model, a column per task and Avg.,
scores x100 on the validation split; the grid point of each task chosen by the protocol's
selection rule (protocol/glue_selection.py), reported as the mean over its seeds.

Intervals resample the validation items (and, with several seeds, the seeds) and recompute the
GLUE metrics on every resample; a mark against a baseline is a paired bootstrap on the same
resampled items, Holm over the task columns, Avg. a single test (as `table --baseline`).
docs/glue.md, "The table".
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from statistics import fmean, stdev
from typing import Any

import numpy as np
import yaml

from neobench.core.card_io import read_card
from neobench.core.errors import NeobenchError, unknown
from neobench.core.runs import NAMES
from neobench.protocol.config import ALPHA, BOOTSTRAP_SEED, RESAMPLES
from neobench.protocol.glue import (
    GLUE_CARD,
    ORDER,
    POINT_CARD,
    PREDICTIONS,
    TASKS,
    GlueTask,
    data_conflicts,
    metric_draws,
)
from neobench.protocol.glue_selection import Selected, select
from neobench.report import bootstrap
from neobench.report.columns import AVG, DOWN, MARKS, UP
from neobench.report.table import LeaderTable, Row

BENCHMARK = "GLUE (validation)"
VALIDATION_TAG = "(selected on validation)"
# A row's conditions, as the CSV, JSON and frames write them; rows differing in one are noted.
RECORD = ("recipe", "recipe_sha256", "select_on", "data_sha256", "max_seq_length",
          "transfer_from_mnli", "mixed_precision")  # fmt: skip


@dataclass
class TaskResult:
    """One task of one model: the selection and the selected point's complete runs."""

    task: GlueTask
    selected: Selected
    runs: list[tuple[Path, dict[str, Any]]]  # (run folder, point card), one per seed
    points: int  # grid points with at least one complete run
    incomplete: int  # runs started and not complete

    def seed_scores(self) -> list[float]:
        """Each seed's reported score: the mean over the task's validation splits."""
        return [
            fmean(card["validation"][split]["score"] for split in self.task.validation)
            for _, card in self.runs
        ]

    @property
    def score(self) -> float:
        return fmean(self.seed_scores())


@dataclass
class GlueRuns:
    """One model's GLUE folder (<root>/glue/<model>/<revision>/)."""

    folder: Path
    name: str
    revision: str
    card: dict[str, Any]
    tasks: dict[str, TaskResult] = field(default_factory=dict)

    def value(self, key: str) -> Any:
        found = self.card.get("recipe", {}).get("values", {}).get(key, {})
        return found.get("value") if isinstance(found, dict) else None

    def conditions(self) -> dict[str, Any]:
        recipe = self.card.get("recipe", {})
        named = f"{recipe.get('name')} v{recipe.get('version')}"
        own = ("recipe", "recipe_sha256", "data_sha256", "mixed_precision")
        return {"recipe": named, "recipe_sha256": recipe.get("sha256"),
                "data_sha256": self.card.get("data_sha256")} | {
            k: self.value(k) for k in RECORD if k not in own
        } | {"mixed_precision": self.precision()}  # fmt: skip

    def precision(self) -> str | None:
        """The precision the reported runs ran in (bf16 autocast on CUDA, fp32 on a CPU; the
        recipe's value where a card predates that record), several joined by "+"."""
        found = {
            str(card.get("precision") or self.value("mixed_precision"))
            for result in self.tasks.values()
            for _, card in result.runs
        }
        return "+".join(sorted(found)) if found else self.value("mixed_precision")


def find_glue(results: list[str | Path]) -> tuple[list[GlueRuns], list[str]]:
    """Every model folder under the roots, with its tasks read; unreadable cards as problems."""
    found, problems = [], []
    for root in map(Path, results):
        if not root.is_dir():
            problems.append(f"--results {root}: no such folder.")
            continue
        for path in sorted(root.rglob(GLUE_CARD)):
            try:
                card = read_card(path)
            except (NeobenchError, OSError, yaml.YAMLError) as error:
                problems.append(f"{path}: unreadable ({error}); it is left out.")
                continue
            model = card.get("model") or {}
            runs = GlueRuns(path.parent, str(model.get("name")), str(model.get("revision")), card)
            for name in ORDER:
                if (path.parent / name).is_dir():
                    runs.tasks[name] = _task_result(TASKS[name], path.parent / name, problems)
            runs.tasks = {k: v for k, v in runs.tasks.items() if v.runs}
            found.append(runs)
    return found, problems


def _task_result(task: GlueTask, folder: Path, problems: list[str]) -> TaskResult:
    complete, incomplete = [], 0
    for path in sorted(folder.glob(f"*/seed-*/{POINT_CARD}")):
        try:
            card = read_card(path)
        except (NeobenchError, OSError, yaml.YAMLError) as error:
            problems.append(f"{path}: unreadable ({error}); the run is left out.")
            continue
        if card.get("status") == "complete":
            complete.append((path.parent, card))
        else:
            incomplete += 1
    chosen = select(task.name, [c for _, c in complete], len(complete) + incomplete)
    runs = [(f, c) for f, c in complete if c["key"] == chosen.key]
    points = len({c["key"] for _, c in complete})
    return TaskResult(task, chosen, sorted(runs, key=lambda r: r[1]["seed"]), points, incomplete)


def glue_table(
    results: list[str | Path],
    *,
    models: list[str] | None = None,
    reference: str | None = None,
    ci: bool = False,
    baseline: str | None = None,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    strict: bool = False,
) -> LeaderTable:
    """The GLUE table of the runs under ``results``; ``ci`` adds intervals, ``baseline`` marks
    against that row, ``reference="paper"`` the paper's rows, ``strict`` refuses rows produced
    under different conditions."""
    given = {"models": models, "reference": reference, "ci": ci, "baseline": baseline}
    return glue_board(results, **given, resamples=resamples, seed=seed, strict=strict).table


@dataclass
class GlueBoard:
    """The GLUE table and what its intervals and marks come from (the leaderboard page's
    input): each computed row's model folder and resampled scores."""

    table: LeaderTable
    runs: dict[str, GlueRuns]  # computed row label -> its model folder
    draws: dict[str, Draws]  # computed row label -> its draws; empty without ci or baseline


def glue_board(
    results: list[str | Path],
    *,
    models: list[str] | None = None,
    reference: str | None = None,
    ci: bool = False,
    baseline: str | None = None,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    strict: bool = False,
) -> GlueBoard:
    """`glue_table`'s table with its rows' folders and draws."""
    if ci or baseline:
        bootstrap.check_resamples(resamples)
    if reference not in (None, "paper"):
        raise NeobenchError(unknown("reference", reference, ["paper"]))
    found, problems = find_glue(results)
    labelled = _chosen(_labels(found), models)
    if not labelled:
        raise NeobenchError(
            f"--glue: no GLUE runs under {', '.join(map(str, results))} (no {GLUE_CARD} with a "
            "complete run). Run `neobench glue --output DIR` and pass that DIR as --results."
        )
    held = [n for n in ORDER if any(n in r.tasks for r in labelled.values())]
    averaged = [
        n for n in held if TASKS[n].in_average and all(n in r.tasks for r in labelled.values())
    ]
    rows = [_row(label, runs, held, averaged) for label, runs in labelled.items()]
    notes = _conditions_notes(labelled, strict) + _protocol_notes(labelled, averaged)
    if reference == "paper":
        rows += _paper_rows(held, averaged)
        notes.append(
            "Rows marked (paper) are quoted from the NeoBERT paper's Table 3 (GLUE development "
            "set), not computed here: the paper chose its grid points and reported on the same "
            "validation split; its baseline rows are quoted from their own papers (BERT's from "
            "the GLUE test server); its NeoBERT rows start RTE, STS-B, MRPC and QNLI from the "
            "MNLI checkpoint." + _paper_avg_note(averaged)
        )
    notes += [f"skipped: {p}" for p in problems]
    table = LeaderTable(
        BENCHMARK,
        [("GLUE", len(averaged))],
        [TASKS[n].title for n in held],
        rows,
        notes,
        [f"{label}: {runs.folder}" for label, runs in labelled.items()],
        per_task=True,
        record_fields=RECORD,
        zero_shot_fields=False,  # every row trained on each task it is scored on
    )
    draws: dict[str, Draws] = {}
    if ci or baseline:
        draws = {label: _draws(runs, averaged, resamples, seed) for label, runs in labelled.items()}
        if ci:
            _intervals(table, draws, resamples, seed)
        if baseline:
            _marks(table, labelled, draws, baseline, resamples)
    return GlueBoard(table, labelled, draws)


# ---- rows ------------------------------------------------------------------------------------


def _labels(found: list[GlueRuns]) -> dict[str, GlueRuns]:
    """A row label per model folder: its name; with the revision where a name has several; with
    the folder where one revision is under several roots."""
    labels: dict[str, GlueRuns] = {}
    for runs in found:
        if not runs.tasks:
            continue
        same = [r for r in found if r.name == runs.name and r.tasks]
        label = runs.name if len(same) == 1 else f"{runs.name}@{runs.revision[:8]}"
        if label in labels:
            label = f"{label} ({runs.folder})"
        labels[label] = runs
    return labels


def _chosen(labelled: dict[str, GlueRuns], names: list[str] | None) -> dict[str, GlueRuns]:
    if not names:
        return labelled
    chosen, problems = {}, []
    for name in names:
        hits = {k: v for k, v in labelled.items() if name in (k, v.name)}
        if not hits:
            problems.append(unknown("model", name, list(labelled)))
        chosen |= hits
    if problems:
        raise NeobenchError(problems)
    return chosen


def _row(label: str, runs: GlueRuns, held: list[str], averaged: list[str]) -> Row:
    tasks = {TASKS[n].title: 100 * r.score for n, r in runs.tasks.items() if n in held}
    sd = {
        TASKS[n].title: 100 * stdev(r.seed_scores())
        for n, r in runs.tasks.items()
        if len(r.runs) > 1
    }
    avg_tasks = [n for n in averaged if n in runs.tasks]
    seeds = sorted({s for r in runs.tasks.values() for s in r.selected.seeds})
    on_validation = runs.value("select_on") == "validation"
    return Row(
        label=label,
        quoted=False,
        types={},
        avg=fmean(tasks[TASKS[n].title] for n in avg_tasks) if avg_tasks else None,
        mean_types=None,
        missing=[TASKS[n].title for n in held if n not in runs.tasks],
        tasks=tasks,
        conditions=runs.conditions(),
        source=str(runs.folder),
        avg_of=(len(avg_tasks), sum(t.in_average for t in TASKS.values())),
        finetuned=True,
        tag=VALIDATION_TAG if on_validation else "",
        sd=sd,
        identity=dict(zip(NAMES, (label, runs.name, runs.revision, None, seeds), strict=True)),
    )


def _paper_rows(held: list[str], averaged: list[str]) -> list[Row]:
    data = yaml.safe_load(
        resources.files("neobench.report.references").joinpath("paper_glue.yaml").read_text()
    )
    rows = []
    for name, values in data["rows"].items():
        named = dict(zip(data["columns"], values, strict=True))
        shown = [n for n in averaged if n in named]
        rows.append(
            Row(
                label=f"{name} (paper)",
                quoted=True,
                types={},
                avg=fmean(named[n] for n in shown) if shown else None,
                mean_types=None,
                missing=[],
                tasks={TASKS[n].title: named[n] for n in held if n in named},
                source=f"quoted: {data['source']}",
                avg_of=(len(shown), len(shown)),
                identity=dict.fromkeys(NAMES) | {"label": f"{name} (paper)", "model": name},
            )
        )
    return rows


def _paper_avg_note(averaged: list[str]) -> str:
    full = [n for n in ORDER if TASKS[n].in_average]
    if averaged == full:
        return ""
    return (
        f" Their Avg. is recomputed over the {len(averaged)} tasks shown "
        f"({', '.join(TASKS[n].title for n in averaged)}), as the computed rows' is; the "
        f"paper's own averages all {len(full)}."
    )


# ---- notes -----------------------------------------------------------------------------------


def _conditions_notes(labelled: dict[str, GlueRuns], strict: bool) -> list[str]:
    """Rows whose conditions differ: each recorded field but the data's hash, which covers
    each row's own tasks; the data is compared file by file (`data_conflicts`)."""
    values: dict[str, dict[str, list[str]]] = {}
    for label, runs in labelled.items():
        for key, value in runs.conditions().items():
            if key != "data_sha256":
                values.setdefault(key, {}).setdefault(str(value), []).append(label)
    differ = {k: v for k, v in values.items() if len(v) > 1}
    rows = list(labelled.items())
    clashes = [
        f"{a} and {b}"
        for i, (a, x) in enumerate(rows)
        for b, y in rows[i + 1 :]
        if data_conflicts(x.card.get("data") or {}, y.card.get("data") or {})
    ]
    if not differ and not clashes:
        return []
    described = "; ".join(
        f"{key}: " + ", ".join(f"{value} ({', '.join(labels)})" for value, labels in found.items())
        for key, found in differ.items()
    )
    if clashes:
        described += ("; " if described else "") + (
            "data: other files or another source (" + "; ".join(clashes) + ")"
        )
    if strict:
        raise NeobenchError(
            f"--strict: the GLUE rows were not produced under identical conditions. {described}. "
            "Run them again under the same recipe and data, or leave rows out with --models."
        )
    return [f"Conditions differ between rows. {described}."]


def _protocol_notes(labelled: dict[str, GlueRuns], averaged: list[str]) -> list[str]:
    notes = [
        "Scores x100 on each task's validation split: MCC for CoLA; the mean of F1 and accuracy "
        "for MRPC and QQP, of Pearson and Spearman for STS-B, of matched and mismatched for "
        "MNLI; accuracy elsewhere (the paper's Table 3). Per task, the grid point whose mean "
        "selection score over its seeds is highest; the cell is that point's mean over its "
        f"seeds. Avg. = mean over {', '.join(TASKS[n].title for n in averaged) or 'no task'}"
        " (WNLI is never averaged, following BERT)."
    ]
    modes = {runs.value("select_on") for runs in labelled.values()}
    if "heldout" in modes:
        notes.append(
            "Selection on a held-out slice of each task's training split (not trained on); the "
            "validation split was read once per run, after its checkpoint was chosen."
        )
    if "validation" in modes:
        notes.append(
            f"{VALIDATION_TAG}: checkpoints and grid points chosen on the validation split and "
            "reported on it, the paper's way; this flatters the grid's best point."
        )
    if any(not runs.value("transfer_from_mnli") for runs in labelled.values()):
        notes.append(
            "Every task starts from the pretrained backbone (transfer_from_mnli: false); the "
            "paper's NeoBERT rows start RTE, STS-B, MRPC and QNLI from the MNLI checkpoint."
        )
    if any(len(r.runs) > 1 for runs in labelled.values() for r in runs.tasks.values()):
        notes.append("sd = the standard deviation over the selected point's seeds.")
    for label, runs in labelled.items():
        chosen = "; ".join(
            f"{TASKS[n].title} {r.selected.key} (selection {100 * (r.selected.score or 0):.1f}, "
            f"seeds {','.join(map(str, r.selected.seeds))}; {r.points} point(s))"
            for n, r in runs.tasks.items()
        )
        notes.append(f"{label}: selected {chosen}.")
        waiting = {TASKS[n].title: r.incomplete for n, r in runs.tasks.items() if r.incomplete}
        if waiting:
            notes.append(
                f"{label}: runs not complete ("
                + ", ".join(f"{t} {k}" for t, k in waiting.items())
                + "): the selection may still change."
            )
    return notes


# ---- intervals and marks ---------------------------------------------------------------------


def _rng(seed: int, *parts: str) -> np.random.Generator:
    """One generator per (seed, task, part): two rows resample the same items."""
    return np.random.default_rng([seed, *(zlib.crc32(p.encode()) for p in parts)])


@dataclass
class Draws:
    """A row's resampled scores (x100) per column, and the items each task was scored on."""

    columns: dict[str, np.ndarray] = field(default_factory=dict)
    items: dict[str, list[list[int]]] = field(default_factory=dict)  # task title -> idx per split


def _draws(runs: GlueRuns, averaged: list[str], resamples: int, seed: int) -> Draws:
    out = Draws()
    for result in runs.tasks.values():
        title = result.task.title
        out.columns[title], out.items[title] = _task_draws(result, resamples, seed)
    if averaged and all(n in runs.tasks for n in averaged):
        out.columns[AVG] = np.mean([out.columns[TASKS[n].title] for n in averaged], axis=0)
    return out


def _task_draws(result: TaskResult, resamples: int, seed: int) -> tuple[np.ndarray, list]:
    """The task's score on each resample: items drawn again (the same draw for every row),
    then seeds drawn again (a row's own); the mean over splits and drawn seeds."""
    task, items = result.task, []
    saved = [json.loads((folder / PREDICTIONS).read_text()) for folder, _ in result.runs]
    split_scores = []
    for split in task.validation:
        first = saved[0][split]
        order = np.argsort(first["idx"], kind="stable")
        items.append([int(first["idx"][i]) for i in order])
        n = len(order)
        drawn = _rng(seed, task.name, split).integers(0, n, size=(resamples, n))
        scores = []
        for found in saved:
            if sorted(found[split]["idx"]) != items[-1]:
                raise NeobenchError(
                    f"{result.runs[0][0].parent.parent}: the seeds' {split} predictions hold "
                    "different items. Delete the task's runs and run them again."
                )
            at = np.argsort(found[split]["idx"], kind="stable")
            pred = np.asarray(found[split]["prediction"])[at]
            gold = np.asarray(found[split]["label"])[at]
            scores.append(metric_draws(task, pred[drawn], gold[drawn])["score"])
        split_scores.append(np.stack(scores))  # (seeds, resamples)
    per_seed = np.mean(split_scores, axis=0)
    k = len(result.runs)
    if k > 1:
        chosen = _rng(seed, task.name, "seeds").integers(0, k, size=(resamples, k))
        per_seed = per_seed[chosen.T, np.arange(resamples)]  # (k, resamples) of drawn seeds
    return 100 * per_seed.mean(axis=0), items


def _intervals(table: LeaderTable, draws: dict[str, Draws], resamples: int, seed: int) -> None:
    for row in table.rows:
        if row.label not in draws:
            continue
        for column, values in draws[row.label].columns.items():
            low, high = np.quantile(values, [ALPHA / 2, 1 - ALPHA / 2])
            row.ci[column] = (float(low), float(high))
    table.notes.append(
        f"± = half the width of the 95% bootstrap interval, 'if the validation items were drawn "
        f"again' (and the seeds, where a point has several): the GLUE metrics recomputed on "
        f"{resamples} resamples (seed {seed}); Avg. averages its tasks on each resample."
    )


@dataclass(frozen=True)
class PairedColumn:
    """One column of one row against another: the paired bootstrap of the difference (x100)
    and its p after Holm over the row's task columns (Avg. a single test)."""

    column: str
    paired: bootstrap.Paired
    p_holm: float

    @property
    def significant(self) -> bool:
        return self.p_holm < ALPHA and self.paired.delta != 0


def paired_columns(base: Row, base_draws: Draws, row: Row, draws: Draws) -> list[PairedColumn]:
    """``row`` against ``base`` on every column both hold on the same validation items (tasks
    in the table's order, then Avg.), on the same resampled items."""
    shared = [
        c
        for c in draws.columns
        if c in base_draws.columns and (c == AVG or draws.items.get(c) == base_draws.items.get(c))
    ]
    point = {c: (row.avg if c == AVG else row.tasks[c]) for c in shared}
    base_point = {c: (base.avg if c == AVG else base.tasks[c]) for c in shared}
    tests = {
        c: bootstrap.paired_from_draws(base_point[c], point[c], base_draws.columns[c],
                                       draws.columns[c], ALPHA)
        for c in shared
    }  # fmt: skip
    tasks = [c for c in shared if c != AVG]
    adjusted = dict(zip(tasks, bootstrap.holm([tests[c].p for c in tasks]), strict=True))
    adjusted |= {AVG: tests[AVG].p} if AVG in tests else {}
    return [PairedColumn(c, tests[c], adjusted[c]) for c in shared]


def _marks(
    table: LeaderTable,
    labelled: dict[str, GlueRuns],
    draws: dict[str, Draws],
    baseline: str,
    resamples: int,
) -> None:
    base = _chosen(labelled, [baseline])
    if len(base) != 1:
        raise NeobenchError(
            f"--baseline {baseline} matches {len(base)} rows ({', '.join(base)}): name one row "
            "by its label."
        )
    (base_label,) = base
    table.baseline = base_label
    mine = table.row(base_label)
    for row in table.rows:
        if row.quoted or row.label == base_label:
            continue
        for found in paired_columns(mine, draws[base_label], row, draws[row.label]):
            if found.significant:
                row.marks[found.column] = MARKS[1 if found.paired.delta > 0 else -1]
    table.notes.append(
        f"{UP} / {DOWN}: significantly above / below {base_label} (paired bootstrap over the "
        f"same resampled validation items, {resamples} resamples; Holm over each row's task "
        f"columns, Avg. a single test; alpha {ALPHA:g})."
    )
