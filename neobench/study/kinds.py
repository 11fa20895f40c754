"""The kinds of a study's job (fine-tune, eval, table, GLUE run) and what each kind means for
running one: how its progress is read, when it is complete, what an exit 0 without its output
says, which Slurm resources it takes. Launchers, the Slurm job, the canary and the store ask the
job's kind; no other module tells the kinds apart by name.

Imports beyond the standard library are made where they are needed: a Slurm job imports this
module on the node before its command starts.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from neobench.study.conflicts import EvalCards
    from neobench.study.jobs import Job
    from neobench.study.spec import Resources, Slurm


class JobKind(StrEnum):
    """A job's kind; its value is the word the study's files and output use (slurm.<kind>,
    `study status`, the job keys)."""

    FINETUNE = "finetune"
    EVAL = "eval"
    TABLE = "table"
    GLUE = "glue"  # one GLUE run: a backbone on a task at a grid point and seed (docs/glue.md)

    def resources(self, slurm: Slurm | None) -> Resources | None:
        """What a job of this kind asks Slurm for: the study's slurm.<kind> section (None
        without a slurm section)."""
        return None if slurm is None else getattr(slurm, self.value)

    @property
    def checked_before_first_start(self) -> bool:
        """Whether a Slurm job tests its output for completeness before its first start. An
        eval's test reads mteb's benchmark (5 s of CPU), and the study submits only evals it
        found unfinished: its first start skips the test, a requeued start makes it."""
        return self is not JobKind.EVAL

    @property
    def exit_zero_is_done(self) -> bool:
        """Whether the command's exit status 0 is its own word that the job is done. A
        fine-tune exits 0 at a time-limit notice too, having saved a checkpoint: only its card
        says it is complete."""
        return self is not JobKind.FINETUNE

    @property
    def under_torchrun(self) -> bool:
        """Whether a job of this kind given several GPUs runs as one process per GPU
        (torchrun): a fine-tune's data-parallel steps; an eval uses one GPU."""
        return self is JobKind.FINETUNE

    @property
    def estimate_bound(self) -> str:
        """What a `--dry-run` estimate of this kind's hours is, where it is not a plain
        estimate: a GLUE run's counts every epoch, though early stopping ends most sooner."""
        if self is JobKind.GLUE:
            return "an upper bound: every epoch, as if no run stopped early"
        return ""

    @property
    def resumes(self) -> bool:
        """Whether a job started again (requeued, run again) continues from a checkpoint it
        left (`neobench finetune --resume`)."""
        return self is JobKind.FINETUNE

    def progress(self, job: Job) -> int:
        """How far ``job`` has got, as one number that only grows: a fine-tune's last whole
        checkpoint step (its model saved: above any step), the result files of an eval's tasks
        (other jobs write beside them: only its own count), 0 for a table."""
        if self is JobKind.FINETUNE:
            from neobench.train.output import last_checkpoint

            if (job.output / "model.safetensors").is_file():
                return sys.maxsize
            last = last_checkpoint(job.output)
            return int(last.rsplit("-", 1)[-1]) if last else 0
        if self is JobKind.TABLE:
            return 0
        if self is JobKind.GLUE:
            return _glue_progress(job)
        from neobench.core.results import RESULTS, written

        own = self.results_folder(job)
        return written(own if own is not None else job.output / RESULTS, job.tasks)

    def results_folder(self, job: Job) -> Path | None:
        """An eval's own results folder, as `neobench eval` names it: the model's folder, and
        in it a local model's revision (its content hash), so that other models' and other
        seeds' results of the same tasks are not taken for this job's. None for the other
        kinds, and for an eval whose model name is not known."""
        if self is not JobKind.EVAL or not job.model_name:
            return None
        from neobench.core.results import model_folder

        folder = model_folder(job.output, job.model_name)
        if job.source and Path(job.source).is_dir():
            from neobench.models.fingerprint import fingerprint

            folder = folder / fingerprint(Path(job.source))
        return folder

    def complete(self, job: Job, tasks: str | Mapping[str, Any]) -> bool:
        """Whether ``job`` has its whole output, by the rules the study marks jobs done by: a
        fine-tune whose card says complete; an eval holding a complete result of each of its
        tasks (``tasks``: the mteb tasks by name, or the benchmark to read them from). A table
        is made again whenever it runs."""
        if self is JobKind.FINETUNE:
            from neobench.core.results import finetune_finished

            return finetune_finished(job.output)
        if self is JobKind.GLUE:
            return glue_done(job)
        if self is JobKind.TABLE or not job.tasks or not tasks:
            return False
        from neobench.study.conflicts import EvalCards

        if isinstance(tasks, str):
            from neobench.protocol.tasks import load_benchmark, select_tasks

            chosen = select_tasks(load_benchmark(tasks), job.tasks)
        else:
            chosen = [tasks[name] for name in job.tasks]
        return eval_done(EvalCards.scan(job.output), job, chosen)

    def unfinished(self, output: Path) -> str | None:
        """Why a job whose command exited 0 lacks its output, or None: a fine-tune whose card
        does not say complete (an eval's or a table's exit status is its own word)."""
        if self.exit_zero_is_done:
            return None
        from neobench.core import cards, results
        from neobench.core.errors import NeobenchError

        path = output / cards.FINETUNE_CARD
        try:
            if results.finetune_finished(output):
                return None
            status = cards.read_finetune_card(path).status if path.is_file() else None
        except (NeobenchError, OSError) as error:
            return f"its fine-tune card cannot be read ({error})"
        return f"its fine-tune card says {status}" if status else "it wrote no fine-tune card"

    def close_card(self, output: Path, how: str) -> None:
        """Mark a fine-tune card still saying running, whose job has ended (killed: SIGKILL,
        out of memory, a node lost), interrupted and how, so no reader takes it for a live
        run. Evals and tables keep no card of a running job."""
        if self is not JobKind.FINETUNE:
            return
        from neobench.core import cards
        from neobench.core.card_io import now
        from neobench.core.errors import NeobenchError

        path = output / cards.FINETUNE_CARD
        if not path.is_file():
            return
        try:
            card = cards.read_finetune_card(path)
            if card.status == "running":
                card.status, card.finished = f"interrupted: {how}", now()
                cards.write_finetune_card(path, card)
        except (NeobenchError, OSError):
            return  # a card that cannot be read or written is reported by the commands needing it


