"""One runner per study output (study/lock.py): a second `study run` of the same study while
the first runs reports who runs it and starts nothing; a lock left by a runner that is gone is
taken over; a job a killed runner left running is not started again beside it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading

import pytest
import yaml
from conftest import REPO, wait_for

from neobench.core.errors import NeobenchError
from neobench.study import lock


def _holder(tmp_path, pid, host=None):
    tmp_path.mkdir(parents=True, exist_ok=True)
    body = {"host": host or socket.gethostname(), "pid": pid, "started": "2026-11-25T00:00:00"}
    (tmp_path / lock.LOCK).write_text(json.dumps(body))


# A process that holds the lock file of FOLDER as a runner does (an OS lock), naming HOST.
HOLD = """
import fcntl, json, os, sys
path = os.path.join(sys.argv[1], "neobench_runner.lock")
handle = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
fcntl.flock(handle, fcntl.LOCK_EX)
os.write(handle, json.dumps({"host": sys.argv[2], "pid": os.getpid(), "started": "t"}).encode())
print("held", flush=True)
sys.stdin.read()  # held until the test kills it
"""


def _held_by(tmp_path, host):
    tmp_path.mkdir(parents=True, exist_ok=True)
    other = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path), host],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert other.stdout.readline().strip() == "held"
    return other


def test_a_live_runner_keeps_the_study(tmp_path):
    other = _held_by(tmp_path, socket.gethostname())
    try:
        refused = pytest.raises(NeobenchError, match=f"pid {other.pid} here")
        with refused, lock.runner(tmp_path, "s.yaml"):
            pass
    finally:
        other.kill()
        other.wait()
    assert json.loads((tmp_path / lock.LOCK).read_text())["pid"] == other.pid  # left as it was
    # Its process killed (SIGKILL: no clean-up ran), the lock ends with it: taken over.
    with lock.runner(tmp_path, "s.yaml"):
        assert json.loads((tmp_path / lock.LOCK).read_text())["pid"] == os.getpid()


def test_a_lock_of_a_runner_that_is_gone_is_taken_over(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    _holder(tmp_path, gone.pid)
    with lock.runner(tmp_path, "s.yaml"):
        assert json.loads((tmp_path / lock.LOCK).read_text())["pid"] == os.getpid()
    assert not (tmp_path / lock.LOCK).exists()  # released


def test_a_lock_held_on_another_host_is_reported(tmp_path):
    other = _held_by(tmp_path, "node-17")
    try:
        with pytest.raises(NeobenchError, match=r"on node-17"), lock.runner(tmp_path, "s"):
            pass
    finally:
        other.kill()
        other.wait()


# Many runners let go at one moment on the lock a killed runner left: each says whether it got
# it; the one that did holds it until the test has heard every other one.
RACE = """
import sys
from pathlib import Path
from neobench.core.errors import NeobenchError
from neobench.study import lock
print("ready", flush=True)
sys.stdin.readline()  # go: all of them at once, past their imports
try:
    with lock.runner(Path(sys.argv[1]), "s.yaml"):
        print("got it", flush=True)
        sys.stdin.readline()  # held until the test lets go (closes stdin)
except NeobenchError:
    print("refused", flush=True)
"""


def test_runners_racing_for_a_stale_lock_let_exactly_one_in(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    _holder(tmp_path, gone.pid)
    racers = [subprocess.Popen([sys.executable, "-c", RACE, str(tmp_path)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True) for _ in range(6)]  # fmt: skip
    # A racer that hangs is killed: its line reads empty and the test fails instead of hanging.
    watchdog = threading.Timer(600, lambda: [r.kill() for r in racers])
    watchdog.start()
    try:
        assert [r.stdout.readline().strip() for r in racers] == ["ready"] * 6
        for racer in racers:
            racer.stdin.write("go\n")
            racer.stdin.flush()
        said = sorted(r.stdout.readline().strip() for r in racers)
        assert said == ["got it"] + ["refused"] * 5
    finally:
        for racer in racers:
            racer.stdin.close()  # the holder lets go
            racer.wait()
        watchdog.cancel()


@pytest.mark.slow
def test_two_runners_at_once_run_each_job_once(tmp_path, mirror):
    data = yaml.safe_load((REPO / "studies" / "tiny.yaml").read_text())
    data["models"] = data["models"][:1]  # MiniLM evaluated as it is: an eval and the table
    data |= {"finetune": "none", "output": str(tmp_path / "out"), "baseline": None}
    data["eval"] |= {"tasks": ["BIOSSES"], "shards": 1}
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump({k: v for k, v in data.items() if v is not None}))
    env = {**os.environ, "NEOBENCH_DATA_DIR": str(mirror)}
    command = [sys.executable, "-m", "neobench", "study", "run", str(study)]
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    held = tmp_path / "out" / lock.LOCK

    def holding() -> bool:  # the first runner has the lock: its pid is in the file
        assert first.poll() is None, first.communicate()
        try:
            return json.loads(held.read_text())["pid"] == first.pid
        except (OSError, ValueError, KeyError):
            return False

    wait_for(holding, "the first runner to hold the study's lock")
    # Stopped, the first runner holds the lock for as long as the second one takes, however
    # slow either is; it goes on afterwards.
    os.kill(first.pid, signal.SIGSTOP)
    try:
        second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    _, err = first.communicate(timeout=600)
    assert first.returncode == 0, err
    assert second.returncode != 0 and "being run by another" in second.stderr
    assert f"pid {first.pid}" in second.stderr
    cards = list((tmp_path / "out" / "results").rglob("neobench/run-*.yaml"))
    assert len(cards) == 1  # the eval ran once
    assert not held.exists()


def test_a_job_whose_process_is_gone_is_failed_with_why_and_its_card_says_so(
    tmp_path, golden_runs, mirror
):
    """SIGKILL leaves a fine-tune's card `running`: once its launcher knows the job ended, status
    says failed and why, and the card says interrupted (no reader takes it for a live run)."""
    from test_study import write_study

    from neobench.study import report, store
    from neobench.study.plan import build_plan

    path = write_study(tmp_path / "study", data_dir=str(mirror))
    plan = build_plan(path, str(tmp_path / "out"))
    job = next(j for j in plan.jobs if j.kind == "finetune")
    card = yaml.safe_load((golden_runs / "finetune-card.yaml").read_text())  # a real, complete one
    card["status"] = "running"
    job.output.mkdir(parents=True)
    (job.output / "neobench_run_card.yaml").write_text(yaml.safe_dump(card))
    gone = subprocess.Popen(["true"])
    gone.wait()
    job.log.parent.mkdir(parents=True)
    job.log.write_text("# started\nstep 1/4  loss 0.5\n")
    rec = store.JobRecord(job.key, "running", str(job.log), host=socket.gethostname())
    rec.pid = gone.pid
    store.write_record(plan, job, rec)
    assert store.state(plan, job) == "failed"
    assert report.failures(plan) == [f"{job.key}: its process is gone"]
    after = yaml.safe_load((job.output / "neobench_run_card.yaml").read_text())
    assert after["status"] == "interrupted: its process is gone"
