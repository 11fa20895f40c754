"""The Slurm launcher: the local launcher's pending jobs, submitted through submitit (behaviour:
docs/studies.md, "Launchers"). Before submitting, each job's request is held against `sinfo` and
refused, all at once, when no node of the partition can meet it (it would wait for ever). On the
node a job runs as slurm_job.JobCommand; submitit's files go to OUTPUT/slurm/.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

from neobench.core.card_io import now
from neobench.core.errors import NeobenchError, RunFailed
from neobench.encoder.cache import CACHE_ENV, CACHE_FILE, READ_ENV
from neobench.study import store
from neobench.study.launchers import progress
from neobench.study.launchers.slurm_job import JobCommand
from neobench.study.models import build
from neobench.study.plan import Job, Plan, replan
from neobench.study.spec import Resources, Slurm, parse_minutes

NAME = "slurm"
TITLE = "Slurm"
CANCEL = "scancel"

# Slurm's states of a job not ended yet (squeue lists ended jobs only briefly), and of one ended.
LIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "SUSPENDED", "RESIZING"}
ENDED = (
    "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "FAILED", "BOOT_FAIL",
    "DEADLINE", "COMPLETED",
)  # fmt: skip


def run(plan: Plan, tell: Callable[..., None], *, file: str, wait: bool = False) -> None:
    """Submit the pending jobs; with ``wait``, block until they have ended (RunFailed if
    one did not finish)."""
    submitted = submit(plan, progress(tell))
    tell(f"{len(submitted)} job(s) submitted; `neobench study status {file}` follows them.")
    if plan.waiting and not wait:
        tell(
            f"{', '.join(plan.waiting)}: the sweep selects once its fine-tunes have ended; then "
            f"run `neobench study run {file} --launcher slurm` again to submit the evals and the "
            "table (with --wait this run does it)."
        )
    while wait:
        wait_held(plan, plan.pending)
        fresh = replan(plan)  # what the jobs wrote
        failed = [fresh.job(j.key) for j in plan.pending if not fresh.job(j.key).done]
        if failed:
            logs = "; ".join(f"{j.key}: {j.log}" for j in failed)
            raise RunFailed(
                f"{len(failed)} Slurm job(s) did not finish ({logs}). Fix the cause, then run "
                f"`neobench study run {plan.study.file} --launcher slurm` again: it submits only "
                "what is missing."
            )
        # A sweep's selection plans new jobs once its fine-tunes are done: submit those too.
        plan = fresh
        if not plan.pending:
            tell(f"[green]done[/]: every job ended; table: {plan.table_files()}")
            return
        submitted = submit(plan, progress(tell))
        tell(f"{len(submitted)} more job(s) submitted (the sweep's selected point).")


# Said whenever no cluster answers.
POINT = (
    "Point at a cluster: on its login node SLURM_CONF is usually set for you; elsewhere "
    "`export SLURM_CONF=/path/to/slurm.conf`. For the one-node cluster of this repository: "
    '`eval "$(scripts/slurm-local.sh start)"` (and `scripts/slurm-local.sh stop` afterwards). '
    "Or run the study here with --launcher local."
)
# What Slurm's commands print when they reach no configuration or no controller.
UNREACHABLE = (
    "configuration source", "DNS SRV lookup failed", "Unable to process configuration file",
    "Unable to contact slurm controller", "Connection refused", "Socket timed out",
)  # fmt: skip


def _slurm_command(argv: list[str]) -> str:
    """The output of one of Slurm's commands; NeobenchError when it fails, saying how to point
    at a cluster when none answers."""
    conf = os.environ.get("SLURM_CONF")
    if conf and not Path(conf).is_file():  # Slurm's commands would retry it for a minute
        raise NeobenchError(f"--launcher slurm: SLURM_CONF={conf} is not a file. {POINT}")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise NeobenchError(
            f"--launcher slurm: `{argv[0]}` is not installed here. Run on a Slurm login node, "
            "or use --launcher local."
        ) from None
    except subprocess.TimeoutExpired:
        raise NeobenchError(
            f"--launcher slurm: `{shlex.join(argv)}` had no answer in 60 s. {POINT}"
        ) from None
    if done.returncode:
        said = done.stderr.strip()
        if any(marker in said for marker in UNREACHABLE):
            first = said.splitlines()[-1] if said else "no output"
            raise NeobenchError(
                f"--launcher slurm: no Slurm cluster answers here (`{argv[0]}`: {first}). {POINT}"
            )
        raise NeobenchError(f"--launcher slurm: `{shlex.join(argv)}` failed: {said}")
    return done.stdout


# Before submitting: does the cluster offer what each job asks for?

FORMAT = "%P|%G|%c|%m|%l"  # partition (* = default) | GRES | CPUs | memory (MB) | time limit
# The least work a window must hold beyond start-up: a few steps and one checkpoint's write.
WORK_S = 30
_GPU = re.compile(r"gpu(?::[^:,()]+)?:(\d+)")


@dataclass
class Offer:
    """What the best node of one partition offers a job."""

    name: str
    default: bool
    gpus: int
    cpus: int
    mem_mb: int
    minutes: int | None  # None: no limit


def offers() -> dict[str, Offer]:
    """Partition -> its offer, from `sinfo`; a line short of FORMAT's fields names its partition
    and offers nothing."""
    found: dict[str, Offer] = {}
    for line in _slurm_command(["sinfo", "-h", "-o", FORMAT]).splitlines():
        if not line.strip():
            continue
        name, gres, cpus, mem, limit = (line.strip().split("|") + [""] * 4)[:5]
        gpus = sum(int(n) for n in _GPU.findall(gres))
        offer = Offer(name.rstrip("*"), name.endswith("*"), gpus, _int(cpus), _int(mem),
                      _limit(limit))  # fmt: skip
        if offer.name in found:  # node groups of one partition: the best of each
            seen = found[offer.name]
            offer.gpus, offer.cpus = max(offer.gpus, seen.gpus), max(offer.cpus, seen.cpus)
            offer.mem_mb = max(offer.mem_mb, seen.mem_mb)
        found[offer.name] = offer
    return found


def check_resources(plan: Plan) -> None:
    """Refuse, before any submission and all at once, a study without a partition on a cluster
    without a default one, and the jobs still to run that the partition cannot hold."""
    settings = plan.study.slurm or Slurm()
    listed = offers()
    name = settings.partition or next((o.name for o in listed.values() if o.default), None)
    if name is None:
        raise NeobenchError(
            "slurm.partition: the study names no partition and this cluster has no default "
            f"one (sinfo lists: {', '.join(sorted(listed)) or 'none'}). Add `partition:` "
            "to the study's slurm section."
        )
    offer = listed.get(name)  # None: a partition sinfo does not list (sbatch says so)
    problems: list[str] = []
    for kind in sorted({job.kind for job in plan.pending}):
        res, key = kind.resources(settings), f"slurm.{kind}"
        problems += _too_short(key, res, settings)
        if offer:
            problems += _misfits(key, res, offer, given=plan.study.slurm is not None)
    if problems:
        raise NeobenchError(problems)


def _misfits(key: str, res: Resources, offer: Offer, *, given: bool) -> list[str]:
    out: list[str] = []
    where = f"partition {offer.name}"
    default = "" if given else " (the default: the study has no slurm section)"
    if res.gpus > offer.gpus:
        out.append(
            f"{key}.gpus: {res.gpus} GPU(s) per job{default}, but {where} has "
            f"{offer.gpus or 'no'} GPU(s) per node. A CPU study: set gpus: 0."
        )
    if res.cpus > offer.cpus:
        out.append(f"{key}.cpus: {res.cpus}, but {where} has {offer.cpus} per node.")
    if _mb(res.mem) > offer.mem_mb > 0:
        out.append(f"{key}.mem: {res.mem}, but {where} has {offer.mem_mb} MB per node.")
    if offer.minutes is not None and parse_minutes(res.time) > offer.minutes:
        out.append(f"{key}.time: {res.time}, but {where} allows {offer.minutes} minutes.")
    return out


def _too_short(key: str, res: Resources, settings: Slurm) -> list[str]:
    """A time limit whose window cannot start the job and reach a checkpoint: every window
    would be lost, and the job requeued or failed without moving."""
    work_s = parse_minutes(res.time) * 60 - settings.signal_s - settings.startup_s
    if work_s >= WORK_S:
        return []
    least = -(-(settings.signal_s + settings.startup_s + WORK_S) // 60)  # whole minutes, up
    return [
        f"{key}.time: {res.time} leaves {max(work_s, 0)} s of work in each window: Slurm tells "
        f"the job {settings.signal_s} s before its limit (slurm.signal_s) and start-up takes "
        f"about {settings.startup_s} s (slurm.startup_s); a checkpoint needs {WORK_S} s more. "
        f"Give at least {least} minutes (e.g. {least // 60}:{least % 60:02d}:00), or lower "
        "slurm.signal_s / slurm.startup_s if your jobs start faster."
    ]


def _int(text: str) -> int:
    digits = re.match(r"\d+", text.strip())
    return int(digits.group()) if digits else 0


def _limit(text: str) -> int | None:
    text = text.strip()
    if text.lower() in {"infinite", "unlimited", "n/a", ""}:
        return None
    days, _, rest = text.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    hours, minutes = (parts[0], parts[1]) if len(parts) == 3 else (0, parts[0])
    return int(days or 0) * 1440 + hours * 60 + minutes


def _mb(mem: str) -> int:
    """Slurm's --mem (default unit MB): '32G' -> 32768."""
    match = re.fullmatch(r"(\d+)([KMGT]?)B?", str(mem).strip().upper())
    scale = {"K": 1 / 1024, "M": 1, "": 1, "G": 1024, "T": 1024 * 1024}
    return int(int(match.group(1)) * scale[match.group(2)]) if match else 0


