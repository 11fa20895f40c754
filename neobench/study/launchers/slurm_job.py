"""What runs inside one Slurm job: the job's `neobench` command, and its requeue at a time limit.

submitit starts this callable on the node (it is pickled at submission, so it is a plain class at
module level). Slurm tells the job SIGUSR2 a while before its time limit (``slurm.signal_s``,
submitit's ``--signal``). The command itself gets it too: a fine-tune saves a whole checkpoint
at the end of its step and exits 140 (neobench/train/stop.py); an eval stops between tasks'
writes, its finished tasks kept. Then, if the window moved the job forward (a newer checkpoint,
more result files), the job requeues itself with `scontrol requeue`: the next window continues
where this one stopped (`--resume` for a fine-tune that has a checkpoint). A window that moved
nothing is not requeued: the job fails with the reason, instead of starting again for ever.

SIGTERM (scancel, preemption, a requeue by hand) is not turned into a requeue here: scancel means
stop, and a preempted or requeued job is put back in the queue by Slurm itself. The command saves
what it can on SIGTERM in any case.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

# SIGUSR2: what submitit asks Slurm to send before the time limit.
NOTICE = signal.SIGUSR2
POLL_S = 0.5


class JobFailed(RuntimeError):
    """The job's command failed (its log says why); submitit records it and Slurm marks the job
    FAILED, so the jobs that wait for it `afterok` are not started."""


@dataclass
class JobCommand:
    """One study job as submitit's callable: ``argv`` run in ``cwd``; ``kind`` and ``output``
    say how progress is read (a fine-tune's last whole checkpoint, an eval's result files)."""

    argv: list[str]
    cwd: str
    key: str
    kind: str
    output: str
    tasks: list[str] = field(default_factory=list)  # an eval's tasks
    told: list[int] = field(default_factory=list)

    def __call__(self) -> None:
        before = progress(self.kind, Path(self.output), self.tasks)
        child = subprocess.Popen(self.argv, cwd=self.cwd)
        previous = signal.signal(NOTICE, lambda signum, frame: self._notice(child, signum, frame))
        try:
            # poll(), not wait(): a handler that runs inside wait() could not reap the child
            while child.poll() is None:
                time.sleep(POLL_S)
        finally:
            signal.signal(NOTICE, previous)
        code = child.returncode
        if code == 0:
            return
        if self.told or code == 128 + NOTICE:
            after = progress(self.kind, Path(self.output), self.tasks)
            if after > before:
                _requeue(self.key, before, after)
            raise JobFailed(
                f"{self.key}: the time limit came before the job made any progress (no new "
                f"checkpoint or result in this window: {before} before, {after} after). Raise "
                f"slurm.{self.kind}.time in the study (or lower checkpoint_every), then run again."
            )
        raise JobFailed(f"{self.key}: its command exited with code {code}; its log says why.")

    def _notice(self, child: subprocess.Popen, signum: int, frame: FrameType | None) -> None:
        """The time limit is near: pass the notice on (Slurm may already have sent it to the
        command too; once is enough for it, twice does no harm)."""
        self.told.append(signum)
        print(f"neobench: {signal.Signals(signum).name}: the time limit is near", flush=True)
        if child.poll() is None:
            child.send_signal(signum)


def progress(kind: str, output: Path, tasks: list[str]) -> int:
    """How far a job has got, as one number that only grows: a fine-tune's last whole
    checkpoint step (its model saved: above any step), the result files of an eval's tasks
    (other jobs write beside them: only these count)."""
    if kind == "finetune":
        from neobench.train.output import last_checkpoint

        if (output / "model.safetensors").is_file():
            return sys.maxsize
        last = last_checkpoint(output)
        return int(last.rsplit("-", 1)[-1]) if last else 0
    # os.walk, not rglob: other jobs of the study write into this folder while it is read, and
    # a folder that vanishes meanwhile (an eval's staging folder, removed when it ends) is
    # skipped instead of failing the job before its command starts. Only this job's tasks count.
    wanted = {f"{task}.json" for task in tasks}
    return sum(name in wanted for _, _, names in os.walk(output / "results") for name in names)


def _requeue(key: str, before: int, after: int) -> None:
    """Put this job back in the queue (same id, same dependants) and end this window; not when
    Slurm was told to cancel it meanwhile (a scancel while it stopped at the notice): Slurm
    requeues even a cancelled job, and stop must mean stop."""
    job = os.environ.get("SLURM_ARRAY_JOB_ID")
    job_id = f"{job}_{os.environ['SLURM_ARRAY_TASK_ID']}" if job else os.environ["SLURM_JOB_ID"]
    if slurm_state(job_id) == "CANCELLED":
        raise JobFailed(
            f"{key}: cancelled while it stopped for its time limit (progress {before} -> "
            f"{after}); not requeued. Run the study again to continue from where it stopped."
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
