"""No Slurm cluster reachable: `study run --launcher slurm` says so and how to point at one,
before anything is submitted or written, and never waits for Slurm's own retries."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import REPO

from neobench.cli.main import main

POINT = 'eval "$(scripts/slurm-local.sh start)"'


def _run(tmp_path: Path) -> int:
    study = REPO / "studies" / "tiny.yaml"
    output = str(tmp_path / "s")
    return main(["study", "run", str(study), "--launcher", "slurm", "--output", output])


def test_a_missing_slurm_conf_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "nowhere" / "slurm.conf"))
    # Slurm's commands, each a stand-in that notes it was run: sinfo itself would retry the
    # missing file for 60 s, so none may be run at all.
    bin_dir, asked = tmp_path / "bin", tmp_path / "asked"
    bin_dir.mkdir()
    for name in ("sinfo", "squeue", "sbatch", "scontrol", "sacct", "scancel"):
        (bin_dir / name).write_text(f"#!/bin/sh\necho {name} >> {asked}\nexit 1\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    assert _run(tmp_path) != 0
    err = capsys.readouterr().err
    assert "SLURM_CONF=" in err and "is not a file" in err and POINT in err
    assert not asked.exists(), asked.read_text()  # no Slurm command was waited for
    assert not (tmp_path / "s" / "jobs").exists()


def test_no_configuration_at_all_says_how_to_point_at_a_cluster(tmp_path, monkeypatch, capsys):
    if Path("/etc/slurm/slurm.conf").exists():
        pytest.skip("this machine has a system-wide Slurm configuration")
    monkeypatch.delenv("SLURM_CONF", raising=False)  # sinfo: installed by the test command
    assert _run(tmp_path) != 0
    err = capsys.readouterr().err
    assert "no Slurm cluster answers here" in err and POINT in err and "Traceback" not in err
