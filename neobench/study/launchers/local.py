"""The local launcher: a study's pending jobs one after another, as `neobench` subprocesses.
Records, `ended_as` and Ctrl-C: docs/studies.md, "Launchers".
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from neobench.core.card_io import now
from neobench.core.errors import NeobenchError, RunFailed
from neobench.study import store
from neobench.study.launchers import LAUNCHERS, launcher, progress, signal_name, signalled
from neobench.study.models import build
from neobench.study.plan import Job, Plan, replan
from neobench.study.store import JobRecord, write_record

NAME = "local"
TITLE = "this machine"
CANCEL = "kill"


def run(plan: Plan, tell: Callable[..., None], *, file: str, wait: bool = False) -> None:
    """Run the pending jobs here (``wait`` changes nothing: they have ended on return)."""
    ran = run_local(plan, progress(tell))
    if plan.waiting:  # a sweep's evals and the table are planned once its fine-tunes are done
        plan = replan(plan)
        ran += run_local(plan, progress(tell)) if plan.pending else []
    if plan.waiting:  # its fine-tunes ended without a complete card: nothing to select from
        raise RunFailed(
            f"{', '.join(plan.waiting)}: the sweep's fine-tunes ran, but not all are complete; "
            f"`neobench study status {file}` shows which. Run the study again to finish them."
        )
    tell(f"[green]done[/]: {len(ran)} job(s) ran; table: {plan.table_files()}")


def queue() -> dict[str, str]:
    """No queue: a local job's record and its process say all."""
    return {}


def job_state(rec: JobRecord, listed: dict[str, str]) -> str:
    """The recorded state, failed for a job recorded running whose process is gone."""
    return "failed" if rec.state == "running" and not _alive(rec) else rec.state


def why(plan: Plan, job: Job, rec: JobRecord) -> str:
    """How a local job ended without its output, and the last error line of its log."""
    how, said = _how(rec), store.last_error(job.log)
    text = f"{how}: {said}" if said else how
    job.kind.close_card(job.output, text)
    return text


def _how(rec: JobRecord) -> str:
    """How the job ended: what stopped it or what it lacks, and its exit code."""
    code = "its process is gone" if rec.returncode is None else f"exit code {rec.returncode}"
    return f"{rec.ended_as}, {code}" if rec.ended_as else code


def _alive(rec: JobRecord) -> bool:
    if rec.launcher != NAME or rec.host != socket.gethostname() or rec.pid is None:
        return True  # cannot be checked from here
    try:
        os.kill(rec.pid, 0)  # signal 0: an existence check
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    return True


def run_local(plan: Plan, on_job: Callable[[Job, str], None] | None = None) -> list[Job]:
    """Run every pending job in order; the jobs run. Stops at the first failure (RunFailed
    naming its log). ``on_job(job, "started" | "done")`` reports progress."""
    report = on_job or (lambda job, what: None)
    _refuse_running(plan)
    plan.save()
    for model in plan.models:
        build(model)  # says so when it builds one
    ran = []
    for job in plan.pending:
        report(job, "started")
        rec = run_job(plan, job)
        ran.append(job)
        if rec.state != "done":
            raise RunFailed(
                f"job {job.key} failed ({_how(rec)}); its log: {job.log}. Fix the "
                f"cause, then run `neobench study run {plan.study.file}` again: finished jobs "
                "are skipped."
            )
        report(job, "done")
    return ran


def _refuse_running(plan: Plan) -> None:
    """Refuse a pending job that a queue still holds or that a killed runner left running: two
    processes would write one output."""
    elsewhere: dict[str, list[str]] = {}
    alive: list[str] = []
    listed, here = None, socket.gethostname()
    for job in plan.pending:
        rec = store.read_record(plan, job)
        if rec is None or rec.launcher not in LAUNCHERS:
            continue
        if rec.launcher != NAME:
            listed = store.queues(plan) if listed is None else listed
            if store.state(plan, job, listed) in ("queued", "running"):
                elsewhere.setdefault(rec.launcher, []).append(job.key)
        elif rec.state == "running" and rec.host == here and rec.pid and _alive(rec):
            alive.append(f"{job.key} (pid {rec.pid})")
    for name, held in elsewhere.items():
        where = launcher(name)
        raise NeobenchError(
            f"{', '.join(held)}: submitted to {where.TITLE} and not ended yet. Wait for them "
            f"(neobench study status {plan.study.file}) or {where.CANCEL} them, then run locally."
        )
    if alive:
        raise NeobenchError(
            f"{', '.join(alive)}: still running, started by a runner that was stopped. Wait for "
            f"them to end (neobench study status {plan.study.file}) or kill them, then run again."
        )


