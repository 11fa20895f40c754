"""Resources that fit the cluster: what each job asks for is held against what sinfo says the
partition offers, before anything is submitted (study/launchers/slurm.py)."""

from __future__ import annotations

import pytest
import yaml
from conftest import REPO

from neobench.cli.main import main
from neobench.study.launchers import slurm
from neobench.study.spec import Resources, Slurm


def test_sinfo_lines_become_offers(monkeypatch):
    sinfo = (
        "gpu*|gpu:a100:4(S:0-1)|64|512000|2-00:00:00\n"
        "gpu*|gpu:a100:8|128|1024000|2-00:00:00\n"
        "cpu|(null)|32|128000|30:00\n"
        "debug|(null)|2|23000|infinite\n"
    )
    asked = []
    monkeypatch.setattr(slurm, "_slurm_command", lambda argv: asked.append(argv) or sinfo)
    listed = slurm.offers()
    assert asked == [["sinfo", "-h", "-o", slurm.FORMAT]]
    gpu, cpu, debug = listed["gpu"], listed["cpu"], listed["debug"]
    assert (gpu.default, gpu.gpus, gpu.cpus, gpu.mem_mb) == (True, 8, 128, 1024000)
    assert gpu.minutes == 2880
    assert (cpu.gpus, cpu.minutes) == (0, 30) and debug.minutes is None


def test_every_misfit_is_named_with_its_key():
    offer = slurm.Offer("cpu", True, gpus=0, cpus=2, mem_mb=4000, minutes=60)
    found = slurm._misfits("slurm.eval", Resources(1, 8, "32G", "4:00:00"), offer, given=True)
    assert [p.split(":")[0] for p in found] == [
        "slurm.eval.gpus", "slurm.eval.cpus", "slurm.eval.mem", "slurm.eval.time"
    ]  # fmt: skip
    assert "A CPU study: set gpus: 0." in found[0]


def test_a_time_limit_too_short_to_work_is_refused_with_the_figures():
    # Slurm's pre-limit notice (90 s by default) would fire at once: every window lost
    short, enough = Resources(0, 1, "1G", "0:02:00"), Resources(0, 1, "1G", "0:03:00")
    [found] = slurm._too_short("slurm.finetune", short, Slurm())
    assert found.startswith("slurm.finetune.time: 0:02:00 leaves 0 s of work in each window")
    assert "90 s before its limit (slurm.signal_s)" in found and "about 60 s" in found
    assert "at least 3 minutes (e.g. 0:03:00)" in found
    assert slurm._too_short("slurm.eval", enough, Slurm()) == []
    # Jobs that start fast and are told late: a one-minute window is enough
    quick = Slurm(signal_s=20, startup_s=10)
    assert slurm._too_short("slurm.finetune", Resources(0, 1, "1G", "0:01:00"), quick) == []


@pytest.mark.slurm
def test_a_gpu_study_on_a_cpu_cluster_is_refused_before_submitting(
    slurm_cluster, monkeypatch, tmp_path, capsys
):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    data = yaml.safe_load((REPO / "studies" / "tiny.yaml").read_text())
    del data["slurm"]  # every job then asks for the default: 1 GPU
    (tmp_path / "tiny-bert.json").write_text((REPO / "studies" / "tiny-bert.json").read_text())
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    code = main(["study", "run", str(study), "--output", str(out), "--launcher", "slurm"])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    assert "slurm.finetune.gpus: 1 GPU(s) per job (the default" in err
    assert "slurm.eval.gpus" in err and "set gpus: 0" in err
    assert not (out / "slurm").exists() and not (out / "jobs").exists()  # nothing submitted


@pytest.mark.slurm
def test_an_sbatch_refusal_is_one_message_naming_the_jobs(
    slurm_cluster, monkeypatch, tmp_path, capsys
):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    data = yaml.safe_load((REPO / "studies" / "tiny.yaml").read_text())
    data["slurm"]["constraint"] = "no-such-feature"  # only sbatch knows the node features
    (tmp_path / "tiny-bert.json").write_text((REPO / "studies" / "tiny-bert.json").read_text())
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump(data))
    out = str(tmp_path / "out")
    code = main(["study", "run", str(study), "--output", out, "--launcher", "slurm"])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    assert "finetune/MiniLM-seed0: Slurm refused the submission" in err
    assert "feature" in err.lower()  # sbatch's own reason, relayed
