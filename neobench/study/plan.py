"""A study -> its jobs: finetune(model, seed) -> eval(model, shard k/N) -> table.

Each job is a plain record: the exact `neobench ...` arguments it runs, its output, what it asks a
cluster for, the jobs it waits for, and whether its output is already complete. A launcher only
runs (or submits) the jobs that are not done, in list order, which respects every dependency.

What counts as done is read from what the commands themselves write: a fine-tuning run card
whose status is complete, and the task result files of each shard in the results folder that the
run cards of that model name. A finished piece made under other conditions than the study now
gives is refused, never mixed in (see conflicts.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neobench.core import cards as record
from neobench.core.errors import NeobenchError, collect
from neobench.protocol.cache_policy import DEFAULT_POLICY
from neobench.study import conflicts
from neobench.study.models import ResolvedModel, resolve_models
from neobench.study.spec import Resources, Study, parse_study
from neobench.train.output import last_checkpoint

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

TABLE_FILE = "table.md"
PAGE_FILE = "table.html"  # the leaderboard page, beside the table


@dataclass
class Job:
    kind: str  # finetune | eval | table
    key: str  # unique in the study, e.g. eval/MiniLM-seed0/1of2
    argv: list[str]  # after `neobench`
    output: Path
    log: Path
    resources: Resources | None  # from the study's slurm section
    after: list[str] = field(default_factory=list)  # keys of the jobs it waits for
    done: bool = False
    model: str | None = None  # display name
    seed: int | None = None
    shard: tuple[int, int] | None = None
    tasks: list[str] = field(default_factory=list)  # eval: the tasks of its shard


@dataclass
class Plan:
    study: Study
    models: list[ResolvedModel]
    jobs: list[Job]
    notes: list[str] = field(default_factory=list)
    # Models whose sweep has not selected its point yet: their eval jobs (and the table) are
    # planned once it has; the estimate of what those jobs will request.
    waiting: list[str] = field(default_factory=list)
    waiting_gpu_hours: float = 0.0
    # The sweeps' choices (record path -> Selection), written when the jobs run (save): a dry
    # run or a status reads the plan and writes nothing.
    selections: dict[Path, Any] = field(default_factory=dict)

    def save(self) -> None:
        """Record the sweeps' choices that the eval jobs will name (`eval --sweep FILE`)."""
        from neobench.core.selection import write_selection

        for path, chosen in self.selections.items():
            write_selection(path, chosen)

    @property
    def pending(self) -> list[Job]:
        return [j for j in self.jobs if not j.done]

    def gpu_hours(self, jobs: list[Job] | None = None) -> float | None:
        """GPU-hours the jobs request (GPUs x time limit); None without a slurm section."""
        if self.study.slurm is None:
            return None
        chosen = self.jobs if jobs is None else jobs
        return sum(j.resources.gpus * j.resources.hours for j in chosen if j.resources)

    @property
    def table(self) -> Job | None:
        """The table job; None while a sweep has not selected (it is planned after)."""
        return next((j for j in self.jobs if j.kind == "table"), None)

    def job(self, key: str) -> Job:
        return next(j for j in self.jobs if j.key == key)


def prepare(
    path: str | Path, output: str | None = None
) -> tuple[Study, list[ResolvedModel], list[AbsTask]]:
    """The study, its models and its benchmark tasks; every problem of the file at once."""
    study, problems = parse_study(path, output)
    models = resolve_models(study, problems)
    if study.finetune is not None:
        conflicts.recipe_problems(study.finetune, problems)
    if study.finetune is not None and study.finetune.sweep:
        from neobench.study.sweep import sweep_problems

        tune = study.finetune
        problems += sweep_problems(tune.recipe, tune.overrides, tune.sweep)
    tasks = conflicts.eval_problems(study.eval, problems)
    names = {m.name for m in models}
    if study.baseline is not None and models and study.baseline not in names:
        problems.append(conflicts.unknown_baseline(study.baseline, names))
    if problems:
        raise NeobenchError([f"study {path}: {p}" for p in problems])
    return study, models, tasks or []