# Submitting.


def submit(plan: Plan, on_job: Callable[[Job, str], None]) -> list[Job]:
    """Submit every pending job that Slurm does not already hold; the jobs submitted."""
    import submitit

    check_resources(plan)
    for model in plan.models:
        build(model)  # on the shared file system, before any job needs it
    plan.save()  # the sweeps' choices, which the eval jobs name
    listed = queue()
    # job key -> Slurm id, for the jobs that are queued or running: an earlier `run`'s are kept
    ids = {j.key: str(r.launcher_job_id) for j in plan.pending if (r := held(plan, j, listed))}
    submitted: list[Job] = []
    pending = [j for j in plan.pending if j.key not in ids]
    finished = finished_caches(plan, listed)
    largest = max_array_size()
    groups = [list(g) for _, g in groupby(pending, key=lambda j: (j.kind, tuple(j.after)))]
    for jobs in (g[i : i + largest] for g in groups for i in range(0, len(g), largest)):
        executor = submitit.SlurmExecutor(folder=plan.study.output / "slurm" / "%j")
        executor.update_parameters(**_parameters(plan, jobs[0], ids))
        # One array for several jobs of a kind with the same dependencies (a model's shards),
        # up to the cluster's largest.
        try:
            with executor.batch() if len(jobs) > 1 else contextlib.nullcontext():
                handles = [executor.submit(_command(plan, job, finished)) for job in jobs]
        except Exception as error:  # submitit's FailedJobError, sbatch's stderr, an OSError
            cause = " ".join(str(error).split())[:600] or type(error).__name__
            done = ", ".join(j.key for j in submitted)
            done = f"; already submitted: {done}" if done else ""
            raise NeobenchError(
                f"{', '.join(j.key for j in jobs)}: Slurm refused the submission ({cause}){done}. "
                "Fix the study's slurm section (or the cluster), then run again: submitted jobs "
                "are not submitted twice."
            ) from None
        for job, handle in zip(jobs, handles, strict=True):
            ids[job.key] = str(handle.job_id)
            rec = store.JobRecord(job.key, "queued", str(job.log), launcher=NAME, started=now())
            rec.launcher_job_id = ids[job.key]
            store.write_record(plan, job, rec)
            on_job(job, f"submitted as Slurm job {handle.job_id}")
            submitted.append(job)
    return submitted