def glue_done(job: Job) -> bool:
    """Whether GLUE job ``job``'s run (its task, point and seed) is complete under its output,
    by the rule `neobench glue` skips runs by."""
    from neobench.glue.grid import run_complete

    assert job.model_name and job.point is not None and job.seed is not None
    return run_complete(job.output, job.model_name, job.tasks[0], job.point, job.seed)


def _glue_progress(job: Job) -> int:
    """A GLUE run's last saved checkpoint step (above any step once complete)."""
    if glue_done(job):
        return sys.maxsize
    from neobench.glue.grid import model_folder
    from neobench.glue.run import TRAINER

    base = model_folder(job.output, str(job.model_name), "x").parent
    run = f"*/{job.tasks[0]}/{job.point}/seed-{job.seed}"
    steps = [
        int(c.name.rsplit("-", 1)[-1])
        for c in base.glob(f"{run}/{TRAINER}/checkpoint-*")
        if c.name.rsplit("-", 1)[-1].isdigit()
    ]
    return max(steps, default=0)


def eval_done(found: EvalCards, job: Job, tasks: list[Any], since: str | None = None) -> bool:
    """Whether eval ``job``'s newest eval folder (started after ``since``) holds a complete
    result of each of ``tasks`` (mteb task objects), by the rule `neobench eval` skips tasks
    by."""
    from neobench.core import results

    folder = found.folder(str(job.model_name), since, job.source)
    return folder is not None and not results.left_to_run(folder, tasks)[0]
