"""What runs inside a study's Slurm job (neobench/study/launchers/slurm_job.py), without Slurm."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import pytest
from conftest import stopping_command, wait_for

from neobench.core import cards
from neobench.study.jobs import Job
from neobench.study.kinds import JobKind
from neobench.study.launchers.slurm_job import JobCommand, JobFailed, _requeue


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

    def progress(output: Path, tasks: list[str]) -> int:
        return JobKind.EVAL.progress(_job("eval", output, tasks))

    assert progress(tmp_path, tasks) == 2
    assert progress(tmp_path, ["SciFact"]) == 0  # other jobs' results do not count
    assert progress(tmp_path / "missing", tasks) == 0


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
    with pytest.raises(
        JobFailed, match=r"CANCELLED \(cancelled\?\) while it stopped for its time limit"
    ):
        _requeue("finetune/m-seed0", 10, 20)
    assert scontrol.read_text().split("\n")[:-1] == ["show job -o 41"]  # no requeue

    monkeypatch.setenv("STATE", "RUNNING")  # the notice alone: requeued, this window ends
    with pytest.raises(SystemExit):
        _requeue("finetune/m-seed0", 10, 20)
    assert scontrol.read_text().split("\n")[-2] == "requeue 41"


def test_a_scancel_while_the_job_stops_reads_completing_and_is_not_requeued(scontrol, monkeypatch):
    """Found by the full-size rehearsal: Slurm reports a scancel'd job as COMPLETING (not
    CANCELLED) while its processes stop, and the job's requeue undid the scancel: only a job
    Slurm calls RUNNING is requeued."""
    monkeypatch.setenv("STATE", "COMPLETING")
    with pytest.raises(JobFailed, match="COMPLETING"):
        _requeue("finetune/m-seed0", 10, 20)
    assert "requeue 41" not in scontrol.read_text()


def _job(kind: str, output: Path, tasks: list[str] | None = None) -> Job:
    key = f"{kind}/m-seed0" + ("/1of1" if kind == "eval" else "")
    return Job(kind, key, [], output, output / "job.log", None, tasks=tasks or [])


def _command(tmp_path: Path, script: str, kind: str = "finetune") -> JobCommand:
    """A JobCommand whose command is a small Python program (the job's own process is this
    test's: the signals below are sent to it, as Slurm sends them to the job)."""
    argv = [sys.executable, "-c", script]
    return JobCommand(argv, str(tmp_path), _job(kind, tmp_path / "out"))


class Moments(threading.Thread):
    """Sends this process (the job's, as Slurm sends the job) the notice once the command runs,
    then SIGTERM once the command is saving on the notice, and lets the save end once the job
    has seen the SIGTERM: each step on the event before it, never after a time."""

    def __init__(self, job: JobCommand, folder: Path) -> None:
        super().__init__(daemon=True)
        self.job, self.folder, self.error = job, folder, None
        self.start()

    def run(self) -> None:
        try:
            wait_for(lambda: (self.folder / "started").is_file(), "the command to start")
            os.kill(os.getpid(), signal.SIGUSR2)
            wait_for(lambda: (self.folder / "stopping").is_file(), "the notice to reach it")
            os.kill(os.getpid(), signal.SIGTERM)
            wait_for(lambda: signal.SIGTERM in self.job.told, "the job to see the SIGTERM")
        except AssertionError as error:
            self.error = error
        finally:
            (self.folder / "release").touch()  # the command's save ends (also on a failure)


# Stops on SIGTERM/SIGUSR2 as neobench's commands do; its save lasts until the test releases
# it, so the next signal comes meanwhile.
STOPPING = stopping_command(run_s=300)


def test_sigterm_during_a_window_is_never_turned_into_a_requeue(tmp_path, scontrol, monkeypatch):
    """The rehearsal's scancel of a fine-tune came just after the notice; the job requeued
    itself 8 more times. A SIGTERM (scancel, preemption) stops the job without a requeue, even
    when the window moved it forward and Slurm still says RUNNING."""
    monkeypatch.setenv("STATE", "RUNNING")
    job = _command(tmp_path, STOPPING)
    moments = Moments(job, tmp_path)
    with pytest.raises(JobFailed, match=r"stopped by SIGTERM .* not requeued"):
        job()
    moments.join(timeout=60)
    assert moments.error is None, moments.error
    assert job.told == [signal.SIGUSR2, signal.SIGTERM]
    assert (tmp_path / "out" / "checkpoints" / "checkpoint-7").is_dir()  # it moved forward
    assert "requeue" not in (scontrol.read_text() if scontrol.exists() else "")


def test_a_signal_before_the_command_starts_is_the_job_s_and_starts_nothing(
    tmp_path, scontrol, monkeypatch
):
    """A notice that comes while the job checks its output, before its command starts, is the
    job's own (before, it went to submitit's handler, which requeues whatever the progress):
    the command is not started, and the job fails without a requeue."""
    monkeypatch.setenv("STATE", "RUNNING")
    checked, sent = JobCommand._progress, []

    def progress_then_notice(self: JobCommand) -> int:  # the notice comes during the check
        if not sent:
            sent.append(os.kill(os.getpid(), signal.SIGUSR2))
        return checked(self)

    monkeypatch.setattr(JobCommand, "_progress", progress_then_notice)
    outside: list[int] = []  # what submitit's handler would have got

    def submitits(signum: int, frame: object) -> None:
        outside.append(signum)

    before = signal.signal(signal.SIGUSR2, submitits)
    try:
        job = _command(tmp_path, "open('ran', 'w').close()")
        with pytest.raises(JobFailed, match="the time limit came before the job made any progress"):
            job()
        assert job.told == [signal.SIGUSR2] and not outside
        assert not (tmp_path / "ran").exists()  # the command was not started
        assert not scontrol.exists() or "requeue" not in scontrol.read_text()
        assert signal.getsignal(signal.SIGUSR2) is submitits  # given back at the job's end
    finally:
        signal.signal(signal.SIGUSR2, before)


def test_a_job_complete_when_the_notice_comes_ends_normally(tmp_path, scontrol, monkeypatch):
    """The rehearsal's NeoBERT-seed1 had finished its last step when the notice came: it was
    requeued, and the next window's command refused the finished folder (exit 2). A job whose
    output is complete by the study's own test ends normally, whatever its command's code."""
    monkeypatch.setenv("STATE", "RUNNING")
    finished = (
        "import os, sys; os.makedirs('out', exist_ok=True); "
        f"open('out/{cards.FINETUNE_CARD}', 'w').write('status: complete\\n'); sys.exit(140)"
    )
    _command(tmp_path, finished)()  # no JobFailed, no SystemExit (requeue)
    assert not scontrol.exists() or "requeue" not in scontrol.read_text()
    # A window that finds the work done runs nothing at all.
    _command(tmp_path, "import sys; sys.exit(3)")()


def test_eval_progress_counts_only_its_own_model_and_revision(tmp_path):
    """Other seeds of the same model (other revisions) and other models write the same task
    names into the study's results: only the job's own folder is its progress."""
    model = tmp_path / "models" / "m-seed0"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    from neobench.core.results import model_folder
    from neobench.models.fingerprint import fingerprint

    own = model_folder(tmp_path, "study/m") / fingerprint(model)
    for folder in (
        own,
        model_folder(tmp_path, "study/m") / "local-other",
        tmp_path / "results" / "study__n" / "r",
    ):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "BIOSSES.json").write_text("{}")
    job = JobCommand(["true"], str(tmp_path), _job("eval", tmp_path, ["BIOSSES", "STS16"]))
    job.job.model_name, job.job.source = "study/m", str(model)
    assert job._progress() == 1
    (own / "STS16.json").write_text("{}")
    (tmp_path / "results" / "study__n" / "r" / "STS16.json").write_text("{}")
    assert job._progress() == 2
    # Progress is not completeness: these files are no results (study/kinds.eval_done decides).
    job.benchmark = "MTEB(eng, v1)"
    assert not job._complete()


