"""What runs inside one Slurm job: the job's `neobench` command, and its requeue at a time limit.

submitit pickles this callable (a plain class at module level) and starts it on the node. Time
limits, scancel, preemption and when a job ends normally: docs/studies.md, "Launchers". SIGTERM
is never turned into a requeue (Slurm requeues a preempted job itself), and wins over the notice.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType

from neobench.study.jobs import Job
from neobench.study.launchers import signalled

# SIGUSR2: what submitit asks Slurm to send before the time limit.
NOTICE = signal.SIGUSR2
POLL_S = 0.5


class JobFailed(RuntimeError):
    """The job's command failed (its log says why); submitit records it and Slurm marks the job
    FAILED, so the jobs that wait for it `afterok` are not started."""


@dataclass
class JobCommand:
    """One study job as submitit's callable: ``argv`` (the job's command, wrapped for Slurm) run
    in ``cwd``; the job's kind says how its progress and completeness are read (study/kinds.py),
    an eval's against its ``benchmark``."""

    argv: list[str]
    cwd: str
    job: Job
    benchmark: str = ""  # an eval's benchmark: what its tasks ask of a result file
    told: list[int] = field(default_factory=list)

    def __call__(self) -> None:
        # SIGTERM and the notice are this job's from its first line to its last: recorded, and
        # passed on to the command while it runs. Never submitit's: its notice handler requeues
        # the job whatever its progress, and a signal that came while the job checked its output
        # (before the command started) or read it (after it ended) went there.
        child: list[subprocess.Popen] = []  # the command, once started
        handlers = {s: signal.signal(s, self._relay(child)) for s in (NOTICE, signal.SIGTERM)}
        try:
            self._run(child)
        finally:
            for signum, previous in handlers.items():
                signal.signal(signum, previous)

    def _run(self, child: list[subprocess.Popen]) -> None:
        kind, key = self.job.kind, self.job.key
        requeued = os.environ.get("SLURM_RESTART_COUNT", "0") not in ("", "0")
        if (requeued or kind.checked_before_first_start) and self._complete():
            print(f"neobench: {key}: already complete; nothing to run", flush=True)
            return
        before = self._progress()
        code = None  # the command is not started when a signal came first
        if not self.told:
            child.append(subprocess.Popen(self.argv, cwd=self.cwd, env=thread_env(os.environ)))
            if self.told:  # one came while it started: the command is told too
                child[0].send_signal(self.told[0])
            # poll(), not wait(): a handler that runs inside wait() could not reap the child
            while child[0].poll() is None:
                time.sleep(POLL_S)
            code = child[0].returncode
        if (code == 0 and kind.exit_zero_is_done) or self._complete():
            return
        if signal.SIGTERM in self.told or code == 128 + signal.SIGTERM:
            raise JobFailed(
                f"{key}: stopped by SIGTERM (scancel, preemption or a requeue by hand); "
                "not requeued by the job itself. Run the study again to continue from where it "
                "stopped."
            )
        if self.told or code == 128 + NOTICE:
            after = self._progress()
            if after > before:
                _requeue(key, before, after)
            raise JobFailed(
                f"{key}: the time limit came before the job made any progress (no new "
                f"checkpoint or result in this window: {before} before, {after} after). Raise "
                f"slurm.{kind}.time in the study (or lower checkpoint_every), then run again."
            )
        assert code is not None  # not started only when told
        raise JobFailed(f"{key}: its command {self._ended(code)}; its log says why.")

    def _ended(self, code: int) -> str:
        """How the command ended without its output, in words: the signal its exit code names
        (killed by SIGKILL, stopped by SIGINT), or the exit code and what its output lacks."""
        said = signalled(code)
        if said:
            return f"was {said} (exit code {code})"
        if code == 0:
            return f"exited 0, but {self.job.kind.unfinished(self.job.output)}"
        return f"exited with code {code}"

    def _relay(self, child: list[subprocess.Popen]) -> Callable[[int, FrameType | None], None]:
        """A handler that records a signal and passes it on to the command while it runs (Slurm
        may already have sent it there too; once is enough for the command, twice does no
        harm)."""

        def handle(signum: int, frame: FrameType | None) -> None:
            self.told.append(signum)
            why = "the time limit is near" if signum == NOTICE else "the job is being stopped"
            print(f"neobench: {signal.Signals(signum).name}: {why}", flush=True)
            if child and child[0].poll() is None:
                child[0].send_signal(signum)

        return handle

    def _progress(self) -> int:
        return self.job.kind.progress(self.job)

    def _complete(self) -> bool:
        """The study's own test of a finished job (study/kinds.py), read on the node."""
        return self.job.kind.complete(self.job, self.benchmark)


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def thread_env(environ: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """The command's environment: torch and BLAS threads set to SLURM_CPUS_PER_TASK unless
    OMP_NUM_THREADS is set (else torch starts one per core of the node, spinning beyond the
    allocation)."""
    env = dict(environ)
    cpus = env.get("SLURM_CPUS_PER_TASK", "")
    if "OMP_NUM_THREADS" not in env and cpus.isdigit() and int(cpus) > 0:
        env.update(dict.fromkeys(THREAD_VARIABLES, cpus))
    return env


def _requeue(key: str, before: int, after: int) -> None:
    """Put this job back in the queue (same id, same dependants) and end this window; not when
    Slurm was told to cancel it meanwhile (a scancel while it stopped at the notice): Slurm
    requeues even a cancelled job, and stop must mean stop."""
    job = os.environ.get("SLURM_ARRAY_JOB_ID")
    job_id = f"{job}_{os.environ['SLURM_ARRAY_TASK_ID']}" if job else os.environ["SLURM_JOB_ID"]
    # A scancel'd job reads COMPLETING (then CANCELLED) while its processes are stopped, not
    # CANCELLED: only a job Slurm still calls RUNNING is requeued.
    state = slurm_state(job_id)
    if state not in (None, "RUNNING"):
        raise JobFailed(
            f"{key}: Slurm says {state} (cancelled?) while it stopped for its time limit "
            f"(progress {before} -> {after}); not requeued. Run the study again to continue "
            "from where it stopped."
        )
    print(f"neobench: {key}: progress {before} -> {after} in this window; requeued", flush=True)
    subprocess.run(["scontrol", "requeue", job_id], check=True, timeout=60)
    sys.exit(-1)  # as submitit's own requeue does: Slurm ends this run of the job


def slurm_state(job_id: str) -> str | None:
    """Slurm's state of the job now (RUNNING, CANCELLED, ...); None when it does not say."""
    try:
        done = subprocess.run(
            ["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"\bJobState=(\S+)", done.stdout)
    return found.group(1) if found else None
