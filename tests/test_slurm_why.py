"""How a Slurm job that ended without its output ended (study/launchers/slurm.py's why): Slurm's
own word, else the line of the job's stderr, kept in its record. No cluster needed."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from neobench.core.errors import NeobenchError
from neobench.study import store
from neobench.study.launchers import slurm
from neobench.study.plan import Job, Plan

STEPD = "slurmstepd: error: *** JOB 12 ON n1 CANCELLED AT 2025-01-01T00:00:00 DUE TO TIME LIMIT ***"


def ended_job(tmp_path: Path, stderr: str) -> tuple[Plan, Job, store.JobRecord]:
    job = Job("eval", "eval/a/1of1", ["eval"], tmp_path / "r", tmp_path / "logs" / "a.log", None)
    plan = Plan(SimpleNamespace(output=tmp_path), [], [job])
    rec = store.JobRecord(job.key, "queued", str(job.log), launcher="slurm")
    rec.launcher_job_id = "12"
    store.write_record(plan, job, rec)
    err = tmp_path / "slurm" / "12" / "12_0_log.err"
    err.parent.mkdir(parents=True)
    err.write_text(f"REQUEUED earlier DUE TO JOB REQUEUE\n{stderr}\n")
    return plan, job, rec


def no_accounting(argv: list[str]) -> str:
    if argv[0] == "scontrol":
        return "JobId=12 JobName=s-eval JobState=TIMEOUT Reason=TimeLimit"
    raise NeobenchError("sacct: no accounting")


def test_slurm_says_the_state_and_the_stderr_the_line_and_the_record_keeps_both(
    tmp_path, monkeypatch
):
    plan, job, rec = ended_job(tmp_path, STEPD)
    monkeypatch.setattr(slurm, "_slurm_command", no_accounting)
    said = slurm.why(plan, job, rec)
    assert said == f"TIMEOUT: {STEPD}"

    def forgotten(argv: list[str]) -> str:
        raise NeobenchError("Slurm has forgotten the job")

    monkeypatch.setattr(slurm, "_slurm_command", forgotten)
    kept = store.read_record(plan, job)
    assert slurm.why(plan, job, kept) == said


def test_without_slurm_the_stderr_line_names_the_state(tmp_path, monkeypatch):
    monkeypatch.setattr(slurm, "_slurm_command", lambda argv: "")
    plan, job, rec = ended_job(tmp_path, "slurmstepd: error: Exceeded job memory limit")
    assert slurm.why(plan, job, rec).startswith("OUT_OF_MEMORY: slurmstepd: error: Exceeded")
    plan, job, rec = ended_job(tmp_path / "quiet", "")
    assert slurm.why(plan, job, rec) == "ended without its output (no reason found)"