@pytest.mark.parametrize(
    ("script", "said"),
    [
        # A fine-tune whose card was left interrupted, yet its command said 0: its dependants
        # (afterok) must not start on it.
        (
            "import os; os.makedirs('out', exist_ok=True); "
            f"open('out/{cards.FINETUNE_CARD}', 'w').write('status: interrupted\\n')",
            "its command exited 0, but its fine-tune card says interrupted",
        ),
        ("pass", "its command exited 0, but it wrote no fine-tune card"),
        (
            "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
            r"its command was killed by SIGKILL \(exit code -9\)",
        ),
        ("import sys; sys.exit(130)", r"its command was stopped by SIGINT \(exit code 130\)"),
        ("import sys; sys.exit(2)", "its command exited with code 2"),
    ],
)
def test_a_fine_tune_job_fails_unless_it_ended_with_a_complete_card(tmp_path, script, said):
    with pytest.raises(JobFailed, match=f"finetune/m-seed0: {said}; its log says why"):
        _command(tmp_path, script)()


def test_an_eval_job_that_exits_0_ends_normally(tmp_path):
    """An eval's exit status is its word on its tasks (no result file is read here)."""
    _command(tmp_path, "pass", kind="eval")()


def test_the_command_s_threads_follow_the_job_s_cpus_unless_the_user_set_them(
    tmp_path, monkeypatch
):
    """torch in the command starts as many threads as SLURM_CPUS_PER_TASK says (the study's
    slurm.<kind>.cpus), not one per core of the node; OMP_NUM_THREADS set by the user wins."""
    report = (
        "import torch, pathlib; pathlib.Path('threads').write_text(str(torch.get_num_threads()))"
    )
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    _command(tmp_path, report, kind="eval")()
    assert (tmp_path / "threads").read_text() == "1"
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "3")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    _command(tmp_path, report, kind="eval")()
    assert (tmp_path / "threads").read_text() == "2"
