"""`neobench publish --verify K`: K of the published tasks evaluated again from the model, under
the conditions their run card recorded, each main score against the published one within 0.001,
the difference the results repository's maintainers accept when they re-run a submission.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from neobench.core import results
from neobench.core.errors import NeobenchError
from neobench.protocol.config import EvalConfig
from neobench.publishing.results import Member

TOLERANCE = 0.001  # main scores are 0-1: the maintainers' accepted difference


@dataclass
class Check:
    task: str
    published: float
    rerun: float | None  # None: the re-run failed (its error in ``error``)
    error: str | None = None

    @property
    def within(self) -> bool:
        return self.rerun is not None and abs(self.rerun - self.published) <= TOLERANCE

    def line(self) -> str:
        if self.rerun is None:
            return f"{self.task}: published {self.published:.6f}, re-run failed: {self.error}"
        verdict = "within" if self.within else "NOT within"
        return (
            f"{self.task}: published {self.published:.6f}, re-run {self.rerun:.6f}, difference "
            f"{abs(self.rerun - self.published):.6f} ({verdict} {TOLERANCE})"
        )


@dataclass
class Rerun:
    """What ``verify`` re-runs, checked by ``plan``: the member, its chosen tasks, and the eval
    under its run card's conditions (its ``results`` a temporary folder made at the run)."""

    member: Member
    chosen: list[str]
    config: EvalConfig


def plan(member: Member, count: int, data_dir: str | None) -> Rerun:
    """The ``count`` smallest published tasks of ``member`` (mteb's statistics) and their eval,
    with everything it needs checked before anything is written: the model folder its run card
    records, the tasks' data (``data_dir``, else the mirror the card recorded, else
    $NEOBENCH_DATA_DIR or the hub), and the card's conditions."""
    from neobench.evaluation.checks import prepare_tasks
    from neobench.protocol.tasks import load_benchmark, select_tasks, task_cost

    flag = f"--verify {count}"
    whose = f"the run card of {member.run.model}"
    if member.seed is not None:
        whose += f" seed {member.seed}"
    files = {path.stem: path for path in results.task_files(member.run.folder)}
    config = member.eval_card.config
    benchmark = str(config.get("benchmark") or member.eval_card.benchmark)
    tasks = select_tasks(load_benchmark(benchmark), sorted(files))
    tasks = sorted(tasks, key=lambda t: (task_cost(t), t.metadata.name))[:count]
    problems = []
    model = member.model_path
    if not model or not Path(model).expanduser().is_dir():
        card = results.card_paths(member.run.folder)[-1]
        problems.append(
            f"{flag}: the model folder {model or '(none)'} that {whose} records ({card}) is not "
            "on this machine; restore it there, or publish without --verify."
        )
    mirror_dir, data_problems = _data(flag, whose, tasks, benchmark, data_dir, config)
    problems += data_problems
    eval_config = EvalConfig(
        model=model,
        model_name=member.run.model,
        benchmark=benchmark,
        tasks=[t.metadata.name for t in tasks],
        results=tempfile.gettempdir(),  # checked as the folder the run's is made in
        data_dir=mirror_dir,
        instructions=str(config.get("instructions") or "paper"),
        max_seq_length=config.get("max_seq_length") or "512",
        dtype=str(config.get("dtype") or "auto"),
        no_cache=True,
        no_predictions=True,
    )
    if not problems:  # the card's conditions, as `neobench eval` checks its flags
        try:
            prepare_tasks(eval_config)
        except NeobenchError as error:
            where = f"{flag}: the re-run under the conditions {whose} records"
            problems += [f"{where}: {p}" for p in error.problems]
            problems[-1] += " Restore what it names, or publish without --verify."
    if problems:
        raise NeobenchError(problems)
    return Rerun(member, eval_config.tasks, eval_config)


def _data(
    flag: str, whose: str, tasks: list, benchmark: str, given: str | None, config: dict
) -> tuple[str | None, list[str]]:
    """(the mirror the re-run reads, None for the hub; why the chosen tasks' data is not there)."""
    from neobench.protocol import mirror

    recorded = config.get("data_dir")
    value = given or recorded or os.environ.get(mirror.DATA_DIR_ENV) or None
    if value is None:
        try:
            mirror.check_hub_access(tasks, benchmark)
        except NeobenchError as error:
            return None, [f"{flag}: {p}" for p in error.problems]
        return None, []
    if given:
        source = "--data-dir"
    elif recorded:
        source = f"recorded in {whose}"
    else:
        source = f"${mirror.DATA_DIR_ENV}"
    path = Path(str(value)).expanduser().resolve()
    fix = "pass --data-dir with a mirror that holds it, or publish without --verify"
    if not path.is_dir():
        return None, [
            f"{flag}: the mirror {value} ({source}) is not a folder here; pass --data-dir with a "
            "mirror of the tasks' data, or publish without --verify."
        ]
    missing = [n for n in mirror.repo_needs(tasks) if not (path / n.repo_id).is_dir()]
    problems = [
        f"{flag}: task {n.task} needs dataset repo {n.repo_id}, which is not in the mirror "
        f"{path} ({source}); {fix} (a mirror is made on a connected machine by "
        f"`{mirror.prefetch_command(benchmark, [n.benchmark_task], 'DIR')}`)."
        for n in missing
    ]
    return str(path), problems


def verify(rerun: Rerun) -> list[Check]:
    """The tasks ``plan`` chose, re-run, each against its published main score."""
    from mteb.results import TaskResult

    from neobench.evaluation.runner import run_eval

    files = {path.stem: path for path in results.task_files(rerun.member.run.folder)}
    with tempfile.TemporaryDirectory(prefix="neobench-verify-") as tmp:
        summary = run_eval(dataclasses.replace(rerun.config, results=str(Path(tmp))))
    found = {o.task: o for o in summary.outcomes}
    checks = []
    for task in rerun.chosen:
        published = float(TaskResult.from_disk(files[task]).get_score())
        outcome = found.get(task)
        if outcome is None or outcome.status == "failed" or outcome.main_score is None:
            error = outcome.error if outcome else "not run"
            checks.append(Check(task, published, None, error))
        else:
            checks.append(Check(task, published, float(outcome.main_score)))
    return checks
