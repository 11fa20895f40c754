"""`neobench eval`: tasks from mteb's benchmark objects -> prompts -> mteb.evaluate -> results/.

The results layout, written by mteb's ResultCache: docs/guide.md, "`neobench eval`". The steps of
run_eval are here; their pieces beside it: checks, model, results_folder, runcard, outcomes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neobench.core import results
from neobench.core.cards import EvalCard, EvalInstructions
from neobench.core.errors import RunFailed, disk_full
from neobench.core.stages import stage
from neobench.encoder.cache import EmbeddingCache
from neobench.evaluation import model as eval_model
from neobench.evaluation.adapter import MtebEncoder
from neobench.evaluation.cache_use import CacheUse
from neobench.evaluation.checks import prepare_tasks
from neobench.evaluation.claims import Claim
from neobench.evaluation.outcomes import EvalSummary, Reporter, TaskOutcome
from neobench.evaluation.results_folder import (
    check_same_conditions,
    disk_full_message,
    start_card,
    write_card,
)
from neobench.evaluation.runcard import end_card, new_card
from neobench.evaluation.staging import evaluate_staged
from neobench.models.load import LoadedModel
from neobench.protocol import mirror
from neobench.protocol.config import EvalConfig
from neobench.protocol.instructions import mteb_prompts

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

__all__ = ["EvalConfig", "Reporter", "check_same_conditions", "run_eval"]  # callers take these

logger = logging.getLogger(__name__)


@dataclass
class _Prepared:
    """What _prepare readies for the task loop (steps 4-6): an eval run in progress, private to
    the runner; a finished run is read back from its results as core/runs.Run."""

    root: Path  # the results root (--results)
    results: Any  # mteb.ResultCache at the root
    encoder: MtebEncoder
    embedding_cache: EmbeddingCache | None
    cache_use: CacheUse  # what the cache stores, task by task
    card: EvalCard
    card_path: Path
    batch_size: int
    predictions: bool  # save per-item units beside each result


def run_eval(
    cfg: EvalConfig,
    reporter: Reporter | None = None,
    *,
    model_hook: Callable[[LoadedModel], None] | None = None,
) -> EvalSummary:
    """Evaluate one model on (a shard of) a benchmark; finished tasks are skipped. ``model_hook``
    sees the loaded model before anything uses it (benchmarks/host_pipeline.py nulls its forward).
    """
    with stage("setup"):  # checks, data location, model, prompts, run card
        prepared = _prepare(cfg, model_hook)
    if prepared is None:
        return EvalSummary(Path(cfg.results).expanduser().resolve(), None)
    # 7. Tasks, one at a time, so a kill loses at most the task in flight.
    tasks, run = prepared
    return _run_tasks(tasks, run, reporter or Reporter())


def _prepare(
    cfg: EvalConfig, model_hook: Callable[[LoadedModel], None] | None
) -> tuple[list[AbsTask], _Prepared] | None:
    """Steps 1-6: everything before the first task; None when the shard holds no task."""
    import mteb

    # 1. Inputs: every cheap check at once, then this shard's tasks.
    inputs = prepare_tasks(cfg)
    tasks, profile = inputs.tasks, inputs.profile
    root = Path(cfg.results).expanduser().resolve()
    if not tasks:
        logger.warning("shard %s holds no task (more shards than tasks)", cfg.shard)
        return None
    # 2. Data: every task must be loadable before the model is loaded.
    data = mirror.locate(tasks, cfg.data_dir, cfg.benchmark)
    # 3. Prompts: the profile's, which replace whatever the model folder carries.
    prompts, without_instruction = mteb_prompts(profile, tasks)
    instructions = EvalInstructions(
        profile.name, profile.source, profile.sha256, prompts, without_instruction
    )
    # 4. Embedding cache, before the model: an unusable folder fails in seconds.
    cache_use = CacheUse.of(cfg, prompts, tasks)
    embedding_cache = cache_use.open(cfg.cache_dir)
    # 5. Model, and the encoder mteb calls.
    with stage("model load"):
        model = eval_model.load(cfg)
    if model_hook is not None:
        model_hook(model.loaded)
    encoder = eval_model.encoder(cfg, model, profile, prompts, embedding_cache)
    # 6. Run card, written before any work; the results folder must not hold runs made under
    # other conditions.
    card = new_card(cfg, tasks, model, instructions, data, inputs.shard)
    results = mteb.ResultCache(root)
    results_dir = results.get_task_result_path("_", encoder.mteb_model_meta).parent
    path = start_card(results_dir, card, root)
    keep_units = not cfg.no_predictions
    return tasks, _Prepared(
        root, results, encoder, embedding_cache, cache_use, card, path, cfg.batch_size, keep_units
    )


def _run_tasks(tasks: list[AbsTask], run: _Prepared, reporter: Reporter) -> EvalSummary:
    """Each task evaluated (or found done), the card rewritten after each; the card is ended
    whatever happens (complete, failed, interrupted). A task is evaluated only under its claim
    (evaluation/claims.py): one another eval of this run is evaluating is left for the end, then
    waited for, and found done (or, if that eval failed or died, evaluated here)."""
    card = run.card
    folder = run.card_path.parent.parent
    summary = EvalSummary(folder, run.card_path, *results.identity(run.root, folder))
    reporter.start(len(tasks), summary.results_dir)
    # The one decision of what is left to run (core/results.py), made before the first task and
    # made again for each task under its claim (another eval may have finished it meanwhile).
    left, _ = results.left_to_run(folder, tasks)
    to_run = {t.metadata.name for t in left}
    order = {t.metadata.name: i for i, t in enumerate(tasks)}
    skipped: list[tuple[AbsTask, Claim]] = []  # claimed by another eval: waited for at the end
    try:
        for index, task in enumerate(tasks):
            name = task.metadata.name
            if name not in to_run:
                outcome = _found_done(task, folder)
                reporter.task_done(outcome)
            else:
                claim = Claim(folder, name)
                if not claim.take():
                    logger.warning(
                        "%s is being evaluated by %s: this eval runs its other tasks first, "
                        "then waits for that one and takes its result",
                        name,
                        claim.who(),
                    )
                    skipped.append((task, claim))
                    continue
                later = [t.metadata.name for t in tasks[index + 1 :] if t.metadata.name in to_run]
                with claim:
                    outcome = _claimed_task(task, folder, run, reporter, later)
            _record(outcome, summary, run, order)
        for i, (task, claim) in enumerate(skipped):
            name = task.metadata.name
            if not claim.take():  # still held: wait for it
                logger.warning(
                    "waiting for %s to finish %s (Ctrl-C stops this eval; its finished tasks "
                    "are kept)",
                    claim.who(),
                    name,
                )
                claim.take(wait=True)
            with claim:
                later = [t.metadata.name for t, _ in skipped[i + 1 :]]
                outcome = _claimed_task(task, folder, run, reporter, later)
            _record(outcome, summary, run, order)
    except KeyboardInterrupt:
        card.status = "interrupted"
        raise
    except RunFailed:
        if card.status == "running":
            card.status = "failed"
        raise
    finally:
        # The tokenizer processes, if any: killed, not waited for (the kernel reaps them).
        run.encoder.fast.close(wait=False)
        use = run.cache_use.record(run.embedding_cache)
        end_card(card, run.card_path, run.encoder.fast, run.embedding_cache, summary, use)
    return summary


def _record(
    outcome: TaskOutcome, summary: EvalSummary, run: _Prepared, order: dict[str, int]
) -> None:
    """A task's outcome into the summary and the card (both in the run's task order, whatever
    order the tasks ended in), the card rewritten; a full disk ends the run."""
    summary.outcomes.append(outcome)
    summary.outcomes.sort(key=lambda o: order[o.task])
    card = run.card
    card.tasks[outcome.task] = outcome.card_entry()
    card.tasks = dict(sorted(card.tasks.items(), key=lambda item: order[item[0]]))
    if outcome.disk_full:
        card.status = "failed: results disk full"
        raise RunFailed(disk_full_message(run.root, summary))
    write_card(run.card_path, card, run.root, summary)


def _claimed_task(
    task: AbsTask, folder: Path, run: _Prepared, reporter: Reporter, later: list[str]
) -> TaskOutcome:
    """A task under this process's claim: found done (by an earlier run, or by another eval
    while this one waited), else evaluated; a result file mteb cannot read is moved aside first
    (only under the claim: never a file another eval is publishing)."""
    left, unreadable = results.left_to_run(folder, [task])
    if not left:
        outcome = _found_done(task, folder)
        reporter.task_done(outcome)
        return outcome
    for path in unreadable.values():
        aside = path.with_name(path.name + f".unreadable-{int(time.time())}")
        path.rename(aside)
        logger.warning("%s was unreadable; moved to %s and re-running", path, aside)
    return _run_task(task, folder, run, reporter, later)


def _found_done(task: AbsTask, folder: Path) -> TaskOutcome:
    """A task whose result is complete: not run again, with or without units (a result from
    before they existed, or made with --no-predictions, is not re-run for them)."""
    name = task.metadata.name
    outcome = TaskOutcome(name, task.metadata.type, "cached")
    outcome.main_score = float(results.read_task(results.task_path(folder, name)).get_score())
    found = results.units_file(folder, name)
    outcome.units = found is not None
    outcome.units_bytes = found.stat().st_size if found else None
    return outcome


def _run_task(
    task: AbsTask, folder: Path, run: _Prepared, reporter: Reporter, later: list[str]
) -> TaskOutcome:
    """One task evaluated, its new embeddings stored as the cache policy decides (``later``: the
    run's tasks still to run after it); a failure is recorded in the outcome (the run goes on),
    an interrupt is not."""
    name = task.metadata.name
    outcome = TaskOutcome(name, task.metadata.type, "evaluated")
    reporter.task_started(name)
    run.cache_use.before_task(task, later, run.encoder.fast)
    start = time.perf_counter()
    try:
        size = evaluate_staged(task, run.encoder, run.results, run.batch_size, run.predictions)
        outcome.units, outcome.units_bytes = size is not None, size
        written = results.units_file(folder, name) if size is not None else None
        outcome.units_sha256 = results.digest(written) if written else None
        # The score of the file as mteb stored it (rounded to 6 decimals): what the card
        # records and what every reader checks the file against (core/results.py).
        outcome.main_score = float(results.read_task(results.task_path(folder, name)).get_score())
    except Exception as error:  # an interrupt is no Exception: it ends the run
        outcome.status, outcome.error = "failed", _describe(error)
        outcome.disk_full = disk_full(error)
        # The traceback is for developers (-v); the user gets the one-line reason.
        logger.debug("task %s failed", name, exc_info=True)
    outcome.seconds = round(time.perf_counter() - start, 2)
    reporter.task_done(outcome)
    return outcome


def _describe(error: BaseException) -> str:
    """One line: the error's type and its message's first line."""
    if disk_full(error):
        return "the disk is full"
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
