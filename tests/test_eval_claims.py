"""Two evals of one run (evaluation/claims.py): a task is evaluated only under its claim, so a
second `neobench eval` into the same results folder skips what the first is evaluating, runs the
rest, then waits and takes the first's result; together they evaluate each task once, and each
result file is claimed ("evaluated") by one run card. A claim ends with its process (SIGKILL
too) and is never kept by a forked child.

The evals are real processes; the first is paused inside a task (under its claim) by its
progress hook until the test lets it go, and the test moves on only on the lines the processes
print, so every step happens in the one order the assertions describe."""

from __future__ import annotations

import errno
import json
import logging
import multiprocessing
import os
import queue
import socket
import subprocess
import sys
import threading

import pytest
import yaml

from neobench.core import flock, results
from neobench.evaluation.claims import Claim

TIMEOUT_S = 600  # a bound on a hung process, never a pace the test depends on

# `neobench eval` as a library call whose progress hook stops at each task's start (its claim
# held) until a line arrives on stdin.
GATED = """
import sys
from neobench.evaluation.outcomes import Reporter
from neobench.evaluation.runner import EvalConfig, run_eval
from neobench.protocol.tasks import build_registry

class Gate(Reporter):
    def task_started(self, task):
        print("started", task, flush=True)
        sys.stdin.readline()

    def task_done(self, outcome):
        print(outcome.status, outcome.task, flush=True)

build_registry()
model, mirror, root, tasks = sys.argv[1:5]
cfg = EvalConfig(model=model, model_name="t/minilm", tasks=tasks.split(","), data_dir=mirror,
                 results=root, device="cpu")
run_eval(cfg, Gate())
print("finished", flush=True)
"""


class Lines:
    """A process's output (stdout and stderr), line by line, read by a thread."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.seen: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._ended = False
        threading.Thread(target=self._read, args=(process,), daemon=True).start()

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _next(self) -> str | None:
        line = None if self._ended else self._lines.get(timeout=TIMEOUT_S)
        self._ended = line is None
        if line is not None:
            self.seen.append(line)
        return line

    def until(self, start: str) -> str:
        """The first line from here on that starts with ``start``; fails on the output's end."""
        while (line := self._next()) is not None:
            if line.startswith(start):
                return line
        pytest.fail(f"ended before a line starting {start!r}:\n" + "\n".join(self.seen))

    def all(self) -> list[str]:
        """Every line, once the output has ended."""
        while self._next() is not None:
            pass
        return self.seen


def _start(command: list[str], **kwargs) -> tuple[subprocess.Popen, Lines]:
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, **kwargs)  # fmt: skip
    return process, Lines(process)


def _gated(minilm, mirror, root, tasks: str) -> tuple[subprocess.Popen, Lines]:
    command = [sys.executable, "-c", GATED, str(minilm), str(mirror), str(root), tasks]
    return _start(command, stdin=subprocess.PIPE)


def _cli(minilm, mirror, root, tasks: str) -> tuple[subprocess.Popen, Lines]:
    command = [sys.executable, "-m", "neobench", "eval", "--model", str(minilm), "--model-name",
               "t/minilm", "--tasks", tasks, "--results", str(root), "--data-dir", str(mirror),
               "--device", "cpu"]  # fmt: skip
    return _start(command)


def _cards(root) -> dict[int, dict]:
    """The run cards under ``root`` by their writer's pid."""
    found = [yaml.safe_load(p.read_text()) for p in results.all_card_paths(root)]
    return {card["owner"]["pid"]: card for card in found}


def _statuses(card: dict) -> dict[str, str]:
    return {task: entry["status"] for task, entry in card["tasks"].items()}


@pytest.mark.slow
def test_two_evals_of_one_run_evaluate_each_task_once(tmp_path, minilm, mirror):
    root = tmp_path / "results"
    first, first_lines = _gated(minilm, mirror, root, "BIOSSES,STS16")
    second = None
    try:
        first_lines.until("started BIOSSES")  # the first holds BIOSSES' claim, paused in it
        second, second_lines = _cli(minilm, mirror, root, "BIOSSES,STS16")
        skipped = second_lines.until("warning: BIOSSES is being evaluated by another")
        assert f"(pid {first.pid} here, since " in skipped
        # The second evaluated STS16 meanwhile, and now waits for BIOSSES.
        waiting = second_lines.until("warning: waiting for another `neobench eval`")
        assert f"pid {first.pid} here" in waiting and "to finish BIOSSES" in waiting
        first.stdin.write("go\n")
        first.stdin.close()
        assert second.wait(timeout=TIMEOUT_S) == 0, "\n".join(second_lines.all())
        assert first.wait(timeout=TIMEOUT_S) == 0, "\n".join(first_lines.all())
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
    said_first, said_second = first_lines.all(), second_lines.all()
    assert {"evaluated BIOSSES", "cached STS16", "finished"} <= set(said_first)
    listed = [line.split()[:2] for line in said_second]  # the progress lines: status, task
    assert ["evaluated", "STS16"] in listed and ["cached", "BIOSSES"] in listed
    # Each result file is claimed by one card; the other card found it done.
    cards = _cards(root)
    assert _statuses(cards[first.pid]) == {"BIOSSES": "evaluated", "STS16": "cached"}
    assert _statuses(cards[second.pid]) == {"BIOSSES": "cached", "STS16": "evaluated"}
    assert [card["status"] for card in cards.values()] == ["complete", "complete"]
    one, other = (card["tasks"] for card in cards.values())
    assert {t: e["main_score"] for t, e in one.items()} == {
        t: e["main_score"] for t, e in other.items()
    }
    # What mteb reads back; both tasks' run settings (merged by two processes) kept.
    import mteb

    loaded = mteb.ResultCache(root).load_results()
    held = sorted(r.task_name for m in loaded.model_results for r in m.task_results)
    assert held == ["BIOSSES", "STS16"]
    (folder,) = results.run_folders(root)
    settings = [
        json.loads(line) for line in (folder / "run_settings.jsonl").read_text().splitlines()
    ]
    assert sorted(entry["task"] for entry in settings) == ["BIOSSES", "STS16"]
    assert not list(root.rglob("*.lock"))  # every claim let go