# Slurm's default MaxArraySize: an array's task indices stay below it.
MAX_ARRAY_SIZE = 1001


def max_array_size() -> int:
    """The most jobs one array may hold on this cluster (`scontrol show config`'s MaxArraySize,
    else Slurm's default): a larger group (a study's GLUE runs, thousands on the paper's grid)
    is submitted as several arrays."""
    try:
        said = _slurm_command(["scontrol", "show", "config"])
    except NeobenchError:
        return MAX_ARRAY_SIZE
    found = re.search(r"^MaxArraySize\s*=\s*(\d+)", said, re.MULTILINE)
    return max(1, int(found.group(1))) if found else MAX_ARRAY_SIZE


def held(plan: Plan, job: Job, listed: dict[str, str]) -> store.JobRecord | None:
    """``job``'s record while Slurm holds it (queued or running in ``listed``, from queue())."""
    rec = store.read_record(plan, job)
    live = rec and rec.launcher == NAME and listed.get(str(rec.launcher_job_id)) in LIVE
    return rec if live else None


def _parameters(plan: Plan, job: Job, ids: dict[str, str]) -> dict[str, Any]:
    settings = plan.study.slurm or Slurm()
    res = job.resources or job.kind.resources(settings)
    extra: dict[str, Any] = {"requeue": True, "kill_on_invalid_dep": "yes"}
    extra |= dict(_sbatch_flag(line) for line in settings.sbatch)
    waits = [ids[k] for k in job.after if k in ids]
    params: dict[str, Any] = {
        "job_name": f"{plan.study.name}-{job.kind}",
        "time": parse_minutes(res.time),
        # SIGUSR2 this long before the limit: the job checkpoints and requeues (slurm_job.py)
        "signal_delay_s": settings.signal_s,
        "cpus_per_task": res.cpus,
        "mem": res.mem,
        "setup": list(settings.setup),
        "additional_parameters": extra,
    }
    if waits:
        params["dependency"] = "afterok:" + ":".join(waits)
    if res.gpus:
        params["gpus_per_node"] = res.gpus
    keys = ("partition", "account", "qos", "constraint")
    return params | {key: value for key in keys if (value := getattr(settings, key))}


