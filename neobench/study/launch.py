"""The local launcher: a study's pending jobs one after another, as `neobench` subprocesses.

Each job writes its output to OUTPUT/logs/<key>.log and a small record OUTPUT/jobs/<key>.json
(running / failed / done, exit code, pid, log), which `neobench study status` reads. The first
failure stops the run: later jobs may depend on it, and the next `run` starts again from the
jobs that are still not done.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from neobench.core.card_io import now, write_text_atomic
from neobench.core.errors import NeobenchError, RunFailed
from neobench.study.models import build
from neobench.study.plan import Job, Plan

logger = logging.getLogger(__name__)

RECORDS = "jobs"


@dataclass
class JobRecord:
    key: str
    state: str  # running | failed | done
    log: str
    launcher: str = "local"
    started: str | None = None
    ended: str | None = None
    returncode: int | None = None
    host: str | None = None
    pid: int | None = None
    slurm_job_id: str | None = None


def record_path(plan: Plan, job: Job) -> Path:
    return plan.study.output / RECORDS / (job.key.replace("/", "-") + ".json")


def read_record(plan: Plan, job: Job) -> JobRecord | None:
    path = record_path(plan, job)
    try:
        return JobRecord(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None  # never launched (or a record from elsewhere): the job is simply pending


def write_record(plan: Plan, job: Job, rec: JobRecord) -> None:
    write_text_atomic(record_path(plan, job), json.dumps(asdict(rec), indent=1) + "\n")


def state(plan: Plan, job: Job, listed: dict[str, str] | None = None) -> str:
    """done | running | queued | failed | pending, from the outputs first and the job record
    second (a job recorded done whose results were deleted since is pending again). A Slurm
    job's state comes from ``listed`` (slurm.queue(), read once by the caller)."""
    if job.done:
        return "done"
    rec = read_record(plan, job)
    if rec is None or rec.state == "done":
        return "pending"
    if rec.launcher == "slurm":
        from neobench.study.slurm import slurm_state

        return slurm_state(rec, listed or {}) or "failed"  # ended without its output
    if rec.state == "running" and not _alive(rec):
        return "failed"  # its process is gone without saying how it ended
    return rec.state


def _alive(rec: JobRecord) -> bool:
    if rec.launcher != "local" or rec.host != socket.gethostname() or rec.pid is None:
        return True  # cannot be checked from here
    try:
        os.kill(rec.pid, 0)  # signal 0: an existence check
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_local(plan: Plan, on_job: Callable[[Job, str], None] | None = None) -> list[Job]:
    """Run every pending job in order; the jobs run. Stops at the first failure (RunFailed
    naming its log). ``on_job(job, "started" | "done")`` reports progress."""
    report = on_job or (lambda job, what: None)
    _refuse_jobs_on_slurm(plan)
    for model in plan.models:
        if build(model):
            logger.info("built the model %s in %s", model.name, model.path)
    ran = []
    for job in plan.pending:
        report(job, "started")
        returncode = run_job(plan, job)
        ran.append(job)
        if returncode != 0:
            raise RunFailed(
                f"job {job.key} failed (exit code {returncode}); its log: {job.log}. Fix the "
                f"cause, then run `neobench study run {plan.study.file}` again: finished jobs "
                "are skipped."
            )
        report(job, "done")
    return ran


def _refuse_jobs_on_slurm(plan: Plan) -> None:
    """A job an earlier `--launcher slurm` submitted and Slurm still holds must not also run
    here: two processes would write one output."""
    submitted = [j for j in plan.pending if (r := read_record(plan, j)) and r.launcher == "slurm"]
    if not submitted:
        return
    from neobench.study.slurm import queue

    listed = queue()
    held = [j.key for j in submitted if state(plan, j, listed) in ("queued", "running")]
    if held:
        raise NeobenchError(
            f"{', '.join(held)}: submitted to Slurm and not ended yet. Wait for them "
            f"(neobench study status {plan.study.file}) or scancel them, then run locally."
        )


def run_job(plan: Plan, job: Job) -> int:
    """One job as `python -m neobench ARGV`, its output in its log; the exit code."""
    job.log.parent.mkdir(parents=True, exist_ok=True)
    rec = JobRecord(job.key, "running", str(job.log), started=now(), host=socket.gethostname())
    command = [sys.executable, "-m", "neobench", *job.argv]
    with job.log.open("w") as log:
        log.write(f"# {rec.started} {subprocess.list2cmdline(command)}\n")
        log.flush()
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        rec.pid = child.pid
        write_record(plan, job, rec)
        try:
            returncode = child.wait()
        except BaseException:
            child.terminate()  # Ctrl-C reaches the child too; this covers SIGTERM to us
            child.wait()
            raise
        finally:
            rec.returncode, rec.ended = child.returncode, now()
            rec.state = "done" if child.returncode == 0 else "failed"
            write_record(plan, job, rec)
    return returncode
