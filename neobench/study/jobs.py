"""A study's jobs as plain records, and how one fine-tune or eval job of a model is made (when
one is done: docs/studies.md, "What is done, and re-running"). plan.py orders them for a study,
sweep_plan.py for a swept model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neobench.core import cards as record
from neobench.core import results
from neobench.core.errors import collect
from neobench.protocol.cache_policy import DEFAULT_POLICY
from neobench.study import conflicts
from neobench.study.kinds import JobKind, eval_done
from neobench.study.models import ResolvedModel
from neobench.study.spec import Resources, Study
from neobench.train.output import last_checkpoint


@dataclass
class Job:
    kind: JobKind  # what running it means (study/kinds.py); its word is accepted too
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
    # eval: the name its results are filed under and the model folder or hub id it evaluates
    model_name: str | None = None
    source: str | None = None
    point: str | None = None  # glue: its grid point's key (folder name)

    def __post_init__(self) -> None:
        self.kind = JobKind(self.kind)


TABLE_KEY = "table"  # the MTEB table's job; the GLUE table's is table/glue


@dataclass
class Plan:
    study: Study
    models: list[ResolvedModel]
    jobs: list[Job]
    notes: list[str] = field(default_factory=list)
    tasks: dict[str, Any] = field(default_factory=dict)  # the benchmark's tasks by name
    # Models whose sweep has not selected yet (their evals and the table are planned once it
    # has), and what those jobs will request.
    waiting: list[str] = field(default_factory=list)
    waiting_gpu_hours: float = 0.0
    # The sweeps' choices (record path -> Selection), written only when jobs run (save).
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
        """The MTEB table's job; None while a sweep has not selected (it is planned after), and
        in a study without an eval section."""
        return next((j for j in self.jobs if j.key == TABLE_KEY), None)

    def table_files(self) -> str:
        """The files the plan's tables are written to (the MTEB table, the GLUE table)."""
        return ", ".join(str(j.output) for j in self.jobs if j.kind is JobKind.TABLE)

    def job(self, key: str) -> Job:
        return next(j for j in self.jobs if j.key == key)


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
            asked = plan.study.eval.conditions()
            collect(problems, _mark_eval, job, found, tuned, plan.tasks, asked)
            plan.jobs.append(job)


def row_name(study: Study, model: ResolvedModel) -> str:
    """The name results are filed under, <study>/<model>: shared by the model's seeds (told
    apart by revision), so the table shows one row of seed replicates (report/replicates.py)."""
    return f"{study.name}/{model.slug}"


def job_log(study: Study, key: str) -> Path:
    return study.output / "logs" / (key.replace("/", "-") + ".log")


def finetune_key(model_slug: str, seed: int, point: str = "") -> str:
    """A fine-tune's job key, which is also its folder under the study's output."""
    return f"finetune/{model_slug}{f'-{point}' if point else ''}-seed{seed}"


def finetune_job(
    study: Study, model: ResolvedModel, seed: int, problems: list[str], point: str = ""
) -> Job:
    """The fine-tune of ``model`` at ``seed``; ``point``: a sweep point's slug (its values are
    among the overrides of the ``study`` given)."""
    tune = study.finetune
    assert tune is not None
    key = finetune_key(model.slug, seed, point)
    folder = study.output / key
    argv = ["finetune", "--model", model.path, "--output", str(folder), "--recipe", tune.recipe]
    name = row_name(study, model) + (f"-{point}" if point else "")
    argv += ["--seed", str(seed), "--model-name", name]
    argv += ["--report-to", tune.report_to] if tune.report_to != "none" else []
    argv += _common(study, model) + [f"{k}={v}" for k, v in tune.overrides.items()]
    resources = JobKind.FINETUNE.resources(study.slurm)
    job = Job(JobKind.FINETUNE, key, argv, folder, job_log(study, key), resources)
    job.model, job.seed = model.name, seed
    card = folder / record.FINETUNE_CARD
    if card.is_file():
        problems += conflicts.finetune_conflicts(card, model.path, tune, seed)
        job.done = results.finetune_finished(folder)
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
    # Left out at the default: jobs planned before these keys existed keep their commands.
    if ev.cache_policy != DEFAULT_POLICY:
        argv += ["--cache-policy", ev.cache_policy]
    if ev.cache_max_gb is not None:
        argv += ["--cache-max-gb", str(ev.cache_max_gb)]
    argv += list(row.extra)
    key = f"eval/{row.slug}{'' if seed is None else f'-seed{seed}'}/{k}of{n}"
    kind = JobKind.EVAL
    job = Job(kind, key, argv, row.results, job_log(study, key), kind.resources(study.slurm))
    job.after = [tuned.key] if tuned else []
    job.model, job.seed, job.shard, job.tasks = model.name, seed, shard, tasks
    job.model_name, job.source = row.name, source
    return job


