"""The Slurm launcher: the same pending jobs as the local launcher, submitted through submitit.

Nothing here schedules: each job becomes one Slurm job (the eval shards of one model one job
array), waiting for the jobs it depends on with `afterok`, so Slurm runs them in order and never
starts an eval whose fine-tune failed (`kill-on-invalid-dep` removes it from the queue instead).
A job still queued or running from an earlier `run` is not submitted twice: its id becomes the
dependency of what follows it. Each job's output goes to the same log as with the local
launcher (OUTPUT/logs/<job>.log); submitit's own files go to OUTPUT/slurm/. Each job writes
its own embedding cache (OUTPUT/cache/<job>/) and reads, never writes, those of the jobs that
had finished when it was submitted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from itertools import groupby
from pathlib import Path
from typing import Any

from neobench.core.card_io import now
from neobench.core.errors import NeobenchError, RunFailed
from neobench.encoder.cache import CACHE_ENV, CACHE_FILE, READ_ENV
from neobench.study import store
from neobench.study.launchers import progress, slurm_end, slurm_fit
from neobench.study.launchers.slurm_job import JobCommand
from neobench.study.models import build
from neobench.study.plan import TABLE_FILE, Job, Plan, replan
from neobench.study.spec import Resources, Slurm, parse_minutes

logger = logging.getLogger(__name__)

NAME = "slurm"
TITLE = "Slurm"
CANCEL = "scancel"

# Slurm job states that mean "not ended yet" (squeue lists ended jobs only briefly).
LIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "SUSPENDED", "RESIZING"}


def run(plan: Plan, tell: Callable[..., None], *, file: str, wait: bool = False) -> None:
    """Submit the pending jobs; with ``wait``, block until they have ended (RunFailed if
    one did not finish)."""
    submitted = submit(plan, progress(tell))
    tell(f"{len(submitted)} job(s) submitted; `neobench study status {file}` follows them.")
    if plan.waiting and not wait:
        tell(
            f"{', '.join(plan.waiting)}: the sweep selects once its fine-tunes have ended; then "
            f"run `neobench study run {file} --launcher slurm` again to submit the evals and the "
            "table (with --wait this run does it)."
        )
    while wait:
        failed = wait_until_ended(plan, plan.pending)
        if failed:
            raise failed_message(plan, failed)
        # A sweep's selection plans new jobs once its fine-tunes are done: submit those too.
        plan = replan(plan)
        if not plan.pending:
            tell(f"[green]done[/]: every job ended; table: {plan.study.output / TABLE_FILE}")
            return
        submitted = submit(plan, progress(tell))
        tell(f"{len(submitted)} more job(s) submitted (the sweep's selected point).")


def queue() -> dict[str, str]:
    """Job id -> state of every job squeue lists (array elements one by one, as ID_K)."""
    done = _slurm_command(["squeue", "-h", "-r", "-o", "%i %T"])
    pairs = (line.split() for line in done.splitlines() if line.strip())
    return {p[0]: p[1] for p in pairs if len(p) == 2}


# How to point Slurm's commands at a cluster, said whenever none answers.
POINT = (
    "Point at a cluster: on its login node SLURM_CONF is usually set for you; elsewhere "
    "`export SLURM_CONF=/path/to/slurm.conf`. For the one-node cluster of this repository: "
    '`eval "$(scripts/slurm-local.sh start)"` (and `scripts/slurm-local.sh stop` afterwards). '
    "Or run the study here with --launcher local."
)
# What Slurm's commands print when they reach no configuration or no controller.
UNREACHABLE = (
    "configuration source",
    "DNS SRV lookup failed",
    "Unable to process configuration file",
    "Unable to contact slurm controller",
    "Connection refused",
    "Socket timed out",
)


def _slurm_command(argv: list[str]) -> str:
    conf = os.environ.get("SLURM_CONF")
    if conf and not Path(conf).is_file():  # Slurm's commands would retry it for a minute
        raise NeobenchError(f"--launcher slurm: SLURM_CONF={conf} is not a file. {POINT}")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise NeobenchError(
            f"--launcher slurm: `{argv[0]}` is not installed here. Run on a Slurm login node, "
            "or use --launcher local."
        ) from None
    except subprocess.TimeoutExpired:
        raise NeobenchError(
            f"--launcher slurm: `{shlex.join(argv)}` had no answer in 60 s. {POINT}"
        ) from None
    if done.returncode:
        said = done.stderr.strip()
        if any(marker in said for marker in UNREACHABLE):
            first = said.splitlines()[-1] if said else "no output"
            raise NeobenchError(
                f"--launcher slurm: no Slurm cluster answers here (`{argv[0]}`: {first}). {POINT}"
            )
        raise NeobenchError(f"--launcher slurm: `{shlex.join(argv)}` failed: {said}")
    return done.stdout


def check_partition(settings: Slurm | None) -> None:
    """Before any submission: a study without a partition needs a cluster default one."""
    if settings is not None and settings.partition:
        return
    listed = _slurm_command(["sinfo", "-h", "-o", "%P"]).split()
    if not any(p.endswith("*") for p in listed):
        raise NeobenchError(
            "slurm.partition: the study names no partition and this cluster has no default "
            f"one (sinfo lists: {', '.join(sorted(set(listed))) or 'none'}). Add `partition:` "
            "to the study's slurm section."
        )


def job_state(rec: store.JobRecord, listed: dict[str, str]) -> str:
    """queued | running for a submitted job Slurm still holds; failed once it has ended (the
    job is not done: it ended without its output)."""
    return slurm_state(rec, listed) or "failed"


def slurm_state(rec: store.JobRecord, listed: dict[str, str]) -> str | None:
    """queued | running for a submitted job Slurm still holds; None once it has ended."""
    found = listed.get(str(rec.launcher_job_id))
    if found is None or found not in LIVE:
        return None
    return "running" if found in {"RUNNING", "COMPLETING"} else "queued"


def why(plan: Plan, job: Job, rec: store.JobRecord) -> str:
    """How Slurm ended a job that has no output, and the line that says why (slurm_end); a
    fine-tune card it left marked running says interrupted."""
    said = slurm_end.why(plan, job, rec, _slurm_command)
    store.close_card(job, f"Slurm job {rec.launcher_job_id}: {said}")
    return said


def submit(plan: Plan, on_job: Callable[[Job, str], None] | None = None) -> list[Job]:
    """Submit every pending job that Slurm does not already hold; the jobs submitted."""
    import submitit

    check_partition(plan.study.slurm)
    slurm_fit.check(plan, _slurm_command)  # what each job asks for, against what sinfo offers
    for model in plan.models:
        build(model)  # on the shared file system, before any job needs it
    plan.save()  # the sweeps' choices, which the eval jobs name
    report = on_job or (lambda job, what: None)
    listed = queue()
    ids: dict[str, str] = {}  # job key -> Slurm id, for the jobs that are queued or running
    submitted: list[Job] = []
    pending = [j for j in plan.pending if not _held(plan, j, listed, ids)]
    finished = finished_caches(plan, listed)
    for _, group in groupby(pending, key=lambda j: (j.kind, tuple(j.after))):
        jobs = list(group)
        executor = submitit.SlurmExecutor(folder=plan.study.output / "slurm" / "%j")
        executor.update_parameters(**_parameters(plan, jobs[0], ids))
        # One array for several jobs of a kind with the same dependencies (a model's shards).
        handles = _submitted(plan, executor, jobs, finished, submitted)
        for job, handle in zip(jobs, handles, strict=True):
            ids[job.key] = str(handle.job_id)
            _record(plan, job, str(handle.job_id))
            report(job, f"submitted as Slurm job {handle.job_id}")
            submitted.append(job)
    return submitted


def _submitted(
    plan: Plan, executor: Any, jobs: list[Job], finished: list[Path], before: list[Job]
) -> list[Any]:
    """The jobs of one group submitted (one array for several); sbatch's refusal or submitit's
    failure is one message naming the jobs, the cause and what was already submitted."""
    try:
        # One array for several jobs of a kind with the same dependencies (a model's shards).
        with executor.batch() if len(jobs) > 1 else contextlib.nullcontext():
            return [executor.submit(_command(plan, job, finished)) for job in jobs]
    except Exception as error:  # submitit's FailedJobError, sbatch's stderr, an OSError
        cause = " ".join(str(error).split())[:600] or type(error).__name__
        done = f"; already submitted: {', '.join(j.key for j in before)}" if before else ""
        raise NeobenchError(
            f"{', '.join(j.key for j in jobs)}: Slurm refused the submission ({cause}){done}. "
            "Fix the study's slurm section (or the cluster), then run again: submitted jobs "
            "are not submitted twice."
        ) from None


def _held(plan: Plan, job: Job, listed: dict[str, str], ids: dict[str, str]) -> bool:
    """Whether an earlier `run` submitted ``job`` and Slurm still holds it."""
    rec = store.read_record(plan, job)
    if rec is None or rec.launcher != NAME or slurm_state(rec, listed) is None:
        return False
    ids[job.key] = str(rec.launcher_job_id)
    return True


def _parameters(plan: Plan, job: Job, ids: dict[str, str]) -> dict[str, Any]:
    settings = plan.study.slurm or Slurm()
    res = job.resources or getattr(settings, job.kind, Resources())
    extra: dict[str, Any] = {"requeue": True, "kill_on_invalid_dep": "yes"}
    extra |= dict(_sbatch_flag(line) for line in settings.sbatch)
    waits = [ids[k] for k in job.after if k in ids]
    params: dict[str, Any] = {
        "job_name": f"{plan.study.name}-{job.kind}",
        "time": parse_minutes(res.time),
        # SIGUSR2 this long before the limit: the job checkpoints and requeues (slurm_job.py)
        "signal_delay_s": settings.signal_s,
        "cpus_per_task": res.cpus,
        "mem": res.mem,
        "setup": list(settings.setup),
        "additional_parameters": extra,
    }
    if waits:
        params["dependency"] = "afterok:" + ":".join(waits)
    if res.gpus:
        params["gpus_per_node"] = res.gpus
    for key in ("partition", "account", "qos", "constraint"):
        if getattr(settings, key):
            params[key] = getattr(settings, key)
    return params


def _sbatch_flag(line: str) -> tuple[str, Any]:
    """'--exclusive' -> (exclusive, True); '--exclude=n1' or '--exclude n1' -> (exclude, n1)."""
    text = line.strip().removeprefix("#SBATCH").strip().lstrip("-")
    key, _, value = text.replace(" ", "=", 1).partition("=")
    return key.replace("-", "_"), value or True


def job_cache(plan: Plan, job: Job) -> Path:
    """The folder of the embedding cache that ``job`` writes."""
    return plan.study.output / "cache" / job.key.replace("/", "-")


def finished_caches(plan: Plan, listed: dict[str, str]) -> list[Path]:
    """The cache files of the jobs that are done and that Slurm no longer holds: their writers
    have closed them, so other jobs may read them as immutable files."""
    caches = []
    for job in plan.jobs:
        rec = store.read_record(plan, job)
        live = rec is not None and rec.launcher == NAME and slurm_state(rec, listed) is not None
        file = job_cache(plan, job) / CACHE_FILE
        # A -wal left beside it means its writer was killed before folding the WAL in.
        if job.done and not live and file.is_file() and not Path(f"{file}-wal").exists():
            caches.append(file)
    return caches


def _command(plan: Plan, job: Job, finished: list[Path]) -> JobCommand:
    """The job's `neobench` command, its output in the job's log. A fine-tune with several GPUs
    runs under torchrun (one process per GPU). Each job writes an embedding cache of its own:
    SQLite's write-ahead log needs one host, and jobs on several nodes share this folder. It
    reads the ``finished`` jobs' caches on a miss, read-only. Near its time limit the job
    checkpoints and requeues itself (JobCommand)."""
    job.log.parent.mkdir(parents=True, exist_ok=True)
    python = [sys.executable, "-m"]
    gpus = job.resources.gpus if job.resources else 0
    if job.kind == "finetune" and gpus > 1:
        # torchrun that survives Slurm's notice and says one line on a stop (train/torchrun.py)
        python += ["neobench.train.torchrun", "--standalone", f"--nproc_per_node={gpus}", "-m"]
    command = shlex.join([*python, "neobench", *job.argv])
    log = shlex.quote(str(job.log))
    cache = job_cache(plan, job)
    script = f"export {CACHE_ENV}={shlex.quote(str(cache))}; "
    others = os.pathsep.join(str(p) for p in finished if p.parent != cache)
    script += f"export {READ_ENV}={shlex.quote(others)}; "
    if job.kind == "finetune":
        # Requeued after preemption: continue from the checkpoint the first attempt left.
        saved = shlex.quote(str(job.output / "checkpoints"))
        script += f"if compgen -G {saved}/'checkpoint-*' > /dev/null; then set -- --resume; fi; "
    script += f'echo "# $(date -u +%FT%TZ) Slurm job $SLURM_JOB_ID" >> {log}; '
    script += f'exec {command} "$@" >> {log} 2>&1'
    # bash -c SCRIPT NAME: the name is $0, so "$@" starts empty.
    argv = ["bash", "-c", script, "neobench-job"]
    runs = JobCommand(argv, str(Path.cwd()), job.key, job.kind, str(job.output), job.tasks)
    if job.kind == "eval":
        runs.model_name, runs.model = job.model_name, job.source
        runs.benchmark = plan.study.eval.benchmark
    return runs


def _record(plan: Plan, job: Job, slurm_id: str) -> None:
    rec = store.JobRecord(job.key, "queued", str(job.log), launcher=NAME, started=now())
    rec.launcher_job_id = slurm_id
    store.write_record(plan, job, rec)


def wait_until_ended(plan: Plan, jobs: list[Job], poll_s: float = 5.0) -> list[Job]:
    """Block until Slurm holds none of ``jobs``; the ones that failed (their output is not
    complete), after re-reading the plan's outputs."""
    while True:
        listed = queue()
        live = [j for j in jobs if _still_held(plan, j, listed)]
        if not live:
            break
        time.sleep(poll_s)
    fresh = replan(plan)
    return [fresh.job(j.key) for j in jobs if not fresh.job(j.key).done]


def _still_held(plan: Plan, job: Job, listed: dict[str, str]) -> bool:
    rec = store.read_record(plan, job)
    return rec is not None and slurm_state(rec, listed) is not None


def failed_message(plan: Plan, failed: list[Job]) -> RunFailed:
    logs = "; ".join(f"{j.key}: {j.log}" for j in failed)
    return RunFailed(
        f"{len(failed)} Slurm job(s) did not finish ({logs}). Fix the cause, then run "
        f"`neobench study run {plan.study.file} --launcher slurm` again: it submits only "
        "what is missing."
    )
