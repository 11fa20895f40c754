"""What runs inside a study's Slurm job (neobench/study/launchers/slurm_job.py), without Slurm."""

from __future__ import annotations

import os
from pathlib import Path

from neobench.study.launchers.slurm_job import progress


def test_eval_progress_skips_a_folder_that_vanishes_while_it_is_read(tmp_path, monkeypatch):
    """Found by benchmarks/cluster_rehearsal.py: a shard's job read the study's output while a
    sibling shard removed its staging folder, and failed with FileNotFoundError before its
    command started. A folder gone mid-walk is skipped."""
    results = tmp_path / "results" / "study__model" / "rev"
    results.mkdir(parents=True)
    for task in ("BIOSSES", "STS16"):
        (results / f"{task}.json").write_text("{}")
    staging = tmp_path / ".neobench-staging" / "123" / "results"
    staging.mkdir(parents=True)
    (staging / "SICK-R.json").write_text("{}")
    real = os.scandir

    def scandir(path: os.PathLike | str = "."):
        if Path(path) == staging:  # listed by its parent, removed before it is read
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert progress("eval", tmp_path) == 2
    assert progress("eval", tmp_path / "missing") == 0