def _sbatch_flag(line: str) -> tuple[str, Any]:
    """'--exclusive' -> (exclusive, True); '--exclude=n1' or '--exclude n1' -> (exclude, n1)."""
    text = line.strip().removeprefix("#SBATCH").strip().lstrip("-")
    key, _, value = text.replace(" ", "=", 1).partition("=")
    return key.replace("-", "_"), value or True


def job_cache(plan: Plan, job: Job) -> Path:
    """The folder of the embedding cache that ``job`` writes."""
    return plan.study.output / "cache" / job.key.replace("/", "-")


def finished_caches(plan: Plan, listed: dict[str, str]) -> list[Path]:
    """The cache files of the jobs that are done and that Slurm no longer holds: their writers
    have closed them, so other jobs may read them as immutable files."""
    caches = []
    for job in plan.jobs:
        file = job_cache(plan, job) / CACHE_FILE
        # A -wal left beside it means its writer was killed before folding the WAL in.
        ended = job.done and not held(plan, job, listed)
        if ended and file.is_file() and not Path(f"{file}-wal").exists():
            caches.append(file)
    return caches


def _command(plan: Plan, job: Job, finished: list[Path]) -> JobCommand:
    """The job's `neobench` command, its output in the job's log; a fine-tune with several GPUs
    under torchrun. Each job writes an embedding cache of its own (SQLite's write-ahead log needs
    one host, and jobs on several nodes share this folder) and reads the ``finished`` jobs'
    caches on a miss, read-only. Near its time limit it checkpoints and requeues (JobCommand)."""
    job.log.parent.mkdir(parents=True, exist_ok=True)
    python = [sys.executable, "-m"]
    gpus = job.resources.gpus if job.resources else 0
    if job.kind.under_torchrun and gpus > 1:
        # torchrun that survives Slurm's notice and says one line on a stop (train/torchrun.py)
        python += ["neobench.train.torchrun", "--standalone", f"--nproc_per_node={gpus}", "-m"]
    command = shlex.join([*python, "neobench", *job.argv])
    log = shlex.quote(str(job.log))
    cache = job_cache(plan, job)
    script = f"export {CACHE_ENV}={shlex.quote(str(cache))}; "
    others = os.pathsep.join(str(p) for p in finished if p.parent != cache)
    script += f"export {READ_ENV}={shlex.quote(others)}; "
    if job.kind.resumes:
        # Requeued after preemption: continue from the checkpoint the first attempt left.
        saved = shlex.quote(str(job.output / "checkpoints"))
        script += f"if compgen -G {saved}/'checkpoint-*' > /dev/null; then set -- --resume; fi; "
    script += f'echo "# $(date -u +%FT%TZ) Slurm job $SLURM_JOB_ID" >> {log}; '
    script += f'exec {command} "$@" >> {log} 2>&1'
    # bash -c SCRIPT NAME: the name is $0, so "$@" starts empty.
    argv = ["bash", "-c", script, "neobench-job"]
    benchmark = plan.study.eval.benchmark if plan.study.eval else ""  # none: GLUE runs only
    return JobCommand(argv, str(Path.cwd()), job, benchmark)


