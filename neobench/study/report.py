"""A study's plan and status as listings (title, columns, rows of text) and summary lines."""

from __future__ import annotations

import math
import shlex
from collections import Counter

from neobench.models.flops import TRAIN_FLOPS_FACTOR
from neobench.models.memory import gib
from neobench.protocol.listing import Listing
from neobench.study import store
from neobench.study.estimate import (
    GRADCACHE_FLOPS_FACTOR,
    MARGIN,
    Estimate,
    FinetuneMemory,
    hours_text,
)
from neobench.study.kinds import JobKind
from neobench.study.plan import Job, Plan


def plan_listing(
    plan: Plan, listed: store.Queues | None = None, estimate: Estimate | None = None
) -> Listing:
    """Every job: its state, what it waits for, its resources, its estimated hours (when there
    is an estimate) and its command. ``listed``: the launchers' queues (store.queues())."""
    rows = []
    for job in plan.jobs:
        hours = estimate.hours.get(job.key) if estimate else None
        memory = estimate.memory.get(job.key) if estimate else None
        row = [
            job.key,
            store.state(plan, job, listed),
            _after(plan, job),
            job.resources.text() if job.resources else "-",
            "-" if hours is None else hours_text(hours),
            "-" if memory is None else memory.cell(),
            "neobench " + shlex.join(job.argv),
        ]
        rows.append(tuple(row if estimate else row[:4] + row[6:]))
    title = f"study {plan.study.name}: {plan.study.output}"
    columns = ("job", "state", "after", "resources", "estimate", "memory", "command")
    return Listing(title, columns if estimate else columns[:4] + columns[6:], rows)


def _after(plan: Plan, job: Job) -> str:
    """The jobs ``job`` waits for: their keys, or how many of which kind."""
    if len(job.after) <= 3:
        return ", ".join(job.after) or "-"
    kinds = {plan.job(key).kind.value for key in job.after}
    return f"{len(job.after)} {kinds.pop() + ' ' if len(kinds) == 1 else ''}jobs"


def estimate_lines(plan: Plan, found: Estimate) -> list[str]:
    """What the jobs will use on the calibrated card, per model and kind and in all, beside what
    their time limits request; a warning per model and kind whose limit is under MARGIN x."""
    calibration = found.calibration
    lines = [f"Estimated on one {calibration.card}, from {calibration.source}:"]
    lines += [f"  {name}: {how}" for name, how in found.models.items()]
    for kind in JobKind:
        jobs = [j for j in plan.jobs if j.kind is kind and j.key in found.hours]
        if not jobs:
            continue
        hours = [found.hours[j.key] for j in jobs]
        low, high = hours_text(min(hours)), hours_text(max(hours))
        each = low if low == high else f"{low} to {high}"
        bound = f" ({kind.estimate_bound})" if kind.estimate_bound else ""
        lines.append(f"  {len(jobs)} {kind} jobs: {each} each, {sum(hours):,.1f} GPU-hours{bound}")
        per_model: dict[str, float] = {}
        for job in jobs:
            per_model[str(job.model)] = per_model.get(str(job.model), 0.0) + found.hours[job.key]
        if len(per_model) > 1:
            lines.append(
                "    per model: " + ", ".join(f"{m} {h:,.1f}" for m, h in per_model.items())
            )
    total = sum(found.hours.values())
    pending = sum(found.hours.get(j.key, 0.0) for j in plan.pending)
    requested = plan.gpu_hours()
    beside = f"; the time limits request {requested:,.1f}" if requested is not None else ""
    lines.append(
        f"  in all: {total:,.1f} GPU-hours, {pending:,.1f} for the jobs still to run{beside}"
    )
    if found.unknown:
        lines.append(f"  not estimated: {', '.join(found.unknown)} (their shapes are unknown)")
    lines += memory_lines(plan, found)
    return lines + _short_limits(plan, found)


def memory_lines(plan: Plan, found: Estimate) -> list[str]:
    """Per model, its fine-tunes' peak memory per device at the recipe's heaviest step, how it
    was estimated, and what the fine-tune does where that is over the budget."""
    per_model: dict[str, FinetuneMemory] = {}
    for job in plan.jobs:
        if job.key in found.memory:
            per_model.setdefault(str(job.model), found.memory[job.key])
    if not per_model:
        return []
    first = next(iter(per_model.values()))
    budget = first.budget.text if first.budget else "unknown (the calibration has no memory_gib)"
    lines = [f"Memory per device at the recipe's step, budget {budget}; {first.lengths}:"]
    for model, memory in per_model.items():
        worst = memory.plans[memory.worst]
        line = f"  {model}: peak {gib(worst.plain)} ({memory.worst}; {memory.how})"
        if not memory.fits:
            line += "; over the budget even in chunks of one text: the fine-tune stops at that step"
        elif memory.chunk is not None:
            line += (
                f"; over the budget: the fine-tune runs the same global batch in GradCache chunks "
                f"of {memory.chunk} texts (peak {gib(worst.chunked)}) on "
                f"{memory.chunked_share:.0%} of the datasets, their steps at "
                f"{GRADCACHE_FLOPS_FACTOR}/{TRAIN_FLOPS_FACTOR} the FLOPs (in the hours above)"
            )
        lines.append(line)
    return lines