@pytest.mark.slow
def test_a_claim_ends_with_its_killed_process_and_the_waiting_eval_does_the_task(
    tmp_path, minilm, mirror
):
    root = tmp_path / "results"
    first, first_lines = _gated(minilm, mirror, root, "BIOSSES")
    try:
        first_lines.until("started BIOSSES")
        second, second_lines = _cli(minilm, mirror, root, "BIOSSES")
        second_lines.until("warning: waiting for another `neobench eval`")
    finally:
        first.kill()  # SIGKILL: no clean-up runs; its claim file stays on disk
        first.wait()
    assert second.wait(timeout=TIMEOUT_S) == 0, "\n".join(second_lines.all())
    assert ["evaluated", "BIOSSES"] in [line.split()[:2] for line in second_lines.all()]
    cards = _cards(root)
    assert _statuses(cards[second.pid]) == {"BIOSSES": "evaluated"}
    assert cards[first.pid]["tasks"] == {}  # the killed one wrote no result
    assert not list(root.rglob("*.lock"))


# A process that claims TASK in the run folder FOLDER, says so, and holds it until killed.
HOLD = """
import signal, sys
from pathlib import Path
from neobench.evaluation.claims import Claim
claim = Claim(Path(sys.argv[1]), sys.argv[2])
assert claim.take()
print("held", flush=True)
signal.pause()  # until the test kills it
"""


def test_a_claim_held_by_a_live_process_is_refused_naming_it_then_taken_over(tmp_path):
    (tmp_path / results.CARDS).mkdir()
    other = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path), "BIOSSES"],
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert other.stdout.readline().strip() == "held"
        claim = Claim(tmp_path, "BIOSSES")
        assert not claim.take()
        assert claim.who().startswith(f"another `neobench eval` (pid {other.pid} here, since ")
        assert Claim(tmp_path, "STS16").take()  # another task of the run is free
    finally:
        other.kill()
        other.wait()
    # Killed (no clean-up ran, its file is left): the claim ended with it.
    assert (tmp_path / results.CARDS / "BIOSSES.lock").is_file()
    with Claim(tmp_path, "BIOSSES") as claim:
        assert claim.take()
        assert flock.holder(claim.path)["pid"] == os.getpid()
    assert not (tmp_path / results.CARDS / "BIOSSES.lock").exists()  # let go: removed


def _child(running, done) -> None:
    running.set()  # after the fork's hooks ran
    done.wait(TIMEOUT_S)


def test_a_forked_child_does_not_keep_its_parents_lock(tmp_path):
    """The tokenizer processes are forked while a task's claim is held: a child must not hold
    the lock on after its parent let it go (a waiting eval would wait for the child)."""
    path = tmp_path / "x.lock"
    lock = flock.acquire(path)
    context = multiprocessing.get_context("fork")
    running, done = context.Event(), context.Event()
    child = context.Process(target=_child, args=(running, done), daemon=True)
    child.start()
    try:
        assert running.wait(TIMEOUT_S)
        # Let go without removing the file, as a killed parent would: only a copy of the handle
        # in the child could still hold the lock on this file.
        flock._held.discard(lock.handle)
        os.close(lock.handle)
        again = flock.acquire(path)  # raises Held if the child kept the lock
        assert again.previous["pid"] == os.getpid()
        flock.release(again)
    finally:
        done.set()
        child.join()


def test_a_held_lock_names_its_holder_on_another_host(tmp_path):
    assert flock.describe({"host": "node-17", "pid": 5, "started": "t"}) == (
        "pid 5 on node-17, since t"
    )
    assert flock.describe({"host": socket.gethostname(), "pid": 5}) == "pid 5 here, since ?"


def test_where_files_cannot_be_locked_tasks_go_on_unclaimed_with_one_warning(
    tmp_path, monkeypatch, caplog
):
    def refuse(handle, operation):
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(flock.fcntl, "flock", refuse)
    (tmp_path / results.CARDS).mkdir()
    with caplog.at_level(logging.WARNING, logger="neobench.evaluation.claims"):
        for task in ("BIOSSES", "STS16"):
            with Claim(tmp_path, task) as claim:
                assert claim.take()
    (warning,) = caplog.messages
    assert "this file system cannot lock files (Operation not supported)" in warning
    assert "so tasks are not claimed" in warning
    assert not list(tmp_path.rglob("*.lock"))
