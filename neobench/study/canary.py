"""A canary before a large submission: one short job per model and kind (fine-tune, eval, GLUE
run), run like the real ones, so a fault every job shares costs minutes, not the whole study
(what it runs, when, and the remembered pass OUTPUT/canary/passed.json: docs/studies.md,
"Launchers", "The canary").
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from neobench.core.card_io import now, write_text_atomic
from neobench.core.errors import RunFailed
from neobench.study import launchers, store
from neobench.study.jobs import job_log
from neobench.study.kinds import JobKind
from neobench.study.plan import Job, Plan
from neobench.study.spec import CANARY_GPU_HOURS

CANARY_STEPS = 2
FOLDER = "canary"
PASSED = "passed.json"


def wanted(plan: Plan, launcher: str, asked: bool, refused: bool) -> bool:
    """--canary, or by default a Slurm study over CANARY_GPU_HOURS; never with --no-canary."""
    if refused:
        return False
    if asked:
        return True
    hours = plan.gpu_hours(plan.pending) or 0.0
    return launcher == "slurm" and hours > CANARY_GPU_HOURS and not _passed_before(plan)


def canary_plan(plan: Plan, small_task: str) -> Plan:
    """The canary jobs of the models that still have jobs to run: per model its first pending
    fine-tune, cut to CANARY_STEPS steps (one checkpoint each step), and an eval of
    ``small_task`` by that model (the canary fine-tune's output when the study fine-tunes)."""
    root = plan.study.output / FOLDER
    jobs: list[Job] = []
    for model in dict.fromkeys(j.model for j in plan.pending if j.model):
        tuned = next(
            (j for j in plan.pending if j.kind is JobKind.FINETUNE and j.model == model), None
        )
        first_eval = next(
            (j for j in plan.jobs if j.kind is JobKind.EVAL and j.model == model), None
        )
        source = None
        if tuned is not None:
            job = _finetune(plan, tuned, root)
            jobs.append(job)
            source = str(job.output)
        if first_eval is not None:
            jobs.append(_eval(plan, first_eval, root, small_task, source, jobs))
        glue = next((j for j in plan.pending if j.kind is JobKind.GLUE and j.model == model), None)
        if glue is not None:
            jobs.append(_glue(plan, glue, root))
    return Plan(plan.study, plan.models, jobs, tasks=plan.tasks)


# A canary GLUE run: its first pending run on this many training rows, one epoch, short texts.
CANARY_GLUE = ("train_rows=32", "epochs=1", "max_seq_length=64", "heldout_max_rows=32")


def _glue(plan: Plan, real: Job, root: Path) -> Job:
    argv = _replace(real.argv, "--output", str(root))
    argv += [f"--set={value}" for value in CANARY_GLUE]
    key = f"canary/{real.key}"
    job = Job(JobKind.GLUE, key, argv, root, job_log(plan.study, key), real.resources)
    job.model, job.seed, job.tasks, job.point = real.model, real.seed, real.tasks, real.point
    job.model_name, job.source = real.model_name, real.source
    return job


def _finetune(plan: Plan, real: Job, root: Path) -> Job:
    folder = root / "finetune" / real.key.split("/", 1)[1]
    argv = _replace(real.argv, "--output", str(folder))
    argv = [a for a in argv if a != "--resume"]
    argv += [f"max_steps={CANARY_STEPS}", "checkpoint_every=1", "keep_checkpoints=false"]
    key = f"canary/{real.key}"
    log = job_log(plan.study, key)
    return Job(JobKind.FINETUNE, key, argv, folder, log, real.resources, model=real.model)


def _eval(
    plan: Plan, real: Job, root: Path, task: str, source: str | None, before: list[Job]
) -> Job:
    # --sweep: the canary's own fine-tune is none of a sweep's points
    argv = _drop(real.argv, "--tasks", "--types", "--shard", "--sweep")
    argv = _replace(argv, "--results", str(root))
    if source is not None:
        argv = _replace(argv, "--model", source)
    argv += ["--tasks", task]
    key = f"canary/eval/{real.model}"
    log = job_log(plan.study, key)
    job = Job(JobKind.EVAL, key, argv, root, log, real.resources, model=real.model)
    job.tasks = [task]
    job.model_name, job.source = real.model_name, source or real.source
    job.after = [j.key for j in before if j.kind is JobKind.FINETUNE and j.model == real.model]
    return job


def _replace(argv: list[str], flag: str, value: str) -> list[str]:
    out = list(argv)
    out[out.index(flag) + 1] = value
    return out


def _drop(argv: list[str], *flags: str) -> list[str]:
    """``argv`` without each flag and its value."""
    gone = {i + k for i, a in enumerate(argv) if a in flags for k in (0, 1)}
    return [a for i, a in enumerate(argv) if i not in gone]


def smallest_task(plan: Plan) -> str:
    """The study's cheapest task to evaluate (mteb's recorded size); "" for a study without
    an eval section (its canary has no eval)."""
    from neobench.protocol.tasks import task_cost

    if not plan.tasks:
        return ""
    return min(plan.tasks.values(), key=lambda t: (task_cost(t), t.metadata.name)).metadata.name


def run(plan: Plan, launcher: str, tell: Callable[..., None]) -> None:
    """Run the canary through ``launcher``; RunFailed (naming the logs) when one job failed,
    before any real job is submitted."""
    task = smallest_task(plan)
    canary = canary_plan(plan, task)
    if not canary.jobs:
        return
    shutil.rmtree(plan.study.output / FOLDER, ignore_errors=True)  # a fresh start every time
    for job in canary.jobs:
        store.record_path(canary, job).unlink(missing_ok=True)
    tell(f"canary: {len(canary.jobs)} short job(s) first, like the real ones", markup=False)
    started = time.monotonic()
    module = launchers.launcher(launcher)
    if launcher == "local":
        with contextlib.suppress(RunFailed):  # the first failure stops it: outputs say which
            module.run_local(canary, launchers.progress(tell))
    else:
        module.submit(canary, launchers.progress(tell))
        module.wait_held(canary, canary.jobs)
    seconds = time.monotonic() - started
    failed = [job for job in canary.jobs if not passed(canary, job)]
    lines = [_cost(canary, job) for job in canary.jobs]
    for line in lines:
        tell(f"canary: {line}", markup=False)
    if failed:
        logs = "; ".join(f"{j.key}: {j.log}" for j in failed)
        raise RunFailed(
            f"the canary failed ({logs}): nothing of the study was submitted. Fix the cause "
            f"(its log says it), then run again; the canary runs first again."
        )
    hours = sum(_gpu_seconds(j) for j in canary.jobs) / 3600
    tell(
        f"canary: passed in {seconds:.0f} s ({hours:.2f} GPU-hours); now the study's jobs",
        markup=False,
    )
    body = {"passed": now(), "task": task, "signature": _signature(canary), "jobs": lines}
    write_text_atomic(plan.study.output / FOLDER / PASSED, json.dumps(body, indent=1) + "\n")


def passed(canary: Plan, job: Job) -> bool:
    """A canary fine-tune that finished; a canary eval whose task result is complete (the rules
    a study's jobs are marked done by)."""
    return job.kind.complete(job, canary.tasks)


def _cost(canary: Plan, job: Job) -> str:
    seconds = _wall_seconds(job)
    took = f"{seconds:.0f} s" if seconds is not None else "time unknown"
    result = "passed" if passed(canary, job) else f"FAILED (log: {job.log})"
    return f"{job.key.removeprefix('canary/')}: {result}, {took}"


def _wall_seconds(job: Job) -> float | None:
    """From the log's first line ('# <UTC time> ...', written when the job started) to its
    last write."""
    try:
        first = job.log.read_text().split("\n", 1)[0]
        started = datetime.fromisoformat(first.split()[1].replace("Z", "+00:00"))
    except (OSError, IndexError, ValueError):
        return None
    return max(job.log.stat().st_mtime - started.timestamp(), 0.0)


def _gpu_seconds(job: Job) -> float:
    return (job.resources.gpus if job.resources else 0) * (_wall_seconds(job) or 0.0)


def _signature(canary: Plan) -> str:
    """What the canary jobs run and ask for: a study whose jobs changed runs its canary again."""
    settings = canary.study.slurm
    parts = [[j.argv, j.resources and j.resources.text()] for j in canary.jobs]
    extra = [settings.setup, settings.sbatch] if settings else []
    text = json.dumps([parts, extra], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _passed_before(plan: Plan) -> bool:
    """A canary of these very jobs passed before (a study run again after a fault)."""
    try:
        body = json.loads((plan.study.output / FOLDER / PASSED).read_text())
        task = str(body["task"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return body.get("signature") == _signature(canary_plan(plan, task))
