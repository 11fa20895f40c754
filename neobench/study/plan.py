"""A study -> its jobs, in order: finetune(model, seed) -> eval(model, shard k/N) -> table, then
glue(model, task, point, seed) -> table/glue. List order respects every dependency; what is done
is read from what the commands write (jobs.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from neobench.core import results
from neobench.core.errors import NeobenchError, collect, unknown
from neobench.protocol.glue import POINT_CARD
from neobench.study import conflicts
from neobench.study.jobs import (  # Job and Plan: the launchers and the CLI name them from here
    TABLE_KEY,
    Job,
    Plan,
    add_evals,
    finetune_job,
    glue_grid,
    glue_jobs,
    job_log,
)
from neobench.study.kinds import JobKind
from neobench.study.models import ResolvedModel, resolve_models
from neobench.study.spec import Study, parse_study
from neobench.study.sweep_plan import plan_sweep

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

TABLE_FILE = "table.md"
GLUE_TABLE_FILE = "glue-table.md"  # `table --glue` of the study's GLUE runs
PAGE_FILE = "table.html"  # the leaderboard page, beside the table
GLUE_PAGE = "glue-table.html"  # the GLUE table's page, beside it


def prepare(
    path: str | Path, output: str | None = None
) -> tuple[Study, list[ResolvedModel], list[AbsTask]]:
    """The study, its models and its benchmark tasks; every problem of the file at once."""
    study, problems = parse_study(path, output)
    models = resolve_models(study, problems)
    if study.finetune is not None:
        conflicts.recipe_problems(study.finetune, problems)
    if study.finetune is not None and study.finetune.sweep:
        from neobench.study.sweep import sweep_problems

        tune = study.finetune
        problems += sweep_problems(tune.recipe, tune.overrides, tune.sweep)
    tasks = conflicts.eval_problems(study.eval, problems) if study.eval else []
    glue_grid(study, problems)
    names = {m.name for m in models}
    if study.baseline is not None and models and study.baseline not in names:
        hint = "It names one of the study's models."
        problems.append("baseline: " + unknown("model", study.baseline, names, hint))
    if problems:
        raise NeobenchError([f"study {path}: {p}" for p in problems])
    return study, models, tasks or []


def build_plan(path: str | Path, output: str | None = None) -> Plan:
    """Every job of the study, with what is already done; refuses changed conditions."""
    study, models, tasks = prepare(path, output)
    plan = Plan(study, models, [], tasks={t.metadata.name: t for t in tasks})
    problems: list[str] = []
    if study.eval is not None:
        _add_mteb(plan, tasks, problems)
    if problems:
        raise NeobenchError(list(dict.fromkeys(problems)))  # each shard names the same card
    if study.glue is not None:
        points, _ = glue_grid(study, problems)
        runs = [job for model in models for job in glue_jobs(study, model, points)]
        plan.jobs += [*runs, _glue_table_job(study, runs)]
    return plan


def _add_mteb(plan: Plan, tasks: list[AbsTask], problems: list[str]) -> None:
    """The fine-tunes, the eval shards and the table of the study's MTEB evaluation."""
    from neobench.protocol.tasks import shard

    study, models = plan.study, plan.models
    assert study.eval is not None
    n = study.eval.shards
    shards = [(k, [t.metadata.name for t in shard(tasks, k, n)]) for k in range(1, n + 1)]
    if any(not names for _, names in shards):
        plan.notes.append(f"{n} shards for {len(tasks)} task(s): the empty shards are left out.")
    found = conflicts.EvalCards.scan(study.output)
    for model in models:
        if study.finetune is not None and study.finetune.sweep:
            collect(problems, plan_sweep, plan, model, shards, found, problems)
            continue
        for seed in study.finetune.seeds if study.finetune else [None]:
            tuned = finetune_job(study, model, seed, problems) if seed is not None else None
            plan.jobs += [tuned] if tuned else []
            add_evals(plan, model, seed, tuned, shards, found, problems)
    if not plan.waiting and not problems:  # the table waits for every row, a sweep's too
        plan.jobs.append(_table_job(study, plan.jobs))


def replan(plan: Plan) -> Plan:
    """The study's plan read again from what its jobs have written since ``plan``."""
    return build_plan(plan.study.file, str(plan.study.output))


def table_inputs(study: Study, jobs: list[Job]) -> dict[str, Any]:
    """The arguments of report.leaderboard.leaderboard for the study's table (and its job)."""
    assert study.eval is not None  # a study without eval has no MTEB table
    baseline = None
    if study.baseline:
        first = next(j for j in jobs if j.kind is JobKind.EVAL and j.model == study.baseline)
        baseline = first.model_name
    return {
        "results": [str(study.output)],
        "benchmark": study.eval.benchmark,
        "reference": study.reference,
        "baseline": baseline,
    }


def glue_table_inputs(study: Study, jobs: list[Job]) -> dict[str, Any]:
    """The keywords of `table --glue` for the study's GLUE table (and its job): the results
    root, the reference, the baseline's row name."""
    baseline = None
    if study.baseline:
        glue = (j for j in jobs if j.kind is JobKind.GLUE and j.model == study.baseline)
        baseline = next(glue).model_name
    return {"results": [str(study.output)], "reference": study.reference, "baseline": baseline}


def _glue_table_job(study: Study, runs: list[Job]) -> Job:
    """`table --glue` of the study's GLUE runs, after every one of them."""
    out = study.output / GLUE_TABLE_FILE
    given = glue_table_inputs(study, runs)
    argv = ["table", "--glue", "--results", str(study.output), "--out", str(out), "--ci"]
    argv += ["--html", str(out.with_name(GLUE_PAGE))]
    for flag in ("reference", "baseline"):
        argv += [f"--{flag}", given[flag]] if given[flag] else []
    kind = JobKind.TABLE
    log = job_log(study, "table-glue")
    job = Job(kind, "table/glue", argv, out, log, kind.resources(study.slurm))
    job.after = [j.key for j in runs]
    cards = list((study.output / "glue").rglob(POINT_CARD))
    newest = max((p.stat().st_mtime for p in cards), default=0.0)
    job.done = all(j.done for j in runs) and out.is_file() and out.stat().st_mtime >= newest
    return job


def _table_job(study: Study, jobs: list[Job]) -> Job:
    out = study.output / TABLE_FILE
    given = table_inputs(study, jobs)
    argv = ["table", "--results", str(study.output), "--benchmark", study.eval.benchmark]
    argv += ["--out", str(out), "--html", str(out.with_name(PAGE_FILE)), "--ci"]
    for flag in ("reference", "baseline"):
        argv += [f"--{flag}", given[flag]] if given[flag] else []
    kind = JobKind.TABLE
    job = Job(kind, TABLE_KEY, argv, out, job_log(study, TABLE_KEY), kind.resources(study.slurm))
    job.after = [j.key for j in jobs if j.kind is JobKind.EVAL]
    # Done: every job done, and no task result written after the table.
    done = all(j.done for j in jobs) and out.is_file()
    job.done = done and out.stat().st_mtime >= results.last_write(study.output)
    return job