# What became of a job.

# A line of the job's stderr -> the state it shows (when Slurm no longer says).
_STEPD = re.compile(r"\*\*\* JOB \S+ ON \S+ CANCELLED AT \S+(?: DUE TO ([A-Z ]+?))? \*\*\*")
_DUE = {"TIME LIMIT": "TIMEOUT", "PREEMPTION": "PREEMPTED", "NODE FAILURE": "NODE_FAIL"}
_OOM = ("oom_kill event", "oom-kill", "Exceeded job memory limit", "Out Of Memory")
_OURS = ("JobFailed: ", "UncompletedJobError: ")


def queue() -> dict[str, str]:
    """Job id -> state of every job squeue lists (array elements one by one, as ID_K)."""
    done = _slurm_command(["squeue", "-h", "-r", "-o", "%i %T"])
    pairs = (line.split() for line in done.splitlines())
    return {p[0]: p[1] for p in pairs if len(p) == 2}


def job_state(rec: store.JobRecord, listed: dict[str, str]) -> str:
    """queued | running for a submitted job Slurm still holds; failed once it has ended (the
    job is not done: it ended without its output)."""
    found = listed.get(str(rec.launcher_job_id))
    if found not in LIVE:
        return "failed"
    return "running" if found in {"RUNNING", "COMPLETING"} else "queued"


def why(plan: Plan, job: Job, rec: store.JobRecord) -> str:
    """'STATE: the line that says why' for a job Slurm no longer runs, as far as known; kept in
    its record. A fine-tune card it left marked running says interrupted."""
    if rec.ended_as is None or rec.why is None:
        state, line = _final_state(str(rec.launcher_job_id)), _line(plan, job, rec)
        rec.ended_as = rec.ended_as or state or (_state_of(line) if line else None)
        rec.why = rec.why or line
        if rec.ended_as or rec.why:
            store.write_record(plan, job, rec)
    parts = [p for p in (rec.ended_as, rec.why) if p]
    said = ": ".join(parts) if parts else "ended without its output (no reason found)"
    job.kind.close_card(job.output, f"Slurm job {rec.launcher_job_id}: {said}")
    return said


def _final_state(job_id: str) -> str | None:
    """Slurm's own word: sacct (where the cluster keeps accounting), else scontrol (which knows
    a job for MinJobAge after its end, 5 minutes by default)."""
    for argv in (
        ["sacct", "-n", "-P", "-X", "-j", job_id, "-o", "State"],
        ["scontrol", "show", "job", "-o", job_id],
    ):
        try:
            said = _slurm_command(argv)
        except NeobenchError:
            continue  # no accounting, or the controller has forgotten the job
        found = re.search(r"JobState=(\S+)", said)  # scontrol's; sacct says the state alone
        word = found.group(1) if found else (said.split() or [""])[0]
        if word in ENDED:
            return word
    return None


def _line(plan: Plan, job: Job, rec: store.JobRecord) -> str | None:
    """The most telling line: Slurm's (stderr of the job), the job's own reason (submitit's log),
    the last error line of the command's log."""
    folder = plan.study.output / "slurm" / str(rec.launcher_job_id)
    stderr = store.log_lines(folder / f"{rec.launcher_job_id}_0_log.err")
    for line in reversed(stderr):
        if "DUE TO JOB REQUEUE" in line:
            continue  # an earlier window, put back in the queue: not how the job ended
        if _STEPD.search(line) or any(mark in line for mark in _OOM):
            return line.strip()
    ours = (line.split(m, 1)[1].strip() for line in reversed(stderr) for m in _OURS if m in line)
    found = next(ours, None)
    return store.last_error(job.log) if found is None else found


def _state_of(line: str) -> str | None:
    if any(mark in line for mark in _OOM):
        return "OUT_OF_MEMORY"
    found = _STEPD.search(line)
    return _DUE.get(found.group(1) or "", "CANCELLED") if found else None


def wait_held(plan: Plan, jobs: list[Job]) -> None:
    """Block until Slurm holds none of ``jobs``."""
    while True:
        listed = queue()
        if not any(held(plan, j, listed) for j in jobs):
            return
        time.sleep(5)
