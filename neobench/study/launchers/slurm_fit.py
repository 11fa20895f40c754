"""Before anything is submitted: does the cluster offer what each job asks for?

Read from `sinfo` (per partition: GRES, CPUs and memory of its largest node, time limit) and held
against the study's resources for the jobs still to run. A request no node of the partition can
meet would sit in the queue for ever, or fail at submission with sbatch's own words; it is
refused here instead, naming the study key and the fix, all at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from neobench.core.errors import NeobenchError
from neobench.study.plan import Plan
from neobench.study.spec import Resources, Slurm, parse_minutes

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


def offers(sinfo: Callable[[list[str]], str]) -> dict[str, Offer]:
    """Partition -> its offer, from ``sinfo`` (a function running Slurm's command)."""
    found: dict[str, Offer] = {}
    for line in sinfo(["sinfo", "-h", "-o", FORMAT]).splitlines():
        fields = line.strip().split("|")
        if len(fields) != 5:
            continue
        name, gres, cpus, mem, limit = fields
        offer = Offer(name.rstrip("*"), name.endswith("*"), _gpus(gres), _int(cpus), _int(mem),
                      _limit(limit))  # fmt: skip
        if offer.name in found:  # node groups of one partition: the best of each
            seen = found[offer.name]
            offer.gpus, offer.cpus = max(offer.gpus, seen.gpus), max(offer.cpus, seen.cpus)
            offer.mem_mb = max(offer.mem_mb, seen.mem_mb)
        found[offer.name] = offer
    return found


def check(plan: Plan, sinfo: Callable[[list[str]], str]) -> None:
    """Refuse, before any submission, the jobs still to run that the partition cannot hold."""
    settings = plan.study.slurm or Slurm()
    listed = offers(sinfo)
    name = settings.partition or next((o.name for o in listed.values() if o.default), None)
    # No partition to check against: check_partition or sbatch says so; the time floor holds.
    offer = listed.get(name) if name else None
    problems: list[str] = []
    for kind in sorted({job.kind for job in plan.pending}):
        res = getattr(settings, kind, Resources())
        key, given = f"slurm.{kind}", plan.study.slurm is not None
        problems += _too_short(key, res, settings) + _misfits(key, res, offer, given=given)
    if problems:
        raise NeobenchError(problems)


def _misfits(key: str, res: Resources, offer: Offer | None, *, given: bool) -> list[str]:
    out: list[str] = []
    if offer is None:
        return out
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
    limit_s = parse_minutes(res.time) * 60
    work_s = limit_s - settings.signal_s - settings.startup_s
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


def _gpus(gres: str) -> int:
    return sum(int(n) for n in _GPU.findall(gres or ""))


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
    if not match:
        return 0
    scale = {"K": 1 / 1024, "M": 1, "": 1, "G": 1024, "T": 1024 * 1024}[match.group(2)]
    return int(int(match.group(1)) * scale)
