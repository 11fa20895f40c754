"""How a Slurm job that ended without its output ended, and the line that says why.

Slurm's own word first: `sacct` (where the cluster keeps accounting), else `scontrol show job`
(which knows a job for MinJobAge after its end, 5 minutes by default). Then the line: slurmstepd
writes "*** JOB 12 ON node CANCELLED AT ... DUE TO TIME LIMIT ***" (or PREEMPTION, NODE FAILURE)
into the job's stderr, the kernel's OOM killer is reported there too, a job that stopped itself
says why in submitit's log, and the command's own log ends with neobench's `error:` line. What is
found is kept in the job's record, so `study status` still says it once Slurm has forgotten the job.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from neobench.core.errors import NeobenchError
from neobench.study import store
from neobench.study.plan import Job, Plan

# Slurm's states of a job that has ended (squeue's long names).
ENDED = (
    "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "FAILED", "BOOT_FAIL",
    "DEADLINE", "COMPLETED",
)  # fmt: skip
# A line of the job's stderr -> the state it shows (when Slurm no longer says).
_STEPD = re.compile(r"\*\*\* JOB \S+ ON \S+ CANCELLED AT \S+(?: DUE TO ([A-Z ]+?))? \*\*\*")
_DUE = {"TIME LIMIT": "TIMEOUT", "PREEMPTION": "PREEMPTED", "NODE FAILURE": "NODE_FAIL"}
_OOM = ("oom_kill event", "oom-kill", "Exceeded job memory limit", "Out Of Memory")
_OURS = ("JobFailed: ", "UncompletedJobError: ")


def why(plan: Plan, job: Job, rec: store.JobRecord, slurm: Callable[[list[str]], str]) -> str:
    """'STATE: the line that says why' for a job Slurm no longer runs, as far as known; kept in
    its record. ``slurm`` runs one of Slurm's commands (raising NeobenchError when it fails)."""
    if rec.ended_as is None or rec.why is None:
        state, line = _final_state(str(rec.launcher_job_id), slurm), _line(plan, job, rec)
        rec.ended_as = rec.ended_as or state or _state_of(line)
        rec.why = rec.why or line
        if rec.ended_as or rec.why:
            store.write_record(plan, job, rec)
    parts = [p for p in (rec.ended_as, rec.why) if p]
    return ": ".join(parts) if parts else "ended without its output (no reason found)"


def _final_state(job_id: str, slurm: Callable[[list[str]], str]) -> str | None:
    for argv in (
        ["sacct", "-n", "-P", "-X", "-j", job_id, "-o", "State"],
        ["scontrol", "show", "job", "-o", job_id],
    ):
        try:
            said = slurm(argv)
        except NeobenchError:
            continue  # no accounting, or the controller has forgotten the job
        found = re.search(r"JobState=(\S+)", said) if argv[0] == "scontrol" else None
        word = found.group(1) if found else (said.split() or [""])[0]
        if word in ENDED:
            return word
    return None


def _line(plan: Plan, job: Job, rec: store.JobRecord) -> str | None:
    """The most telling line: Slurm's (stderr of the job), the job's own reason (submitit's log),
    the last error line of the command's log."""
    folder = plan.study.output / "slurm" / str(rec.launcher_job_id)
    stderr = _lines(folder / f"{rec.launcher_job_id}_0_log.err")
    for line in reversed(stderr):
        if "DUE TO JOB REQUEUE" in line:
            continue  # an earlier window, put back in the queue: not how the job ended
        if _STEPD.search(line) or any(mark in line for mark in _OOM):
            return line.strip()
    for line in reversed(stderr):
        for mark in _OURS:
            if mark in line:
                return line.split(mark, 1)[1].strip()
    for line in reversed(_lines(job.log)):
        if line.startswith("error:"):
            return line.strip()
    return None


def _state_of(line: str | None) -> str | None:
    if not line:
        return None
    if any(mark in line for mark in _OOM):
        return "OUT_OF_MEMORY"
    found = _STEPD.search(line)
    if found:
        return _DUE.get(found.group(1) or "", "CANCELLED")
    return None


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []
