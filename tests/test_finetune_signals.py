"""A fine-tune killed or told to stop at many moments, each time continued with --resume, ends with
the same losses as a run that was never interrupted.

Each stop is a real signal to a real `neobench finetune` process, sent when the run reaches a
moment seen from outside (a line of its loss curve, a checkpoint folder being written). SIGTERM
(and SIGUSR2, Slurm's notice before a time limit) make it save a whole checkpoint at the step end
and exit 143 / 140; SIGKILL gives it no chance, and --resume goes back to the last whole one.

The model is tiny_bert (2 layers, 32 dimensions, MiniLM's tokenizer): what is checked, how a run
stops and resumes, does not depend on the model's size, and its steps and checkpoint writes
(weights, optimizer state, the trainer's model card) still last long enough, tens of
milliseconds and more, for the watcher, looking every 2 ms, to send each signal at its moment.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import wait_for
from sentence_transformers import SentenceTransformer

from tests.test_finetune import FINETUNE_DATA

CURVE = "neobench_loss_curve.jsonl"
STEPS = 14
RECIPE = [
    "manifest=sample-local",
    "max_seq_length=64",
    f"max_steps={STEPS}",
    "batch_size=8",
    "checkpoint_every=2",
    "keep_checkpoints=true",
]


def _argv(model: Path, output: Path, resume: bool) -> list[str]:
    argv = [sys.executable, "-m", "neobench", "finetune", "--model", str(model)]
    argv += ["--output", str(output), "--data-dir", str(FINETUNE_DATA), "--device", "cpu"]
    return argv + (["--resume"] if resume else []) + RECIPE


def _steps(output: Path) -> int:
    try:
        return len((output / CURVE).read_text().splitlines())
    except OSError:
        return 0


def _checkpoint_being_written(output: Path) -> bool:
    folder = output / "checkpoints"
    # checkpoint-N.incomplete: one set aside by an earlier --resume, not being written
    return folder.is_dir() and any(
        not (c / "neobench_checkpoint.json").exists()
        for c in folder.glob("checkpoint-*")
        if c.name.rsplit("-", 1)[-1].isdigit()
    )


# (signal, the moment it is sent) in the order of the runs; each later run is --resume. SIGTERM
# between steps takes the path SIGUSR2 does (the distributed test sends that one mid-window too).
MOMENTS = [
    (signal.SIGTERM, "start-up", lambda out, first: (out / "neobench_run_card.yaml").is_file()),
    (signal.SIGKILL, "between checkpoints", lambda out, first: _steps(out) >= first + 1),
    (signal.SIGKILL, "checkpoint write", lambda out, first: _checkpoint_being_written(out)),
    (signal.SIGUSR2, "before the time limit", lambda out, first: _steps(out) >= first + 1),
    (signal.SIGTERM, "checkpoint write", lambda out, first: _checkpoint_being_written(out)),
]


def _run_until(
    argv: list[str], output: Path, signum: int, moment, times: int = 1
) -> tuple[int, str]:
    first = _steps(output)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    # The deadlines only turn a hang into a failure (the child killed, not left running).
    deadline = time.monotonic() + 600
    try:
        while child.poll() is None:
            if moment(output, first):
                for _ in range(times):  # twice: as slurmstepd and the job's wrapper both do
                    child.send_signal(signum)
                    time.sleep(0.05)
                break
            assert time.monotonic() < deadline, "neither the moment nor the run's end in 600 s"
            time.sleep(0.002)  # the moments last tens of milliseconds: looked at often
        out, _ = child.communicate(timeout=600)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    return child.returncode, out.decode()


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, tiny_bert) -> tuple[Path, int, str]:
    """The run never interrupted, whose losses both tests end with: its folder, exit code and
    output. It gets Slurm's notice twice once its last step is done, while it saves the model
    (the first test checks that it ends complete all the same)."""
    full = tmp_path_factory.mktemp("signals") / "full"
    code, said = _run_until(_argv(tiny_bert, full, False), full, signal.SIGUSR2,
                            lambda out, first: _steps(out) >= STEPS, times=2)  # fmt: skip
    return full, code, said


@pytest.mark.slow
def test_signals_at_many_moments_then_resume_give_the_uninterrupted_losses(
    tmp_path, tiny_bert, uninterrupted
):
    # The uninterrupted run gets Slurm's notice twice once its last step is done, while it saves
    # the model: the save is finished and the run ends complete (before, the notice cut the
    # save, and the whole last window was trained again).
    full, code, said = uninterrupted
    assert code == 0 and "Traceback" not in said, said
    assert "status: complete" in (full / "neobench_run_card.yaml").read_text()
    cut = tmp_path / "cut"
    seen = []
    for signum, what, moment in MOMENTS:
        # As a requeued Slurm job does: --resume once a checkpoint exists (before, a plain run
        # starts again in the folder of the unfinished one).
        resume = any((cut / "checkpoints").glob("checkpoint-*"))
        code, said = _run_until(_argv(tiny_bert, cut, resume), cut, signum, moment)
        seen.append((signal.Signals(signum).name, what, code))
        if code == 0:
            break  # the run ended before the moment came: nothing left to interrupt
        assert "Traceback" not in said, said
        if signum == signal.SIGKILL:
            assert code == -signal.SIGKILL
        elif what == "start-up":  # before training: the ordinary clean exit
            assert code == 128 + signum, said
        else:  # during training: a whole checkpoint at the step end, then exit 128 + signal
            assert code == 128 + signum, said
            assert "stopped by" in said and "--resume" in said, said
            card = (cut / "neobench_run_card.yaml").read_text()
            assert f"interrupted: {signal.Signals(signum).name} at step" in card
            whole = cut / "checkpoints" / f"checkpoint-{_steps(cut)}" / "neobench_checkpoint.json"
            assert whole.is_file(), seen
    assert len(seen) >= 4, seen  # most moments were reached before the run ended
    if seen[-1][2] != 0:
        final = subprocess.run(_argv(tiny_bert, cut, True), capture_output=True, text=True)
        assert final.returncode == 0, final.stdout + final.stderr
    losses = [json.loads(line)["loss"] for line in (cut / CURVE).read_text().splitlines()]
    expected = [json.loads(line)["loss"] for line in (full / CURVE).read_text().splitlines()]
    assert len(losses) == STEPS
    assert losses == pytest.approx(expected, rel=1e-5), seen


def _tree(pid: int) -> list[int]:
    """A process and all its descendants: what Slurm signals (every process of the job)."""
    import psutil

    root = psutil.Process(pid)
    return [pid, *(child.pid for child in root.children(recursive=True))]


@pytest.mark.slow
def test_a_distributed_fine_tune_stops_on_slurms_notice_and_resumes_to_the_same_losses(
    tmp_path, tiny_bert, uninterrupted
):
    """Two processes under neobench's torchrun: SIGUSR2 to every process (as Slurm sends it)
    stops both ranks at the same step with one whole checkpoint and exit 140, no traceback;
    resumed, the run ends with the datasets drawn, losses and embeddings of an uninterrupted
    one-process run, and its card says world_size: 2. (tests/test_finetune.py ran the same
    recipe on one or two processes for these; neobench's torchrun runs torch's.)"""
    full, code, said = uninterrupted  # the same recipe: checkpoints do not change the losses
    assert code == 0, said
    recipe = [*RECIPE[:4], "checkpoint_every=100"]  # the only checkpoint: the one of the stop
    base = ["finetune", "--model", str(tiny_bert), "--data-dir", str(FINETUNE_DATA),
            "--device", "cpu", *recipe]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    two = tmp_path / "two"

    def torchrun(*extra: str) -> list[str]:
        with socket.socket() as probe:  # a free port
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        return [sys.executable, "-m", "neobench.train.torchrun", "--nproc_per_node", "2",
                "--master_addr", "127.0.0.1", "--master_port", str(port), "-m", "neobench",
                *base, "--output", str(two), *extra]  # fmt: skip

    child = subprocess.Popen(torchrun(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             env=env)  # fmt: skip
    try:
        wait_for(lambda: child.poll() is not None or _steps(two) >= 3, "3 steps", poll_s=0.01)
        for pid in _tree(child.pid):
            with contextlib.suppress(ProcessLookupError):  # a helper that has just ended
                os.kill(pid, signal.SIGUSR2)
        said = child.communicate(timeout=600)[0].decode()
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 140, said
    assert "Traceback" not in said and "torchrun: worker(s) exited with [140]" in said
    [whole] = (two / "checkpoints").glob("checkpoint-*")
    assert (whole / "neobench_checkpoint.json").is_file() and int(whole.name[11:]) < STEPS
    done = subprocess.run(torchrun("--resume"), capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    one, both = _curve(full), _curve(two)
    assert [r["dataset"] for r in both] == [r["dataset"] for r in one]
    assert [r["loss"] for r in both] == pytest.approx([r["loss"] for r in one], rel=1e-4)
    texts = ["A man is playing a guitar.", "The stock market fell sharply today."]
    e1 = SentenceTransformer(str(full), device="cpu").encode(texts)
    e2 = SentenceTransformer(str(two), device="cpu").encode(texts)
    assert np.abs(e1 - e2).max() < 1e-4
    assert "world_size: 2" in (two / "neobench_run_card.yaml").read_text()


def _curve(output: Path) -> list[dict]:
    return [json.loads(line) for line in (output / CURVE).read_text().splitlines()]