def build_plan(path: str | Path, output: str | None = None) -> Plan:
    """Every job of the study, with what is already done; refuses changed conditions."""
    from neobench.protocol.tasks import shard

    study, models, tasks = prepare(path, output)
    n = study.eval.shards
    shards = [(k, [t.metadata.name for t in shard(tasks, k, n)]) for k in range(1, n + 1)]
    plan = Plan(study, models, [])
    if any(not names for _, names in shards):
        plan.notes.append(f"{n} shards for {len(tasks)} task(s): the empty shards are left out.")
    found = conflicts.EvalCards.scan(study.output)
    problems: list[str] = []
    for model in models:
        if study.finetune is not None and study.finetune.sweep:
            from neobench.study.sweep_plan import plan_sweep

            collect(problems, plan_sweep, plan, model, shards, found, problems)
            continue
        for seed in study.finetune.seeds if study.finetune else [None]:
            tuned = finetune_job(study, model, seed, problems) if seed is not None else None
            plan.jobs += [tuned] if tuned else []
            add_evals(plan, model, seed, tuned, shards, found, problems)
    if problems:
        raise NeobenchError(list(dict.fromkeys(problems)))  # each shard names the same card
    if not plan.waiting:  # the table waits for every row, a sweep's selected one included
        plan.jobs.append(_table_job(study, plan.jobs))
    return plan


def add_evals(
    plan: Plan,
    model: ResolvedModel,
    seed: int | None,
    tuned: Job | None,
    shards: list[tuple[int, list[str]]],
    found: conflicts.EvalCards,
    problems: list[str],
    row: EvalRow | None = None,
) -> None:
    """The eval jobs of one model (and seed), one per non-empty shard."""
    n = len(shards)
    for k, names in shards:
        if names:
            job = _eval_job(plan.study, model, seed, tuned, (k, n), names, row)
            collect(problems, _mark_eval, job, found, tuned)
            plan.jobs.append(job)


def replan(plan: Plan) -> Plan:
    """The study's plan read again from what its jobs have written since ``plan``."""
    return build_plan(plan.study.file, str(plan.study.output))


def row_name(study: Study, model: ResolvedModel) -> str:
    """The model name results are filed under: the study's name and the model. The seeds of one
    model share it (results/<name>/<revision>/: told apart by the weights' revision), so the
    table shows them as one row of seed replicates (neobench/report/replicates.py)."""
    return f"{study.name}/{model.slug}"


def _log(study: Study, key: str) -> Path:
    return study.output / "logs" / (key.replace("/", "-") + ".log")


def _slurm(study: Study, kind: str) -> Resources | None:
    return getattr(study.slurm, kind) if study.slurm else None


def finetune_job(
    study: Study, model: ResolvedModel, seed: int, problems: list[str], point: str = ""
) -> Job:
    """The fine-tune of ``model`` at ``seed``; ``point``: a sweep point's slug, whose values
    the study's finetune section (as given to this call) holds among its overrides."""
    tune = study.finetune
    assert tune is not None
    slug = f"{model.slug}-{point}" if point else model.slug
    folder = study.output / "finetune" / f"{slug}-seed{seed}"
    argv = ["finetune", "--model", model.path, "--output", str(folder), "--recipe", tune.recipe]
    name = row_name(study, model) + (f"-{point}" if point else "")
    argv += ["--seed", str(seed), "--model-name", name]
    argv += ["--report-to", tune.report_to] if tune.report_to != "none" else []
    argv += _common(study, model) + [f"{k}={v}" for k, v in tune.overrides.items()]
    key = f"finetune/{slug}-seed{seed}"
    job = Job("finetune", key, argv, folder, _log(study, key), _slurm(study, "finetune"))
    job.model, job.seed = model.name, seed
    card = folder / record.FINETUNE_CARD
    if card.is_file():
        problems += conflicts.finetune_conflicts(card, model.path, tune, seed)
        job.done = record.finetune_complete(folder)
    if not job.done and last_checkpoint(folder) is not None:
        job.argv.append("--resume")  # an interrupted run continues from its checkpoint
    return job


