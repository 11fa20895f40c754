"""The data of the GLUE leaderboard page (`neobench table --glue --html`; laid out by
render/html.py like the MTEB page): the GLUE table's rows with a column per task and Avg., every
number computed by report/glue.py's draws: intervals over the validation items (and seeds), the
paired test of every two computed rows, ranks and letter groups on Avg. (docs/glue.md, "The
page").
"""

from __future__ import annotations

import shlex
from datetime import UTC, datetime
from itertools import combinations
from pathlib import Path
from typing import Any

from neobench._version import __version__
from neobench.core.errors import NeobenchError
from neobench.protocol.config import ALPHA, BOOTSTRAP_SEED, RESAMPLES
from neobench.protocol.glue import TASKS
from neobench.report import bootstrap, ranks, stats
from neobench.report.columns import AVG
from neobench.report.glue import GlueBoard, GlueRuns, glue_board, paired_columns
from neobench.report.page import FORMAT, PAIR_FIELDS, rounded, row_identity, score_cell
from neobench.report.table import Row

METRIC_NAMES = {"mcc": "MCC", "f1": "F1", "accuracy": "accuracy", "pearson": "Pearson",
                "spearman": "Spearman"}  # fmt: skip
BY_TITLE = {task.title: task for task in TASKS.values()}  # the table's columns are task titles
PAIR_NOTE = (
    "Paired bootstrap over the same resampled validation items (and each row's seeds); Holm "
    "over the task columns, Avg. a single test, as `table --glue --baseline` marks."
)


def glue_page_data(
    results: list[str | Path],
    *,
    models: list[str] | None = None,
    reference: str | None = None,
    baseline: str | None = None,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    strict: bool = False,
) -> dict[str, Any]:
    """The GLUE page's data (JSON-ready) for the GLUE runs under ``results``."""
    board = glue_board(
        results, models=models, reference=reference, ci=True, baseline=baseline,
        resamples=resamples, seed=seed, strict=strict,
    )  # fmt: skip
    table = board.table
    names = table.task_names
    computed = [r.label for r in table.rows if r.label in board.runs]
    settings = stats.Settings(resamples, seed, "items", ALPHA)
    found, rank_notes = _ranks(board, computed, settings)
    view = {
        "types": [],
        "tasks": names,
        "rows": {r.label: _cells(r, names) for r in table.rows},
        "pairs": _pairs(board, computed),
        "computed": computed,
        "ranks": found,
        "notes": rank_notes,
    }
    refused = "every GLUE row is fine-tuned on each task it is scored on: no task is zero-shot."
    return {
        "format": FORMAT,
        "layout": "tasks",  # a column per task, as the paper's GLUE table (Table 3)
        "benchmark": table.benchmark,
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "neobench": __version__,
        "settings": {"resamples": resamples, "seed": seed, "over": "items", "alpha": ALPHA},
        "intervals": True,
        "baseline": table.baseline,
        "types": [],
        "tasks": [[t, _metric_text(BY_TITLE[t].metrics, BY_TITLE[t].validation)] for t in names],
        "rows": [_row(r, board, names) for r in table.rows],
        "views": {"all": view, "zero_shot": {"refused": refused}},
        "pair_fields": list(PAIR_FIELDS),
        # A/B's command line: this, then --baseline A --models A,B with the rows' "shell" names
        "compare_command": _table_command(results, resamples, seed),
        "notes": table.notes,
        "sources": table.sources,
    }


def _metric_text(metrics: tuple[str, ...], splits: tuple[str, ...]) -> str:
    text = ", ".join(METRIC_NAMES.get(m, m) for m in metrics)
    named = [s.removeprefix("validation_") for s in splits if s != "validation"]
    return f"{text} ({', '.join(named)})" if named else text


def _table_command(results: list[str | Path], resamples: int, seed: int) -> str:
    """`neobench table --glue --ci` on the page's results (absolute) and draws, quoted for a
    POSIX shell; its marks are the A/B pair's (the page adds --baseline and --models)."""
    argv = ["neobench", "table", "--glue", "--ci"]
    for root in results:
        argv += ["--results", str(Path(root).expanduser().resolve())]
    if resamples != RESAMPLES:
        argv += ["--resamples", str(resamples)]
    if seed != BOOTSTRAP_SEED:
        argv += ["--seed", str(seed)]
    return shlex.join(argv)


