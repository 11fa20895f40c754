"""`neobench table`: the runs of every results root on one benchmark's tasks, as a LeaderTable
with its notes, overlap marks, seed-replicate rows, intervals and marks against a baseline."""

from __future__ import annotations

import logging
from pathlib import Path

from neobench.core.errors import NeobenchError
from neobench.core.runs import Run, find
from neobench.protocol.config import BOOTSTRAP_SEED, RESAMPLES
from neobench.report import overlap as overlap_marks
from neobench.report import replicates, stats
from neobench.report.columns import AVG
from neobench.report.load import load, load_zero_shot
from neobench.report.table import LeaderTable, build_table

logger = logging.getLogger(__name__)


def leaderboard(
    results: list[str | Path],
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
    zero_shot_only: bool = False,
    ranks: bool = False,
    per_type: bool = False,
) -> LeaderTable:
    """The table of the runs under ``results`` (unreadable files skipped, with a note); ``ci``
    adds intervals, ``baseline`` marks against that row, ``ranks`` each row's rank on Avg. (and
    on each type with ``per_type``) with its interval and group, ``zero_shot_only`` keeps the
    tasks no row trained on."""
    from neobench.protocol.tasks import load_benchmark, select_tasks

    settings = stats.Settings(resamples, seed, over)
    if per_type and not ranks:
        raise NeobenchError("--per-type ranks the rows on each task type: give it with --ranks.")
    if per_type and per_task:
        raise NeobenchError(
            "--per-type with --per-task: the type columns it ranks are not shown per task. "
            "Leave out one of the two (--ranks alone ranks Avg.)."
        )
    if ci or baseline or ranks:
        stats.check(settings)  # before anything is read
    bench = load_benchmark(benchmark)
    tasks = select_tasks(bench)
    runs, problems, merged = load(results, tasks)  # the seeds of one fine-tune: one row
    note = None
    if zero_shot_only:
        if reference is not None:
            raise NeobenchError(
                f"--zero-shot-only with --reference {reference}: the quoted rows are averages "
                "over all the benchmark's tasks and cannot be recomputed over a subset. Leave out "
                "--reference."
            )
        found = dict(find(runs, models))
        tasks, (runs, problems, merged), note = load_zero_shot(results, tasks, found)
    for problem in problems:
        logger.warning("skipped: %s", problem)
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
    if note is not None:
        table.notes.append(note)
    selected = dict(find(runs, models))
    overlap_marks.annotate_table(table, selected, tasks)
    table.notes += merged
    table.notes += [sweep_note(label, run) for label, run in selected.items() if run.sweep]
    replicates.annotate(table, selected, tasks, ci=ci)
    if ci or baseline or ranks:
        from neobench.report import intervals

        ranked = [*(t for t, _ in table.types if per_type), AVG] if ranks else []
        intervals.annotate(
            table, selected, tasks, settings, ci=ci, baseline=baseline, ranked=ranked
        )
    return table


def sweep_note(label: str, run: Run) -> str:
    """What a sweep chose for a row and on what: never an MTEB task."""
    sweep = run.sweep or {}
    grid = "; ".join(
        f"{k} in {', '.join(map(str, v))}" for k, v in (sweep.get("grid") or {}).items()
    )
    seeds = int(sweep.get("dev_seeds") or 1)
    mean = float(sweep.get("dev_mean", float("nan")))
    return (
        f"{label}: {sweep.get('point')} selected by a sweep ({grid}; "
        f"sweep:{str(sweep.get('sha256'))[:12]}) on the {sweep.get('metric')} of the training "
        f"datasets' held-out slice (mean {mean:.4f} over {seeds} seed(s)); no evaluation task "
        "was read to choose."
    )
