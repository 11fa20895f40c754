"""The local launcher: a study's pending jobs one after another, as `neobench` subprocesses.

Each job writes its output to OUTPUT/logs/<key>.log and a small record OUTPUT/jobs/<key>.json
(running / failed / done, exit code, pid, log; see neobench/study/store.py), which `neobench
study status` reads. The first failure stops the run: later jobs may depend on it, and the next
`run` starts again from the jobs that are still not done.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from collections.abc import Callable

from neobench.core.card_io import now
from neobench.core.errors import NeobenchError, RunFailed
from neobench.study import store
from neobench.study.launchers import LAUNCHERS, launcher, progress
from neobench.study.models import build
from neobench.study.plan import TABLE_FILE, Job, Plan, replan
from neobench.study.store import JobRecord, write_record

logger = logging.getLogger(__name__)

NAME = "local"
TITLE = "this machine"
CANCEL = "kill"


def run(plan: Plan, tell: Callable[..., None], *, file: str, wait: bool = False) -> None:
    """Run the pending jobs here (``wait`` changes nothing: they have ended on return)."""
    ran = run_local(plan, progress(tell))
    # A sweep selects its point once its fine-tunes are done: its evals (and the table) are
    # planned then, by reading the plan again.
    if plan.waiting:
        plan = replan(plan)
        ran += run_local(plan, progress(tell)) if plan.pending else []
    if plan.waiting:  # its fine-tunes ended without a complete card: nothing to select from
        raise RunFailed(
            f"{', '.join(plan.waiting)}: the sweep's fine-tunes ran, but not all are complete; "
            f"`neobench study status {file}` shows which. Run the study again to finish them."
        )
    tell(f"[green]done[/]: {len(ran)} job(s) ran; table: {plan.study.output / TABLE_FILE}")


def queue() -> dict[str, str]:
    """No queue: a local job's record and its process say all."""
    return {}


def job_state(rec: JobRecord, listed: dict[str, str]) -> str:
    """The recorded state, failed for a job recorded running whose process is gone."""
    if rec.state == "running" and not _alive(rec):
        return "failed"  # its process is gone without saying how it ended
    return rec.state


def why(plan: Plan, job: Job, rec: JobRecord) -> str:
    """How a local job ended without its output: its exit code (or its process gone) and the
    last error line of its log."""
    how = "its process is gone" if rec.returncode is None else f"exit code {rec.returncode}"
    try:
        lines = job.log.read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    said = next((line.strip() for line in reversed(lines) if line.startswith("error:")), None)
    text = f"{how}: {said}" if said else how
    store.close_card(job, text)
    return text


def _alive(rec: JobRecord) -> bool:
    if rec.launcher != NAME or rec.host != socket.gethostname() or rec.pid is None:
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
    _refuse_jobs_held_elsewhere(plan)
    _refuse_orphans(plan)
    plan.save()
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


def _refuse_jobs_held_elsewhere(plan: Plan) -> None:
    """A job an earlier `--launcher slurm` (or another queue) submitted and that is still held
    there must not also run here: two processes would write one output."""
    elsewhere: dict[str, list[str]] = {}
    listed = None
    for job in plan.pending:
        rec = store.read_record(plan, job)
        if rec is None or rec.launcher == NAME or rec.launcher not in LAUNCHERS:
            continue
        listed = store.queues(plan) if listed is None else listed
        if store.state(plan, job, listed) in ("queued", "running"):
            elsewhere.setdefault(rec.launcher, []).append(job.key)
    for name, held in elsewhere.items():
        where = launcher(name)
        raise NeobenchError(
            f"{', '.join(held)}: submitted to {where.TITLE} and not ended yet. Wait for them "
            f"(neobench study status {plan.study.file}) or {where.CANCEL} them, then run locally."
        )


def _refuse_orphans(plan: Plan) -> None:
    """A job whose runner was killed (SIGKILL: no handler ran) goes on as an orphan; it still
    writes its output, so it must not be started again beside it."""
    alive = []
    for job in plan.pending:
        rec = store.read_record(plan, job)
        if rec is None or rec.launcher != NAME or rec.state != "running":
            continue
        if rec.host == socket.gethostname() and rec.pid and _alive(rec):
            alive.append(f"{job.key} (pid {rec.pid})")
    if alive:
        raise NeobenchError(
            f"{', '.join(alive)}: still running, started by a runner that was stopped. Wait for "
            f"them to end (neobench study status {plan.study.file}) or kill them, then run again."
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
