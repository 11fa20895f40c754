"""Progress in a log file: plain whole lines that appear while the run goes on (cluster jobs)."""

import io
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

from conftest import SHARED
from rich.console import Console

from neobench.cli.progress import EvalProgress, StepProgress, task_line


def wait_for(log, text, child, timeout=180.0) -> str:
    """The log's content once it holds ``text``; fails if the process ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = log.read_text() if log.exists() else ""
        if text in content:
            return content
        assert child.poll() is None, f"ended before writing {text!r}:\n{content}"
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in the log after {timeout}s")


def start(argv, log):
    with log.open("w") as handle:
        return subprocess.Popen(
            [sys.executable, "-m", "neobench", *map(str, argv)],
            stdout=handle,
            stderr=subprocess.STDOUT,
        )


def stop(child) -> None:
    if child.poll() is None:
        child.send_signal(signal.SIGKILL)
    child.wait()


def start_eval(model, mirror, tmp_path, results, log):
    """`neobench eval` of two small STS tasks in a child process writing to ``log``."""
    return start(
        [
            "eval", "--model", model, "--data-dir", mirror, "--tasks", "BIOSSES,STS12",
            "--results", results, "--cache-dir", tmp_path / "cache", "--device", "cpu",
        ],
        log,
    )  # fmt: skip


def test_finetune_writes_step_lines_to_a_log_while_it_runs(tiny_bert, tmp_path):
    log = tmp_path / "finetune.log"
    child = start(
        [
            "finetune", "--model", tiny_bert, "--output", tmp_path / "out", "--device", "cpu",
            "--data-dir", SHARED / "data" / "finetune", "manifest=sample-local",
            "max_seq_length=32", "max_steps=400", "batch_size=8", "checkpoint_every=1000",
        ],
        log,
    )  # fmt: skip
    try:
        content = wait_for(log, "step 8/400", child)
        assert child.poll() is None  # read while the run is going
    finally:
        stop(child)
    lines = [line for line in content.splitlines() if line.startswith("step ")]
    assert lines[0].startswith("step 1/400  loss ")
    assert all("elapsed 0:" in line and "ETA 0:" in line for line in lines)


def test_eval_writes_task_lines_while_it_runs_and_ends_cleanly_on_sigterm(
    tiny_bert, mirror, tmp_path
):
    log = tmp_path / "eval.log"
    results = tmp_path / ("a-results-folder-with-a-long-name-" * 3) / "eval"
    child = start_eval(tiny_bert, mirror, tmp_path, results, log)
    try:
        content = wait_for(log, "started STS12 (2/2)", child)
        assert child.poll() is None  # read while the run is going
        # What Slurm sends before SIGKILL: the run ends like Ctrl-C, not as a dead process.
        # Twice, as under Slurm (slurmstepd and the job's wrapper both pass a signal on): the
        # second must not cut the first one's clean-up short with a traceback.
        child.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=120) == 143
    finally:
        stop(child)
    assert "started BIOSSES (1/2)" in content
    (done,) = [line for line in content.splitlines() if "evaluated BIOSSES" in line]
    assert done.split()[2].startswith("0.")  # the score, on the same line
    # The results path is printed whole on one line, never cut at 80 columns.
    assert any(str(results) in line for line in content.splitlines())
    said = log.read_text()
    assert "terminated (SIGTERM): finished tasks are saved" in said and "Traceback" not in said
    (card,) = results.rglob("run-*.yaml")
    assert "status: interrupted" in card.read_text()
    assert not list(results.rglob(".neobench-staging"))
    assert list(results.rglob("BIOSSES.json")) and not list(results.rglob("STS12.json"))


def test_plain_step_lines_are_bounded_and_end_at_the_last_step():
    stream = io.StringIO()
    progress = StepProgress(Console(file=stream), interval_s=3600)
    for step in range(1, 201):
        progress({"step": step, "max_steps": 200, "loss": 1 / step, "dataset": "SNLI",
                  "tokens_per_s": 1234.5, "elapsed_s": step * 0.5})  # fmt: skip
    lines = stream.getvalue().splitlines()
    assert [int(line.split()[1].split("/")[0]) for line in lines] == [1, *range(4, 201, 4)]
    assert lines[-1] == "step 200/200  loss 0.0050  SNLI  1,234 tok/s  elapsed 0:01:40  ETA 0:00:00"


def test_eval_heartbeat_while_a_task_runs():
    stream = io.StringIO()
    progress = EvalProgress(Console(file=stream), heartbeat_s=0.05)
    progress.start(1, "results")
    progress.task_started("ArguAna")
    time.sleep(0.3)
    outcome = SimpleNamespace(
        task="ArguAna", status="evaluated", main_score=0.5, seconds=0.3, error=None
    )
    progress.task_done(outcome)
    progress.stop()
    text = stream.getvalue()
    assert "started ArguAna (1/1)" in text and "running ArguAna: 0:00:00" in text
    assert text.splitlines()[-1] == task_line(outcome) and "0.5000  (0s)" in text