def _cells(row: Row, names: list[str]) -> dict[str, Any]:
    return {
        "cells": {AVG: score_cell(row, AVG, row.avg, row.avg_of)},
        "zero_shot": None,
        "missing": None if row.quoted else len(row.missing),
        "tasks": [score_cell(row, t, row.tasks.get(t), None) or None for t in names],
    }


def _pairs(board: GlueBoard, computed: list[str]) -> dict[str, Any]:
    """Every ordered pair "i-j" of computed rows: j against i, column by column, in the shape
    of compare's rows (scores on 0-1, as the MTEB page's pairs)."""
    out: dict[str, Any] = {}
    rows = {r.label: r for r in board.table.rows}
    for i, a in enumerate(computed):
        for j, b in enumerate(computed):
            if i == j:
                continue
            found = paired_columns(rows[a], board.draws[a], rows[b], board.draws[b])
            if not found:
                out[f"{i}-{j}"] = {"refused": "the two rows share no task on the same items."}
                continue
            out[f"{i}-{j}"] = {
                "tasks": [f.column for f in found],
                "rows": [_pair_row(f.paired, f.p_holm) for f in found],
                "significant": [int(f.significant) for f in found],
                "in_domain": [0] * len(found),
                "notes": [PAIR_NOTE],
            }
    return out


def _pair_row(paired: bootstrap.Paired, p_holm: float) -> list[float | None]:
    x100 = (paired.baseline, paired.score, paired.delta, paired.low, paired.high)
    values = dict(zip(PAIR_FIELDS, [*(v / 100 for v in x100), paired.p, p_holm], strict=True))
    return [rounded(values[f]) for f in PAIR_FIELDS]


def _ranks(
    board: GlueBoard, computed: list[str], settings: stats.Settings
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Each computed row's rank on Avg. with its 95% interval and letters: the paired test on
    Avg. between every two rows, Holm over the pairs (report/ranks.py's rule)."""
    held = [label for label in computed if AVG in board.draws[label].columns]
    if len(held) < len(computed):
        return {}, ["No ranks: not every computed row holds every averaged task."]
    try:
        ranks.check(len(held), settings)
    except NeobenchError as error:
        return {}, [f"No ranks: {error}"]
    points = {r.label: float(r.avg) for r in board.table.rows if r.label in held}
    pairs = list(combinations(held, 2))
    tests = [
        bootstrap.paired_from_draws(points[a], points[b], board.draws[a].columns[AVG],
                                    board.draws[b].columns[AVG], settings.alpha)
        for a, b in pairs
    ]  # fmt: skip
    adjusted = bootstrap.holm([t.p for t in tests]) if tests else []
    different = {
        frozenset(pair)
        for pair, test, p in zip(pairs, tests, adjusted, strict=True)
        if p < settings.alpha and test.delta != 0
    }
    found = ranks.ranks_of(points, different)
    return {
        label: {"rank": r.point, "lo": r.low, "hi": r.high, "group": r.group}
        for label, r in found.items()
    }, []


def _row(row: Row, board: GlueBoard, names: list[str]) -> dict[str, Any]:
    out = row_identity(row)
    runs = board.runs.get(row.label)
    if runs is None:
        return out
    out["conditions"] = dict(row.conditions)
    out["model"] = runs.name
    out["members"] = []
    out["glue"] = _provenance(runs, names)
    held = [runs.tasks.get(BY_TITLE[t].name) for t in names]
    out["seeds"] = [
        None if result is None else [rounded(100 * s, 4) for s in result.seed_scores()]
        for result in held
    ]
    return out


def _provenance(runs: GlueRuns, names: list[str]) -> dict[str, Any]:
    """What a cell's provenance shows: the model folder and revision, and per task the point
    chosen, its selection score, its seeds and run folders."""
    tasks = {}
    for title in names:
        result = runs.tasks.get(BY_TITLE[title].name)
        if result is None:
            continue
        score = result.selected.score
        tasks[title] = {
            "point": result.selected.key,
            "selection": None if score is None else rounded(100 * score, 4),
            "points": result.points,
            "seeds": list(result.selected.seeds),
            "folders": [str(folder) for folder, _ in result.runs],
        }
    return {"folder": str(runs.folder), "revision": runs.revision, "tasks": tasks}
