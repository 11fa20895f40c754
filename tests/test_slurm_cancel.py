"""A scancel that comes while a study job stops at its time-limit notice, on the real local Slurm.

Found by the full-size rehearsal (benchmarks/cluster_rehearsal.py): a fine-tune was scancel'd a
second after Slurm's notice; while the job saved its checkpoint, Slurm already called it
COMPLETING (not CANCELLED), the job's own `scontrol requeue` put it back in the queue, and it ran
8 more windows under the same id. Here Slurm itself sends both signals (``scancel --signal``
then ``scancel``) to a job that runs the study's JobCommand; it must end CANCELLED, never
requeued."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest
from conftest import stopping_command

from neobench.study.launchers.slurm_job import JobCommand

pytestmark = [pytest.mark.slurm]

# Stops on the notice or SIGTERM as neobench's commands do: a checkpoint written in 3 s (shorter
# than the cluster's KillWait of 5 s), then the shell's exit code for the signal.
COMMAND = stopping_command(save_s=3, run_s=120)


def _show(job_id: str, env: dict) -> str:
    done = subprocess.run(["scontrol", "show", "job", "-o", job_id], env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    return done.stdout


def _field(shown: str, name: str) -> str:
    found = re.search(rf"\b{name}=(\S+)", shown)
    return found.group(1) if found else ""


def _wait_for(predicate, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.5)
    return False


def test_a_scancel_during_the_notice_ends_the_job_cancelled_not_requeued(
    slurm_cluster, tmp_path, monkeypatch
):
    import submitit

    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    executor = submitit.SlurmExecutor(folder=tmp_path / "slurm" / "%j")
    executor.update_parameters(
        job_name="cancel-test", time=5, cpus_per_task=1, mem="1G", signal_delay_s=60,
        additional_parameters={"requeue": True},
    )  # fmt: skip
    argv = [sys.executable, "-c", COMMAND]
    job = executor.submit(JobCommand(argv, str(tmp_path), "finetune/m-seed0", "finetune",
                                     str(tmp_path / "out")))  # fmt: skip
    env = slurm_cluster.env
    log = tmp_path / "slurm" / job.job_id / f"{job.job_id}_0_log.out"
    assert _wait_for(lambda: log.is_file() and "started" in log.read_text(), 120), _show(
        job.job_id, env
    )
    # The notice, as Slurm sends it before the time limit; a second later, the scancel.
    subprocess.run(["scancel", "--signal=USR2", job.job_id], env=env, check=True, timeout=60)
    time.sleep(1)
    subprocess.run(["scancel", job.job_id], env=env, check=True, timeout=60)

    def ended() -> bool:
        state = _field(_show(job.job_id, env), "JobState")
        return state not in ("PENDING", "RUNNING", "COMPLETING", "REQUEUED")

    assert _wait_for(ended, 60), _show(job.job_id, env)
    time.sleep(3)  # a requeue in flight would show here as PENDING again
    shown = _show(job.job_id, env)
    said = log.read_text()
    assert _field(shown, "JobState") == "CANCELLED", (shown, said)
    assert _field(shown, "Restarts") == "0", (shown, said)
    assert "requeued" not in said, said
    assert "stopping on SIGUSR2" in said  # the command got the notice and stopped on it
    assert (tmp_path / "out" / "checkpoints" / "checkpoint-7").is_dir()