def _common(study: Study, model: ResolvedModel) -> list[str]:
    argv = ["--data-dir", study.data_dir] if study.data_dir else []
    return argv + (["--trust-remote-code"] if model.trust_remote_code else [])


@dataclass(frozen=True)
class EvalRow:
    """Where a sweep's eval files its results: the row's name and results root, the key's
    model part, and what the eval is told of the sweep (`neobench eval --sweep FILE`)."""

    name: str
    results: Path
    slug: str
    extra: tuple[str, ...] = ()


def _eval_job(
    study: Study,
    model: ResolvedModel,
    seed: int | None,
    tuned: Job | None,
    shard: tuple[int, int],
    tasks: list[str],
    row: EvalRow | None = None,
) -> Job:
    ev, (k, n) = study.eval, shard
    row = row or EvalRow(row_name(study, model), study.output, model.slug)
    source = str(tuned.output) if tuned else model.path
    argv = ["eval", "--model", source, "--model-name", row.name, "--results", str(row.results)]
    for flag, value in study.eval.conditions().items():
        argv += [f"--{flag.replace('_', '-')}", value]
    for flag, names in (("--tasks", ev.tasks), ("--types", ev.types)):
        argv += [flag, ",".join(names)] if names else []
    argv += ["--shard", f"{k}/{n}", *_common(study, model)]
    # Left out at the default, so jobs planned before these keys existed keep their commands.
    if ev.cache_policy != DEFAULT_POLICY:
        argv += ["--cache-policy", ev.cache_policy]
    if ev.cache_max_gb is not None:
        argv += ["--cache-max-gb", str(ev.cache_max_gb)]
    argv += list(row.extra)
    key = f"eval/{row.slug}{'' if seed is None else f'-seed{seed}'}/{k}of{n}"
    job = Job("eval", key, argv, row.results, _log(study, key), _slurm(study, "eval"))
    job.after = [tuned.key] if tuned else []
    job.model, job.seed, job.shard, job.tasks = model.name, seed, shard, tasks
    return job


def _mark_eval(job: Job, found: conflicts.EvalCards, tuned: Job | None) -> None:
    """Done when the model's results folder holds every task of the shard (and the model it
    evaluates is the finished fine-tune, not an earlier one)."""
    name = job.argv[job.argv.index("--model-name") + 1]
    source = job.argv[job.argv.index("--model") + 1]
    conflicts.eval_conflicts(found, name, job.argv)
    if tuned is not None and not tuned.done:
        return
    since = conflicts.finished_at(tuned.output) if tuned else None
    folder = found.folder(name, since, source)
    job.done = folder is not None and all((folder / f"{t}.json").is_file() for t in job.tasks)


def table_inputs(study: Study, jobs: list[Job]) -> dict[str, Any]:
    """The arguments of report.leaderboard.leaderboard for the study's table (and its job)."""
    baseline = None
    if study.baseline:
        first = next(j for j in jobs if j.kind == "eval" and j.model == study.baseline)
        baseline = first.argv[first.argv.index("--model-name") + 1]
    return {
        "results": [str(study.output)],
        "benchmark": study.eval.benchmark,
        "reference": study.reference,
        "baseline": baseline,
    }


def _table_job(study: Study, jobs: list[Job]) -> Job:
    out = study.output / TABLE_FILE
    given = table_inputs(study, jobs)
    argv = ["table", "--results", str(study.output), "--benchmark", study.eval.benchmark]
    argv += ["--out", str(out), "--html", str(out.with_name(PAGE_FILE)), "--ci"]
    for flag in ("reference", "baseline"):
        argv += [f"--{flag}", given[flag]] if given[flag] else []
    evals = [j.key for j in jobs if j.kind == "eval"]
    job = Job("table", "table", argv, out, _log(study, "table"), _slurm(study, "table"))
    job.after = evals
    job.done = all(j.done for j in jobs) and _newer_than_results(out, study.output)
    return job


def _newer_than_results(table: Path, root: Path) -> bool:
    """The table file exists and no task result was written after it."""
    if not table.is_file():
        return False
    newest = max((p.stat().st_mtime for p in (root / "results").rglob("*.json")), default=0.0)
    return table.stat().st_mtime >= newest
