"""A scancel that comes while a study job stops at its time-limit notice, on the real local Slurm.

Found by the full-size rehearsal (benchmarks/cluster_rehearsal.py): a fine-tune was scancel'd a
second after Slurm's notice; while the job saved its checkpoint, Slurm already called it
COMPLETING (not CANCELLED), the job's own `scontrol requeue` put it back in the queue, and it ran
8 more windows under the same id. Here Slurm itself sends both signals (``scancel --signal``
then ``scancel``) to a job that runs the study's JobCommand; it must end CANCELLED, never
requeued.

Each step waits for the one before to have happened, not for a time: Slurm delivers a signal
some time after scancel returns (the notice and a scancel sent a second apart once arrived in the
other order). The scancel is sent once the command is saving on the notice, and the save lasts
until the job has seen the scancel's SIGTERM: the ordering of the rehearsal's fault, every time.
(A save that ends before the SIGTERM comes is the other ordering: Slurm's state, asked before a
requeue, says the job is being cancelled; tests/test_slurm_job.py checks that one.)"""

from __future__ import annotations

import pickle
import re
import subprocess
import sys

import pytest
from conftest import stopping_command, wait_for

from neobench.study.jobs import Job
from neobench.study.launchers.slurm_job import JobCommand

pytestmark = [pytest.mark.slurm]

# Stops on the notice or SIGTERM as neobench's commands do: a checkpoint written once the test
# releases it, then the shell's exit code for the signal.
COMMAND = stopping_command(run_s=300)


def _show(job_id: str, env: dict) -> str:
    done = subprocess.run(["scontrol", "show", "job", "-o", job_id], env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    return done.stdout


def _field(shown: str, name: str) -> str:
    found = re.search(rf"\b{name}=(\S+)", shown)
    return found.group(1) if found else ""


def _text(path) -> str:
    return path.read_text() if path.is_file() else ""


def test_a_scancel_during_the_notice_ends_the_job_cancelled_not_requeued(
    slurm_cluster, tmp_path, monkeypatch
):
    import submitit

    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    executor = submitit.SlurmExecutor(folder=tmp_path / "slurm" / "%j")
    executor.update_parameters(
        job_name="cancel-test", time=10, cpus_per_task=1, mem="1G", signal_delay_s=60,
        additional_parameters={"requeue": True},
    )  # fmt: skip
    argv = [sys.executable, "-c", COMMAND]
    out = tmp_path / "out"
    tune = Job("finetune", "finetune/m-seed0", [], out, out / "job.log", None)
    job = executor.submit(JobCommand(argv, str(tmp_path), tune))
    env = slurm_cluster.env
    log = job.paths.stdout

    def where() -> str:
        return f"{_show(job.job_id, env)}\n{_text(log)}"

    wait_for(lambda: (tmp_path / "started").is_file(), "the command to start", said=where)
    # The notice, as Slurm sends it before the time limit; once the command is saving on it, the
    # scancel (SIGTERM to every process of the job, SIGKILL KillWait seconds later).
    subprocess.run(["scancel", "--signal=USR2", job.job_id], env=env, check=True, timeout=60)
    wait_for(lambda: (tmp_path / "stopping").is_file(), "the notice to reach it", said=where)
    subprocess.run(["scancel", job.job_id], env=env, check=True, timeout=60)
    seen = "neobench: SIGTERM: the job is being stopped"  # the job's relay of the scancel
    wait_for(lambda: seen in _text(log), "the scancel's SIGTERM to reach the job", said=where)
    (tmp_path / "release").touch()  # the save ends, well inside KillWait

    # The job's own decision: its result (submitit writes JobFailed there) or a requeue of its own.
    result = job.paths.result_pickle
    requeued = "in this window; requeued"
    wait_for(lambda: result.is_file() or requeued in _text(log), "the job's end", said=where)
    assert requeued not in _text(log), where()

    def ended() -> bool:
        state = _field(_show(job.job_id, env), "JobState")
        return state not in ("", "PENDING", "RUNNING", "COMPLETING", "REQUEUED")

    wait_for(ended, "Slurm to end the job", poll_s=0.5, said=where)
    shown, said = _show(job.job_id, env), _text(log)
    assert _field(shown, "JobState") == "CANCELLED", (shown, said)
    assert _field(shown, "Restarts") == "0", (shown, said)
    assert requeued not in said, said
    # The command got the notice and stopped on it (its own record: the job log's copy of its
    # output is Slurm's).
    assert (tmp_path / "stopping").read_text() == "SIGUSR2", where()
    assert (tmp_path / "out" / "checkpoints" / "checkpoint-7").is_dir()  # its save was whole
    outcome, trace = pickle.loads(result.read_bytes())
    assert outcome == "error" and "JobFailed" in trace, trace
    assert "stopped by SIGTERM" in trace and "not requeued" in trace, trace
