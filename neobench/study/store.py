"""The job store: one record per launched job, OUTPUT/jobs/<key>.json (state, exit code, host,
pid, the launcher's job id, log), and a job's state: from its outputs first, its record second.
Every launcher writes records; `study status` reads them, asking each record's launcher what
became of its job.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from neobench.core.card_io import write_text_atomic
from neobench.study import launchers
from neobench.study.plan import Job, Plan

RECORDS = "jobs"


@dataclass
class JobRecord:
    key: str
    state: str  # running | queued | failed | done
    log: str
    launcher: str = "local"
    started: str | None = None
    ended: str | None = None
    returncode: int | None = None
    host: str | None = None
    pid: int | None = None
    launcher_job_id: str | None = None  # the id the launcher's scheduler gave it (Slurm's)
    # How it ended, when not by itself: Slurm's state (TIMEOUT, CANCELLED, ...); locally the
    # signal that stopped the runner or killed the job, or an exit 0 without its output.
    ended_as: str | None = None
    why: str | None = None  # the line of its logs that says why it ended without its output


# Records written before launcher_job_id named the Slurm job id so.
OLD_KEYS = {"slurm_job_id": "launcher_job_id"}


def record_path(plan: Plan, job: Job) -> Path:
    return plan.study.output / RECORDS / (job.key.replace("/", "-") + ".json")


def read_record(plan: Plan, job: Job) -> JobRecord | None:
    try:
        data = json.loads(record_path(plan, job).read_text())
        for old, new in OLD_KEYS.items():
            if old in data:
                data.setdefault(new, data.pop(old))
        return JobRecord(**data)
    except (OSError, ValueError, TypeError, AttributeError):
        return None  # never launched (or a record from elsewhere): the job is simply pending


def write_record(plan: Plan, job: Job, rec: JobRecord) -> None:
    write_text_atomic(record_path(plan, job), json.dumps(asdict(rec), indent=1) + "\n")


Queues = dict[str, dict[str, str]]  # launcher name -> its queue (its job id -> its state)


def queues(plan: Plan) -> Queues:
    """The queue of each launcher that some pending job of the plan was launched with, read
    once (squeue for Slurm); empty when none was."""
    names = {rec.launcher for job in plan.pending if (rec := read_record(plan, job))}
    known = sorted(names & set(launchers.LAUNCHERS))
    return {name: launchers.launcher(name).queue() for name in known}


def state(plan: Plan, job: Job, listed: Queues | None = None) -> str:
    """done | running | queued | failed | pending, from the outputs first and the job record
    second (a job recorded done whose results were deleted since is pending again); for a job
    recorded as launched, what its launcher says of it from ``listed`` (queues(), read once)."""
    if job.done:
        return "done"
    rec = read_record(plan, job)
    if rec is None or rec.state == "done":
        return "pending"
    if rec.launcher not in launchers.LAUNCHERS:
        return rec.state  # a launcher unknown here: its record cannot be checked
    module = launchers.launcher(rec.launcher)
    return module.job_state(rec, (listed or {}).get(rec.launcher, {}))


def log_lines(path: Path) -> list[str]:
    """The lines of a log; none when it cannot be read."""
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []


def last_error(log: Path) -> str | None:
    """The last `error:` line of a job's log (the command's own word on why it failed)."""
    found = (line.strip() for line in reversed(log_lines(log)) if line.startswith("error:"))
    return next(found, None)
