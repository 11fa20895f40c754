"""The data of the leaderboard page (`neobench table --html`; laid out by render/html.py): every
number it shows, computed by the report's own engines (docs/leaderboard-page.md, "How it is
built"). The baseline's pairs mark the task cells; the ranks and letter groups on Avg. are
`table --ranks`'s.
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from neobench._version import __version__
from neobench.core.conditions import EVAL, RECIPE
from neobench.core.errors import NeobenchError
from neobench.core.replicates import seed_sd
from neobench.core.results import has_units
from neobench.core.runs import Run, find
from neobench.protocol.config import ALPHA, BOOTSTRAP_SEED, DEFAULT_BENCHMARK, RESAMPLES
from neobench.report import compare, ranks, stats
from neobench.report.columns import AVG, MARKS, MEAN_TYPES, SHORT
from neobench.report.leaderboard import leaderboard
from neobench.report.load import load
from neobench.report.table import LeaderTable, Row

FORMAT = 1
# A pair's rows (tasks, Avg. last): these fields of compare's Row, on 0-1, rounded to DIGITS.
PAIR_FIELDS = ("baseline_score", "score", "delta", "ci_low", "ci_high", "p", "p_holm")
DIGITS = 6


def page_data(
    results: list[str | Path],
    benchmark: str,
    *,
    models: list[str] | None = None,
    reference: str | None = None,
    baseline: str | None = None,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    over: str = "items",
) -> dict[str, Any]:
    """The page's data (JSON-ready) for the runs under ``results``."""
    from neobench.protocol.tasks import load_benchmark, select_tasks

    stats.check(stats.Settings(resamples, seed, over))
    tasks = select_tasks(load_benchmark(benchmark))
    runs, _, _ = load(results, tasks)
    chosen = dict(find(runs, models))
    ci = any(has_units(m.folder) for run in chosen.values() for m in run.each())
    given = {"models": models, "resamples": resamples, "seed": seed, "over": over}
    given |= {"ci": ci, "baseline": baseline if ci else None}
    table = leaderboard(results, benchmark, reference=reference, **given)
    given["baseline"] = table.baseline  # the label it names, for the zero-shot view's rows
    names = [t.metadata.name for t in tasks]
    settings = stats.Settings(resamples, seed, "items", ALPHA)  # compare's
    sides, refused = _sides(chosen, settings, ci)
    labels = [r.label for r in table.rows]
    views = {"all": _view(table, chosen, names, sides, refused, settings)}
    views["zero_shot"] = _zero_shot_view(
        results, benchmark, chosen, labels, given, (sides, refused, settings)
    )
    return {
        "format": FORMAT,
        "layout": "types",  # the type columns of Table 4 (report/glue_page.py: "tasks")
        "benchmark": table.benchmark,
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "neobench": __version__,
        "settings": {"resamples": resamples, "seed": seed, "over": over, "alpha": ALPHA},
        "intervals": ci,
        "baseline": table.baseline,
        "types": [[t, SHORT.get(t, t), n] for t, n in table.types],
        "tasks": [[t.metadata.name, t.metadata.type] for t in tasks],
        "rows": [_row(r, chosen.get(r.label), names) for r in table.rows],
        "views": views,
        "pair_fields": list(PAIR_FIELDS),
        # A/B's command line: this, then --baseline and --models with the rows' "shell" names
        "compare_command": compare_command(results, benchmark, resamples, seed),
        "notes": table.notes,
        "sources": table.sources,
    }


def compare_command(results: list[str | Path], benchmark: str, resamples: int, seed: int) -> str:
    """`neobench compare` on the page's results (absolute: the command is pasted anywhere),
    benchmark and draws, quoted for a POSIX shell; the page adds ``--baseline A --models B``."""
    argv = ["neobench", "compare"]
    for root in results:
        argv += ["--results", str(Path(root).expanduser().resolve())]
    if benchmark != DEFAULT_BENCHMARK:
        argv += ["--benchmark", benchmark]
    if resamples != RESAMPLES:
        argv += ["--resamples", str(resamples)]
    if seed != BOOTSTRAP_SEED:
        argv += ["--seed", str(seed)]
    return shlex.join(argv)


def _sides(
    chosen: dict[str, Run], settings: stats.Settings, ci: bool
) -> tuple[dict[str, stats.Side], dict[str, str]]:
    """Each computed row's units and draws, drawn once for every pair: compare's side, else the
    table's and the reason compare refuses the run."""
    sides: dict[str, stats.Side] = {}
    refused: dict[str, str] = {}
    for label, run in chosen.items():
        if not ci:
            sides[label] = stats.Side(run, run.scores)
            refused[label] = (
                "none of the results has per-item predictions (evaluated before neobench saved "
                "them, or with --no-predictions), so no paired test can be computed; re-run "
                "the same `neobench eval` to add them."
            )
            continue
        try:
            sides[label] = compare.side(run, label, settings)
        except NeobenchError as error:
            refused[label] = str(error)
            sides[label] = stats.side(run, set(run.scores), settings)
    return sides, refused


def _view(
    table: LeaderTable,
    chosen: dict[str, Run],
    names: list[str],
    sides: dict[str, stats.Side],
    refused: dict[str, str],
    settings: stats.Settings,
) -> dict[str, Any]:
    """One view of the page: its tasks, each row's cells, every pair and the rank groups."""
    computed = [r.label for r in table.rows if r.label in chosen]
    # the sides cut to the view's tasks, as `compare --zero-shot-only` reads them
    kept = {
        label: replace(side, units=_only(side.units, names), draws=_only(side.draws, names))
        for label, side in sides.items()
    }
    pairs = _pairs(chosen, computed, kept, refused, settings)
    index = {label: i for i, label in enumerate(computed)}
    base = index.get(table.baseline) if table.baseline else None
    rows = {}
    for row in table.rows:
        i = index.get(row.label)
        against = pairs.get(f"{base}-{i}") if base is not None and i != base else None
        run = chosen.get(row.label)
        rows[row.label] = _cells(row, table) | {
            "tasks": _task_cells(row, run, kept.get(row.label), names, against, settings)
        }
    found, notes = _ranks({k: kept[k] for k in computed if k not in refused}, names, settings)
    return {
        "types": [[t, SHORT.get(t, t), n] for t, n in table.types],
        "tasks": names,
        "rows": rows,
        "pairs": pairs,
        "computed": computed,
        "ranks": found,
        "notes": notes,
    }


def _only(found: dict[str, Any], names: list[str]) -> dict[str, Any]:
    return {k: v for k, v in found.items() if k in names}


def _pairs(
    chosen: dict[str, Run],
    computed: list[str],
    sides: dict[str, stats.Side],
    refused: dict[str, str],
    settings: stats.Settings,
) -> dict[str, Any]:
    """Every ordered pair "i-j" of ``computed``: compare's rows of j against i, or its refusal."""
    out: dict[str, Any] = {}
    for i, a in enumerate(computed):
        for j, b in enumerate(computed):
            if i == j:
                continue
            problem = refused.get(a) or refused.get(b)
            if problem is None:
                try:
                    out[f"{i}-{j}"] = _pair(compare.compare_runs(chosen, a, [b], settings, sides))
                    continue
                except NeobenchError as error:
                    problem = str(error)
            out[f"{i}-{j}"] = {"refused": problem}
    return out


def _pair(found: compare.Comparison) -> dict[str, Any]:
    return {
        "tasks": [r.task for r in found.rows],
        "rows": [[rounded(getattr(r, f)) for f in PAIR_FIELDS] for r in found.rows],
        "significant": [int(r.significant) for r in found.rows],
        "in_domain": [int(bool(r.in_domain)) for r in found.rows],
        "notes": found.notes,
    }


