"""A swept model's jobs: every point's fine-tunes; once all are complete, the selection (from
their cards alone) and the evals of the selected point (every point with `sweep_eval: all`)."""

from __future__ import annotations

import dataclasses

from neobench.core.selection import check_selection, record_path
from neobench.study import conflicts
from neobench.study.jobs import EvalRow, Job, Plan, add_evals, finetune_job, row_name
from neobench.study.models import ResolvedModel
from neobench.study.sweep import SENSITIVITY, Point, points, select, sweep_sha256


def plan_sweep(
    plan: Plan,
    model: ResolvedModel,
    shards: list[tuple[int, list[str]]],
    found: conflicts.EvalCards,
    problems: list[str],
) -> None:
    """Add ``model``'s sweep jobs to ``plan``; its evals only once its point is selected."""
    study, tune = plan.study, plan.study.finetune
    assert tune is not None
    grid = points(tune.sweep)
    tuned: dict[Point, dict[int, Job]] = {}
    for point in grid:
        at_point = dataclasses.replace(tune, overrides={**tune.overrides, **point.overrides})
        given = dataclasses.replace(study, finetune=at_point)
        tuned[point] = {
            seed: finetune_job(given, model, seed, problems, point.slug) for seed in tune.seeds
        }
        plan.jobs += tuned[point].values()
    if not all(job.done for jobs in tuned.values() for job in jobs.values()):
        _wait(plan, model, len(grid), sum(1 for _, names in shards if names))
        return
    sha = sweep_sha256(tune.recipe, tune.overrides, tune.sweep)
    folders = {p: {s: job.output for s, job in jobs.items()} for p, jobs in tuned.items()}
    record = record_path(study.output, model.slug)
    chosen = check_selection(record, select(row_name(study, model), sha, tune.sweep, folders))
    plan.selections[record] = chosen  # written by the launcher, before the evals run
    plan.notes.append(
        f"{model.name}: the sweep selected {chosen.selected} (dev {chosen.metric} "
        f"{chosen.point(chosen.selected)['mean']:.4f}, mean over {len(tune.seeds)} seed(s)); "
        f"record: {record}"
    )
    sensitivity: conflicts.EvalCards | None = None  # scanned once, if any point needs it
    name = row_name(study, model)
    for point in grid:
        if point.label == chosen.selected:
            row = EvalRow(name, study.output, model.slug, ("--sweep", str(record)))
            where = found
        elif tune.sweep_eval == "all":
            # Not selected: a fixed-recipe run at that value, filed apart under
            # OUTPUT/sensitivity, so the main table holds only the selected rows.
            at = f"-{point.slug}"
            row = EvalRow(name + at, study.output / SENSITIVITY, model.slug + at)
            sensitivity = sensitivity or conflicts.EvalCards.scan(row.results)
            where = sensitivity
        else:
            continue
        for seed, job in tuned[point].items():
            add_evals(plan, model, seed, job, shards, where, problems, row)


def _wait(plan: Plan, model: ResolvedModel, n_points: int, n_shards: int) -> None:
    """The model's evals cannot be planned yet: say so, and what they will request."""
    study, tune = plan.study, plan.study.finetune
    assert tune is not None
    evaluated = n_points if tune.sweep_eval == "all" else 1
    jobs = evaluated * len(tune.seeds) * n_shards
    plan.waiting.append(model.name)
    if study.slurm is not None:
        plan.waiting_gpu_hours += jobs * study.slurm.eval.gpus * study.slurm.eval.hours
    what = "every point" if evaluated > 1 else "the selected point"
    plan.notes.append(
        f"{model.name}: {n_points} sweep points x {len(tune.seeds)} seed(s) fine-tuned first; "
        f"once all are complete the point with the best dev metric is selected, then {jobs} "
        f"eval job(s) of {what} and the table are planned (run the study again, or --wait)."
    )