def _mark_eval(
    job: Job,
    found: conflicts.EvalCards,
    tuned: Job | None,
    tasks: dict[str, Any],
    asked: dict[str, str],
) -> None:
    """Done when eval_done says so for the shard's tasks, of the finished fine-tune (not an
    earlier one)."""
    assert job.model_name is not None
    conflicts.eval_conflicts(found, job.model_name, asked)
    if tuned is not None and not tuned.done:
        return
    since = conflicts.finished_at(tuned.output) if tuned else None
    job.done = eval_done(found, job, [tasks[t] for t in job.tasks], since)


def glue_jobs(study: Study, model: ResolvedModel, points: list[str]) -> list[Job]:
    """The GLUE runs of ``model``'s pretrained backbone: one job per task x point (``points``:
    the grid's keys) x seed, each `neobench glue --point` of the study's grid, its runs filed
    under <output>/glue/<study>/<model>/ (row_name)."""
    from neobench.protocol.glue import parse_tasks

    glue = study.glue
    assert glue is not None
    name = row_name(study, model)
    jobs = []
    for task in parse_tasks(glue.tasks):
        for point in points:
            for seed in glue.seeds:
                argv = ["glue", "--model", model.path, "--model-name", name, "--tasks",
                        task.name, "--grid", glue.grid, "--point", point, "--seeds", str(seed),
                        "--recipe", glue.recipe, "--output", str(study.output)]  # fmt: skip
                argv += ["--data-dir", glue.data_dir] if glue.data_dir else []
                argv += ["--trust-remote-code"] if model.trust_remote_code else []
                argv += [f"--set={k}={v}" for k, v in glue.overrides.items()]
                key = f"glue/{model.slug}/{task.name}/{point}/seed{seed}"
                kind = JobKind.GLUE
                log = job_log(study, key)
                job = Job(kind, key, argv, study.output, log, kind.resources(study.slurm))
                job.model, job.seed, job.tasks, job.point = model.name, seed, [task.name], point
                job.model_name, job.source = name, model.path
                job.done = kind.complete(job, {})
                jobs.append(job)
    return jobs


def glue_grid(study: Study, problems: list[str]) -> tuple[list[str], dict[str, Any]]:
    """The glue section checked against the GLUE recipe (tasks, recipe, overrides, grid, the
    tasks' data): the grid's point keys and each point's recipe values; each problem added to
    ``problems``."""
    from neobench.protocol.glue import GlueSource, known_tasks, parse_tasks
    from neobench.protocol.glue_recipe import apply_glue_overrides, load_glue_recipe, point_key

    glue = study.glue
    if glue is None:
        return [], {}
    found: list[str] = []
    collect(found, parse_tasks, glue.tasks)
    base = collect(found, load_glue_recipe, glue.recipe)
    recipe = base
    if base is not None and glue.overrides:
        recipe = collect(found, apply_glue_overrides, base, glue.overrides)
    grid = collect(found, base.grid, glue.grid) if base is not None else None  # whatever the above
    source = collect(found, GlueSource.of, glue.data_dir)
    if source is not None:
        found += source.problems(known_tasks(glue.tasks))
    problems += [f"glue: {p}" for p in found]
    if grid is None or recipe is None:
        return [], {}
    values = {point_key(p): recipe.at(p) for p in grid.points()}
    return list(values), values