def _ranks(
    sides: dict[str, stats.Side], names: list[str], settings: stats.Settings
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Each row's rank on Avg. with its 95% interval and letter group, as `table --ranks` gives
    them (report/ranks.py), or why there are none."""
    try:
        ranks.check(len(sides), settings)
    except NeobenchError as error:
        return {}, [f"No ranks: {error}"]
    found = ranks.rank_column(sides, names, AVG, settings)
    return {
        label: {"rank": r.point, "lo": r.low, "hi": r.high, "group": r.group}
        for label, r in found.items()
    }, []


def _cells(row: Row, table: LeaderTable) -> dict[str, Any]:
    cells = {
        t: score_cell(row, t, row.types[t].value, (row.types[t].present, row.types[t].total))
        for t, _ in table.types
    }
    cells[AVG] = score_cell(row, AVG, row.avg, row.avg_of)
    cells[MEAN_TYPES] = score_cell(row, MEAN_TYPES, row.mean_types, None)
    return {
        "cells": cells,
        "zero_shot": row.zero_shot_text(),
        "missing": None if row.quoted else len(row.missing),
    }


def score_cell(row: Row, column: str, value: float | None, of: tuple[int, int] | None) -> dict:
    """A table cell as the page holds it: score, interval, seed sd, mark, dagger, task count."""
    if value is None:
        return {}
    cell: dict[str, Any] = {"v": rounded(value, 4)}
    if column in row.ci:
        cell["lo"], cell["hi"] = (rounded(x, 4) for x in row.ci[column])
    if column in row.sd:
        cell["sd"] = rounded(row.sd[column], 4)
    if column in row.marks:
        cell["m"] = row.marks[column]
    if column in row.in_domain:
        cell["d"] = 1
    if of is not None and of[0] < of[1]:
        cell["of"] = list(of)
    return cell


def _task_cells(
    row: Row,
    run: Run | None,
    side: stats.Side | None,
    names: list[str],
    against: dict[str, Any] | None,
    settings: stats.Settings,
) -> list[dict | None]:
    """Each task of the view: score, interval, seed sd, mark against the baseline, dagger."""
    if run is None:
        return []
    marks = {}
    if against is not None and "refused" not in against:
        for task, values, significant in zip(
            against["tasks"], against["rows"], against["significant"], strict=True
        ):
            if significant:
                marks[task] = MARKS[1 if values[2] > 0 else -1]
    out: list[dict | None] = []
    for task in names:
        if task not in run.scores:
            out.append(None)
            continue
        cell: dict[str, Any] = {"v": rounded(100 * run.scores[task], 4)}
        if side is not None and task in side.draws:
            low, high = stats.interval(side.draws[task], settings.alpha)
            cell["lo"], cell["hi"] = rounded(100 * low, 4), rounded(100 * high, 4)
        if run.replicated:
            cell["sd"] = rounded(100 * seed_sd([[m.scores[task]] for m in run.members]), 4)
        if task in marks:
            cell["m"] = marks[task]
        if task in row.in_domain:
            cell["d"] = 1
        out.append(cell)
    return out


def row_identity(row: Row) -> dict[str, Any]:
    """What the page knows of every row, computed or quoted: label, name, kind, source."""
    return {
        "label": row.label,
        "shell": shlex.quote(row.label),  # as an argument of the A/B command line
        "name": row.name,
        "quoted": row.quoted,
        "finetuned": row.finetuned,
        "source": row.source,
    }


def _row(row: Row, run: Run | None, names: list[str]) -> dict[str, Any]:
    out = row_identity(row)
    if run is None:
        return out
    out["conditions"] = {key: run.conditions.value(key) for key in (RECIPE, *EVAL)}
    out["model"] = run.model
    out["members"] = [_member(m, names) for m in run.each()]
    if run.replicated:
        out["seeds"] = [
            [rounded(100 * m.scores[t], 4) if t in run.scores else None for m in run.members]
            for t in names
        ]
    return out


def _member(run: Run, names: list[str]) -> dict[str, Any]:
    """One evaluated run: seed, revision, folder, and date -> the indices of its tasks."""
    dates: dict[str, list[int]] = {}
    for i, task in enumerate(names):
        if task in run.evaluated:
            dates.setdefault(run.evaluated[task], []).append(i)
    return {
        "seed": run.finetune.seed if run.finetune else None,
        "revision": run.revision,
        "folder": str(run.folder),
        "dates": dates,
    }


def _zero_shot_view(
    results: list[str | Path],
    benchmark: str,
    chosen: dict[str, Run],
    labels: list[str],
    given: dict[str, Any],
    drawn: tuple[dict[str, stats.Side], dict[str, str], stats.Settings],
) -> dict[str, Any]:
    """The view over the tasks no row trained on, among the rows that declare their training
    data, or why there is none."""
    declared = [label for label in labels if label in chosen and chosen[label].training_datasets
                is not None]  # fmt: skip
    left_out = [label for label in chosen if label not in declared]
    if not declared:
        return {"refused": "no row declares its training data, so no task is known zero-shot."}
    baseline = given["baseline"]
    given = given | {"models": declared, "baseline": baseline if baseline in declared else None}
    try:
        table = leaderboard(results, benchmark, zero_shot_only=True, **given)
    except NeobenchError as error:
        return {"refused": str(error)}
    sides, refused, settings = drawn
    runs = {label: chosen[label] for label in declared}
    view = _view(table, runs, table.task_names, sides, refused, settings)
    view["notes"] += [n for n in table.notes if n.startswith("--zero-shot-only")]
    if left_out:
        view["notes"].append(
            f"Left out of this view: {', '.join(left_out)} (training data not declared, so its "
            "zero-shot tasks are unknown)."
        )
    return view


def rounded(value: float | None, digits: int = DIGITS) -> float | None:
    return None if value is None else round(float(value), digits)
