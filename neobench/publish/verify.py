"""`neobench publish --verify K`: K of the published tasks evaluated again from the model, under
the conditions their run card recorded, each main score against the published one within 0.001,
the difference the results repository's maintainers accept when they re-run a submission.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from neobench.publish.results import Member

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


def verify(member: Member, count: int, data_dir: str | None) -> list[Check]:
    """The ``count`` smallest published tasks of ``member`` (mteb's statistics), re-run."""
    from mteb.results import TaskResult

    from neobench.core import results
    from neobench.evaluation.runner import run_eval
    from neobench.protocol.config import EvalConfig
    from neobench.protocol.tasks import load_benchmark, select_tasks, task_cost

    files = {path.stem: path for path in results.task_files(member.run.folder)}
    config = member.eval_card.config
    benchmark = str(config.get("benchmark") or member.eval_card.benchmark)
    tasks = select_tasks(load_benchmark(benchmark), sorted(files))
    chosen = [t.metadata.name for t in sorted(tasks, key=lambda t: (task_cost(t), t.metadata.name))]
    chosen = chosen[:count]
    with tempfile.TemporaryDirectory(prefix="neobench-verify-") as tmp:
        summary = run_eval(
            EvalConfig(
                model=member.model_path,
                model_name=member.run.model,
                benchmark=benchmark,
                tasks=chosen,
                results=str(Path(tmp)),
                data_dir=data_dir or config.get("data_dir"),
                instructions=str(config.get("instructions") or "paper"),
                max_seq_length=config.get("max_seq_length") or "512",
                dtype=str(config.get("dtype") or "auto"),
                no_cache=True,
                no_predictions=True,
            )
        )
    found = {o.task: o for o in summary.outcomes}
    checks = []
    for task in chosen:
        published = float(TaskResult.from_disk(files[task]).get_score())
        outcome = found.get(task)
        if outcome is None or outcome.status == "failed" or outcome.main_score is None:
            error = outcome.error if outcome else "not run"
            checks.append(Check(task, published, None, error))
        else:
            checks.append(Check(task, published, float(outcome.main_score)))
    return checks