def _short_limits(plan: Plan, found: Estimate) -> list[str]:
    """One warning per (model, kind) whose time limit is below MARGIN x its longest estimate."""
    short: dict[tuple[str, JobKind], tuple[float, str]] = {}
    for job in plan.jobs:
        hours = found.hours.get(job.key)
        if hours is None or job.resources is None:
            continue
        wall = hours / max(1, job.resources.gpus)
        if job.resources.hours < MARGIN * wall:
            key = (str(job.model), job.kind)
            short[key] = max(short.get(key, (0.0, "")), (wall, job.resources.time))
    lines = []
    for (model, kind), (wall, limit) in short.items():
        minutes = math.ceil(MARGIN * wall * 6) * 10  # rounded up to 10 minutes
        lines.append(
            f"warning: {kind} jobs of {model}: the time limit {limit} is below {MARGIN}x their "
            f"estimate ({hours_text(wall)}); raise slurm.{kind}.time to "
            f"{minutes // 60}:{minutes % 60:02d}:00 or more"
        )
    return lines


def summary(plan: Plan) -> list[str]:
    """How many jobs of each kind, how many are done, and the GPU-hours they request."""
    kinds = Counter(j.kind for j in plan.jobs)
    counts = ", ".join(f"{n} {kind}" for kind, n in kinds.items())
    done = sum(j.done for j in plan.jobs)
    lines = [f"{len(plan.jobs)} jobs ({counts}): {done} done, {len(plan.pending)} to run"]
    total = plan.gpu_hours()
    if total is not None:
        pending = plan.gpu_hours(plan.pending) or 0.0
        later = plan.waiting_gpu_hours
        after = (
            f", and {later:,.1f} for the evals planned after the sweep's selection" if later else ""
        )
        lines.append(
            f"Slurm: {total + later:,.1f} GPU-hours requested in all (GPUs x time limit), "
            f"{pending:,.1f} for the jobs still to run{after}"
        )
    return lines + plan.notes


def failures(plan: Plan, listed: store.Queues | None = None) -> list[str]:
    """One line per failed job: how it ended and why, as its launcher knows it."""
    from neobench.study import launchers

    lines = []
    for job in plan.jobs:
        rec = store.read_record(plan, job)
        known = rec is not None and rec.launcher in launchers.LAUNCHERS
        if known and store.state(plan, job, listed) == "failed":
            lines.append(f"{job.key}: {launchers.launcher(rec.launcher).why(plan, job, rec)}")
    return lines


def status_listing(plan: Plan, listed: store.Queues | None = None) -> Listing:
    """Per model and seed, each stage: done / running / queued / failed / pending, with its log
    and, for a job a scheduler holds (Slurm), its id there."""
    rows = []
    for job in plan.jobs:
        stage = job.kind.value + ("" if job.shard is None else f" {job.shard[0]}/{job.shard[1]}")
        seed = "-" if job.seed is None else str(job.seed)
        current = store.state(plan, job, listed)
        log = str(job.log) if job.log.is_file() else "-"
        rec = store.read_record(plan, job)
        job_id = rec.launcher_job_id if rec and rec.launcher_job_id else "-"
        rows.append((job.model or "(all)", seed, stage, current, job_id, log))
    title = f"study {plan.study.name}: {plan.study.output}"
    return Listing(title, ("model", "seed", "stage", "state", "slurm job", "log"), rows)


def sweep_listing(plan: Plan) -> Listing | None:
    """A sweep's points per model: each seed's dev metric (from the fine-tunes' cards), their
    mean, and the point selected (once all are done); None for a study without a sweep."""
    from neobench.core.cards import finetune_dev
    from neobench.core.selection import read_selection, record_path
    from neobench.study.jobs import finetune_key
    from neobench.study.sweep import points

    tune = plan.study.finetune
    if tune is None or not tune.sweep:
        return None
    rows = []
    for model in plan.models:
        record = record_path(plan.study.output, model.slug)
        chosen = read_selection(record).selected if record.is_file() else None
        for point in points(tune.sweep):
            dev = {}
            for seed in tune.seeds:
                job = plan.job(finetune_key(model.slug, seed, point.slug))
                found = finetune_dev(job.output) if job.done else None
                dev[seed] = None if found is None else found.value
            known = [v for v in dev.values() if v is not None]
            mean = f"{sum(known) / len(known):.4f}" if known else "-"
            each = ", ".join("-" if v is None else f"{v:.4f}" for v in dev.values())
            mark = "selected" if point.label == chosen else ("-" if chosen else "not yet")
            rows.append((model.name, point.label, each, mean, mark))
    title = f"sweep of {plan.study.name}: dev MRR@10 on the held-out slice (higher is better)"
    return Listing(title, ("model", "point", "dev per seed", "mean", "selected"), rows)


def pilot_lines(plan: Plan) -> list[str]:
    """The seeds planner on what the study's results already hold, when they hold a pilot (a
    row of seed replicates with per-item predictions): the difference the study's seeds per
    backbone detect (report/planner.py); nothing otherwise."""
    from neobench.core import results
    from neobench.core.errors import NeobenchError
    from neobench.report.planner import plan_seeds

    study = plan.study
    if study.eval is None or not results.run_folders(study.output):
        return []
    seeds = len(study.finetune.seeds) if study.finetune else 1
    try:
        found = plan_seeds([study.output], study.eval.benchmark, seeds=seeds)
    except NeobenchError:
        return []  # no pilot yet (no replicates, or no per-item predictions)
    return ["Seeds planner, the study's results as a pilot:", *found.lines()]
