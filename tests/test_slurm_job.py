"""What runs inside a study's Slurm job (neobench/study/launchers/slurm_job.py), without Slurm."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from neobench.study.launchers.slurm_job import JobFailed, _requeue, progress


def test_eval_progress_skips_a_folder_that_vanishes_while_it_is_read(tmp_path, monkeypatch):
    """Found by benchmarks/cluster_rehearsal.py: a shard's job read the study's output while a
    sibling shard removed its staging folder, and failed with FileNotFoundError before its
    command started. A folder gone mid-walk is skipped."""
    results = tmp_path / "results" / "study__model" / "rev"
    results.mkdir(parents=True)
    for task in ("BIOSSES", "STS16"):
        (results / f"{task}.json").write_text("{}")
    staging = tmp_path / "results" / ".neobench-staging" / "123"
    staging.mkdir(parents=True)
    (staging / "SICK-R.json").write_text("{}")
    real = os.scandir

    def scandir(path: os.PathLike | str = "."):
        if Path(path) == staging:  # listed by its parent, removed before it is read
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    tasks = ["BIOSSES", "STS16", "SICK-R"]  # the shard's tasks: two of them written
    assert progress("eval", tmp_path, tasks) == 2
    assert progress("eval", tmp_path, ["SciFact"]) == 0  # other jobs' results do not count
    assert progress("eval", tmp_path / "missing", tasks) == 0


@pytest.fixture
def scontrol(tmp_path, monkeypatch):
    """A stand-in `scontrol` on PATH that reports JobState=$STATE and logs its arguments."""
    bin_dir, log = tmp_path / "bin", tmp_path / "scontrol.log"
    bin_dir.mkdir()
    script = bin_dir / "scontrol"
    script.write_text(
        f'#!/bin/sh\necho "$@" >> {log}\n'
        '[ "$1" = show ] && echo "JobId=41 JobName=study-finetune JobState=$STATE Reason=None"\n'
        "exit 0\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_JOB_ID", "41")
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    return log


def test_a_job_cancelled_while_it_stops_at_its_time_limit_is_not_requeued(scontrol, monkeypatch):
    """Found by benchmarks/cluster_rehearsal.py: a scancel that came while a fine-tune stopped
    at the time-limit notice was undone, the job's own `scontrol requeue` putting the cancelled
    job back in the queue (Slurm accepts it). Slurm's state is asked first."""
    monkeypatch.setenv("STATE", "CANCELLED")
    with pytest.raises(JobFailed, match="cancelled while it stopped for its time limit"):
        _requeue("finetune/m-seed0", 10, 20)
    assert scontrol.read_text().split("\n")[:-1] == ["show job -o 41"]  # no requeue

    monkeypatch.setenv("STATE", "RUNNING")  # the notice alone: requeued, this window ends
    with pytest.raises(SystemExit):
        _requeue("finetune/m-seed0", 10, 20)
    assert scontrol.read_text().split("\n")[-2] == "requeue 41"