# The runner's main thread wakes this often to run Python's signal handlers: a signal the kernel
# hands to another thread (torch's, once a model was built here) does not interrupt a blocking
# wait, so a Ctrl-C would be seen only once the job had ended.
POLL_S = 0.2
# A Ctrl-C reaches the job too (same process group): its time to clean up before SIGTERM.
GRACE_S = 10.0


def run_job(plan: Plan, job: Job) -> JobRecord:
    """One job as `python -m neobench ARGV`, its output in its log; its record once ended."""
    job.log.parent.mkdir(parents=True, exist_ok=True)
    rec = JobRecord(job.key, "running", str(job.log), started=now(), host=socket.gethostname())
    command = [sys.executable, "-m", "neobench", *job.argv]
    stopped: str | None = None  # what stopped this runner while the job ran
    with job.log.open("w") as log:
        log.write(f"# {rec.started} {subprocess.list2cmdline(command)}\n")
        log.flush()
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        rec.pid = child.pid
        write_record(plan, job, rec)
        # A thread reaps the child: a signal handler raising in the main thread between the
        # kernel's reaping and Popen's reading of the status loses it, and Popen reports 0.
        ended = threading.Event()
        threading.Thread(target=_reap, args=(child, ended), daemon=True).start()
        try:
            _wait(ended)
        except BaseException as stop:
            stopped = _what(stop)
            _stop(child, ended, stop)
            raise
        finally:
            _end(plan, job, rec, child.returncode, stopped)
    return rec


def _reap(child: subprocess.Popen, ended: threading.Event) -> None:
    try:
        child.wait()
    finally:
        ended.set()


def _wait(ended: threading.Event, timeout_s: float | None = None) -> None:
    """Wait for the job's end (at most ``timeout_s``), waking every POLL_S for signals. An
    Event, not Thread.join: a join cut by KeyboardInterrupt marks a live thread stopped."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while not ended.wait(POLL_S) and (deadline is None or time.monotonic() < deadline):
        pass


def _what(stop: BaseException) -> str:
    """The signal that stopped the runner (the CLI's Terminated carries its own), or the
    exception that did."""
    if isinstance(stop, KeyboardInterrupt):
        return signal_name(getattr(stop, "signum", signal.SIGINT))
    return type(stop).__name__


def _stop(child: subprocess.Popen, ended: threading.Event, stop: BaseException) -> None:
    """End the job as the runner stops, and wait for it: the runner's own signal passed on
    (SIGTERM or SIGUSR2: a fine-tune saves a whole checkpoint), SIGTERM once a Ctrl-C that
    reached the job too has had GRACE_S to end it."""
    if type(stop) is KeyboardInterrupt:  # a plain Ctrl-C, not the CLI's Terminated
        _wait(ended, GRACE_S)
    if not ended.is_set():
        child.send_signal(getattr(stop, "signum", signal.SIGTERM))
    _wait(ended)


def _end(plan: Plan, job: Job, rec: JobRecord, returncode: int | None, stopped: str | None) -> None:
    """Record how the job ended (done, or failed with ``ended_as``). A job still running (a
    second Ctrl-C cut the wait short) stays recorded running with its pid: `status` and the
    next `run` look at that process."""
    if returncode is None:
        return
    rec.returncode, rec.ended = returncode, now()
    unfinished = job.kind.unfinished(job.output) if returncode == 0 else None
    rec.ended_as = f"interrupted by {stopped}" if stopped else signalled(returncode) or unfinished
    rec.state = "done" if returncode == 0 and rec.ended_as is None else "failed"
    write_record(plan, job, rec)
