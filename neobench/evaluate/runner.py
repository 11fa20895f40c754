"""`neobench eval`: tasks from mteb's benchmark objects -> prompts -> mteb.evaluate -> results/.

Results are written by mteb's own ResultCache, in mteb's layout, under an explicit model name
and revision; the evaluation conditions (instruction profile + hash, max sequence length, dtype)
decide the folder, so runs under different conditions never share one:

    <results>/results/<org__model>/<revision>/<Task>.json             standard conditions
    <results>/results/<org__model>/<revision>/experiments/<kw>/<Task>.json   any other
    ... and beside the task files: neobench/run-<time>-shard<K>of<N>-<pid>.yaml (run cards),
    predictions/<Task>.units.json (per-item units, neobench.evaluate.units; not with
    --no-predictions)
"""

from __future__ import annotations

import copy
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neobench.core import card_io, provenance
from neobench.core import cards as record
from neobench.core.cards import (
    EvalCard,
    EvalConditions,
    EvalEnvironment,
    EvalInstructions,
    EvalModel,
    EvalShard,
)
from neobench.core.errors import (
    NeobenchError,
    RunFailed,
    check_choice,
    collect,
    disk_full,
    writable_folder_problems,
)
from neobench.core.runs import units_path
from neobench.core.stages import stage
from neobench.encoder.cache import EmbeddingCache, cache_path
from neobench.encoder.encode import DTYPES, FastEncoder, auto_unpadded, resolve_dtype
from neobench.evaluate.adapter import MtebEncoder
from neobench.evaluate.staging import evaluate_staged
from neobench.models import attention
from neobench.models.load import (
    LoadedModel,
    check_spec,
    load_model,
    parse_max_seq_length,
    resolve_device,
)
from neobench.protocol import config, mirror
from neobench.protocol.config import UNPADDED_CHOICES, EvalConfig, default_token_budget, standard
from neobench.protocol.instructions import (
    InstructionProfile,
    all_mteb_task_names,
    load_profile,
    mteb_prompts,
    validate_profile,
)
from neobench.protocol.tasks import load_benchmark, parse_shard, select_tasks, shard

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

# EvalConfig is defined in neobench.protocol.config and re-exported here, beside run_eval.
__all__ = [
    "EvalConfig",
    "EvalSummary",
    "Reporter",
    "TaskOutcome",
    "check_same_conditions",
    "experiment_kwargs",
    "prepare_tasks",
    "run_eval",
]

logger = logging.getLogger(__name__)


@dataclass
class TaskOutcome:
    task: str
    type: str
    status: str  # cached | evaluated | failed
    main_score: float | None = None
    seconds: float = 0.0
    error: str | None = None
    units: bool = False  # predictions/<Task>.units.json is beside the result (now or from before)
    units_bytes: int | None = None  # its size
    disk_full: bool = False  # the results disk filled up: the run stops after this task

    def card_entry(self) -> dict[str, Any]:
        """The task's row in the run card (the card is keyed by task name)."""
        return {k: v for k, v in asdict(self).items() if k not in ("task", "disk_full")}


@dataclass
class EvalSummary:
    results_dir: Path
    run_card: Path | None
    outcomes: list[TaskOutcome] = field(default_factory=list)
    texts_encoded: int = 0  # texts that went through the model in this run
    texts_requested: int = 0  # texts mteb asked for (the rest came from the embedding cache)
    tokens_encoded: int = 0  # tokens of the encoded texts

    @property
    def failed(self) -> list[TaskOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]


class Reporter:
    """Progress hooks; the library stays silent, the CLI renders these with rich."""

    def start(self, total: int, results_dir: Path) -> None: ...
    def task_started(self, task: str) -> None: ...
    def task_done(self, outcome: TaskOutcome) -> None: ...


@dataclass
class _Model:
    """The loaded model and the precision it runs in (step 4)."""

    loaded: LoadedModel
    device: str
    dtype: str  # float32 | float16 | bfloat16 (autocast)
    tuned: record.OutputModel | None  # set when `neobench finetune` made the model


@dataclass
class _Run:
    """What the task loop works with (steps 5-7 produce it)."""

    root: Path  # the results root (--results)
    results: Any  # mteb.ResultCache at the root
    encoder: MtebEncoder
    embedding_cache: EmbeddingCache | None
    card: EvalCard
    card_path: Path
    batch_size: int
    predictions: bool  # save per-item units beside each result


def prepare_tasks(cfg: EvalConfig) -> tuple[list[AbsTask], InstructionProfile]:
    """Validate every cheap input at once and return (this shard's tasks, profile)."""
    problems: list[str] = []
    benchmark = collect(problems, load_benchmark, cfg.benchmark)
    profile = collect(problems, load_profile, cfg.instructions)
    shard_kn = collect(problems, parse_shard, cfg.shard)
    collect(problems, parse_max_seq_length, cfg.max_seq_length)
    collect(problems, resolve_device, cfg.device)
    collect(problems, check_choice, "--dtype", cfg.dtype, config.DTYPE_CHOICES)
    collect(problems, check_choice, "--unpadded", cfg.unpadded, list(UNPADDED_CHOICES))
    collect(problems, attention.check, cfg.attn_implementation)
    collect(problems, check_spec, cfg.model)
    if cfg.batch_size < 1:
        problems.append(f"--batch-size {cfg.batch_size}: must be a positive number of texts.")
    if cfg.token_budget is not None and cfg.token_budget < 1:
        problems.append(
            f"--token-budget {cfg.token_budget}: must be a positive number of tokens "
            "(or leave it out for the device's default)."
        )
    if profile is not None:
        problems += validate_profile(profile, all_mteb_task_names())
    problems += writable_folder_problems(
        Path(cfg.results), "--results", "Pass a folder you can write, e.g. --results runs/eval."
    )
    selected = (
        collect(problems, select_tasks, benchmark, cfg.tasks, cfg.types) if benchmark else None
    )
    if problems:
        raise NeobenchError(problems)
    k, n = shard_kn
    # mteb hands out the same task objects on every call; copies keep our path edits local.
    return [copy.deepcopy(t) for t in shard(selected, k, n)], profile


def run_eval(
    cfg: EvalConfig,
    reporter: Reporter | None = None,
    *,
    model_hook: Callable[[LoadedModel], None] | None = None,
) -> EvalSummary:
    """Evaluate one model on (a shard of) a benchmark; finished tasks are skipped.

    ``model_hook`` sees the loaded model before anything uses it (`neobench bench host` swaps
    its forward pass for a null one there).
    """
    with stage("setup"):  # checks, data location, model, prompts, run card
        prepared = _prepare(cfg, model_hook)
    if prepared is None:
        return EvalSummary(Path(cfg.results).expanduser().resolve(), None)
    # 8. Tasks, one at a time, so a kill loses at most the task in flight.
    tasks, run = prepared
    return _run_tasks(tasks, run, reporter or Reporter())


def _prepare(
    cfg: EvalConfig, model_hook: Callable[[LoadedModel], None] | None
) -> tuple[list[AbsTask], _Run] | None:
    """Steps 1-7: everything before the first task; None when the shard holds no task."""
    import mteb

    # 1. Inputs: every cheap check at once, then this shard's tasks.
    tasks, profile = prepare_tasks(cfg)
    root = Path(cfg.results).expanduser().resolve()
    if not tasks:
        logger.warning("shard %s holds no task (more shards than tasks)", cfg.shard)
        return None
    # 2. Data: every task must be loadable before the model is loaded.
    data_dir = _locate_data(cfg, tasks)
    # 3. Embedding cache, before the model: a folder that cannot hold it is an error of the
    # command (fixed in seconds); a damaged file is moved aside here with a warning.
    embedding_cache = None if cfg.no_cache else EmbeddingCache(cache_path(cfg.cache_dir))
    # 4. Model.
    with stage("model load"):
        model = _load(cfg)
    if model_hook is not None:
        model_hook(model.loaded)
    # 5. Prompts (the profile's replace whatever the model folder carried) and the encoder.
    prompts, without_instruction = mteb_prompts(profile, tasks)
    encoder = _encoder(cfg, model, profile, prompts, embedding_cache)
    # 6. Run card; the results folder must not hold runs made under other conditions.
    instructions = EvalInstructions(
        profile.name, profile.source, profile.sha256, prompts, without_instruction
    )
    card = _new_card(cfg, tasks, model, instructions, data_dir)
    results = mteb.ResultCache(root)
    results_dir = results.get_task_result_path("_", encoder.mteb_model_meta).parent
    check_same_conditions(results_dir, card.conditions)
    # 7. The card written before any work.
    card_path = _card_path(results_dir, card.shard)
    _write_card(card_path, card, root)
    return tasks, _Run(
        root,
        results,
        encoder,
        embedding_cache,
        card,
        card_path,
        cfg.batch_size,
        predictions=not cfg.no_predictions,
    )


def _locate_data(cfg: EvalConfig, tasks: list[AbsTask]) -> Path | None:
    """The mirror the tasks read from (None: the hub), checked to hold every task's data."""
    data_dir = mirror.resolve_data_dir(cfg.data_dir)
    if data_dir is not None:
        mirror.point_tasks_at_mirror(tasks, data_dir, cfg.benchmark)
    else:
        mirror.check_hub_access(tasks, cfg.benchmark)
    return data_dir


def _load(cfg: EvalConfig) -> _Model:
    device = resolve_device(cfg.device)
    dtype = resolve_dtype(cfg.dtype, device)
    loaded = load_model(
        cfg.model,
        revision=cfg.revision,
        max_seq_length=parse_max_seq_length(cfg.max_seq_length),
        trust_remote_code=cfg.trust_remote_code,
        device=device,
        name=cfg.model_name,
        attn_implementation=cfg.attn_implementation,
        half=dtype != "float32",
        unpadded=auto_unpadded(cfg.unpadded, dtype),
    )
    tuned = record.finetuned_model(Path(loaded.path))
    if tuned and tuned.name and not cfg.model_name:
        loaded.name = tuned.name
    return _Model(loaded, device, dtype, tuned)


def _encoder(
    cfg: EvalConfig,
    model: _Model,
    profile: InstructionProfile,
    prompts: dict[str, str],
    embedding_cache: EmbeddingCache | None,
) -> MtebEncoder:
    loaded = model.loaded
    fast = FastEncoder(
        loaded.model,
        # The weights (hub commit or local content hash), not the results name: the same weights
        # under another --model-name share their embeddings.
        fingerprint=f"{loaded.source}:{loaded.revision}|{loaded.max_seq_length}|{model.dtype}",
        cache=embedding_cache,
        autocast=DTYPES[model.dtype] or False,
        token_budget=cfg.token_budget
        if cfg.token_budget is not None
        else default_token_budget(model.device),
        packed=loaded.packed,
    )
    return MtebEncoder(
        loaded.model,
        prompts,
        fast,
        name=loaded.name,
        revision=loaded.revision,
        experiment_kwargs=experiment_kwargs(profile.name, loaded.max_seq_length),
        declared=record.finetuned_model(Path(loaded.path)),
    )


def _new_card(
    cfg: EvalConfig,
    tasks: list[AbsTask],
    model: _Model,
    instructions: EvalInstructions,
    data_dir: Path | None,
) -> EvalCard:
    """The run card as written before any work (status running, no task yet)."""
    import torch

    k, n = parse_shard(cfg.shard)
    return EvalCard(
        started=card_io.now(),
        owner=card_io.owner(),
        config=asdict(cfg),
        benchmark=cfg.benchmark,
        shard=EvalShard(k, n, [t.metadata.name for t in tasks]),
        conditions=EvalConditions(
            instructions=instructions.profile,
            instructions_sha256=instructions.sha256,
            max_seq_length=model.loaded.max_seq_length,
            dtype=model.dtype,
        ),
        model=_model_section(cfg, model),
        runtime={
            **provenance.device_info(model.device),
            "dtype": model.dtype,
            "autocast": model.dtype != "float32",
            "torch_threads": torch.get_num_threads(),
            "batch_size": cfg.batch_size,
        },
        instructions=instructions,
        data=_data_record(tasks, data_dir),
        seeds={t.metadata.name: getattr(t, "seed", None) for t in tasks},
        environment=card_io.card_from_dict(EvalEnvironment, provenance.environment()),
    )


def _model_section(cfg: EvalConfig, model: _Model) -> EvalModel:
    loaded = model.loaded
    return EvalModel(
        name=loaded.name,
        revision=loaded.revision,
        source=loaded.source,
        kind=loaded.kind,
        path=loaded.path,
        architecture=loaded.architecture,
        max_seq_length=loaded.max_seq_length,
        attn_implementation=loaded.attn_implementation,
        attn_implementation_requested=cfg.attn_implementation,
        unpadded=loaded.unpadded,
        tokenizer=loaded.tokenizer,
        trust_remote_code=loaded.trust_remote_code,
        pooling=_pooling(loaded.model),
        **_finetuned_from(model.tuned),
    )


def _finetuned_from(tuned: record.OutputModel | None) -> dict[str, Any]:
    """The model-section fields a neobench fine-tune contributes: recipe hash, seed, base."""
    if tuned is None:
        return {}
    return {
        "recipe_sha256": tuned.recipe_sha256,
        "finetune_seed": tuned.seed,
        "base_model": tuned.base_model,
        "base_revision": tuned.base_revision,
    }


def _card_path(results_dir: Path, shard: EvalShard) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    base = f"run-{stamp}-shard{shard.k}of{shard.n}-{os.getpid()}"
    path = results_dir / "neobench" / f"{base}.yaml"
    # Two runs of one process within a second (library use, tests) must not share a card.
    serial = 1
    while path.exists():
        serial += 1
        path = path.with_name(f"{base}-{serial}.yaml")
    return path


def _run_tasks(tasks: list[AbsTask], run: _Run, reporter: Reporter) -> EvalSummary:
    """Each task evaluated (or found done), the card rewritten after each; the card is ended
    whatever happens (complete, failed, interrupted)."""
    card = run.card
    summary = EvalSummary(run.card_path.parent.parent, run.card_path)
    reporter.start(len(tasks), summary.results_dir)
    try:
        for task in tasks:
            outcome = _run_task(task, run, reporter)
            summary.outcomes.append(outcome)
            card.tasks[outcome.task] = outcome.card_entry()
            if outcome.disk_full:
                card.status = "failed: results disk full"
                raise RunFailed(_disk_full_message(run.root, summary))
            _write_card(run.card_path, card, run.root, summary)
    except KeyboardInterrupt:
        card.status = "interrupted"
        raise
    except RunFailed:
        if card.status == "running":
            card.status = "failed"
        raise
    finally:
        _end_card(run, summary)
    return summary


def _end_card(run: _Run, summary: EvalSummary) -> None:
    """Final status, end time and encoder counts; a card that cannot be written any more is
    left for the next run to mark interrupted."""
    card, fast, embedding_cache = run.card, run.encoder.fast, run.embedding_cache
    if card.status == "running":
        card.status = "failed" if summary.failed else "complete"
    card.finished = card_io.now()
    summary.texts_requested, summary.texts_encoded = fast.texts_requested, fast.texts_encoded
    summary.tokens_encoded = fast.tokens_encoded
    card.encoding = {
        "embedding_cache": str(embedding_cache.path) if embedding_cache else None,
        "texts_requested": fast.texts_requested,
        "texts_encoded": fast.texts_encoded,
        "tokens_encoded": fast.tokens_encoded,
        "token_budget": fast.token_budget,
    }
    if embedding_cache:
        embedding_cache.close()
        card.encoding["cache_damaged_entries"] = embedding_cache.bad_entries
        card.encoding["cache_warnings"] = embedding_cache.events
    try:
        record.write_eval_card(run.card_path, card)
    except OSError as error:
        logger.warning("could not update the run card %s: %s", run.card_path, error.strerror)


def _write_card(path: Path, card: EvalCard, root: Path, summary: EvalSummary | None = None) -> None:
    """Write the run card; a folder that cannot take it any more ends the run with one message."""
    try:
        record.write_eval_card(path, card)
    except OSError as error:
        if disk_full(error):
            raise RunFailed(_disk_full_message(root, summary)) from None
        raise RunFailed(
            f"--results {root}: the run card {path} cannot be written ({error.strerror}). "
            "Make the folder writable or pass another --results; finished tasks are kept."
        ) from None


def _disk_full_message(root: Path, summary: EvalSummary | None) -> str:
    done = [o.task for o in summary.outcomes if o.status != "failed"] if summary else []
    kept = f"the {len(done)} finished task(s) are saved" if done else "no task had finished"
    return (
        f"--results {root}: the disk is full, so results cannot be written ({kept}; no "
        "existing result file was changed). Free space, or pass --results on another disk, "
        "then re-run the same command: finished tasks are skipped."
    )


def experiment_kwargs(profile: str, max_seq_length: int) -> dict[str, Any] | None:
    """mteb experiment kwargs of a run: None under the standard conditions, else what differs.

    Standard conditions (those of the standard recipe: config.standard()) write to mteb's plain
    ``<model>/<revision>/`` folder, which ``ResultCache.load_results()`` reads by default;
    ablations go to ``experiments/<kwargs>/`` (``load_results(load_experiments="match_name")``).
    """
    std = standard()
    if profile == std.instructions and max_seq_length == std.max_seq_length:
        return None
    return {"instructions": profile, "max_seq_length": max_seq_length}


def check_same_conditions(results_dir: Path, conditions: EvalConditions) -> None:
    """Refuse to add results to a folder whose earlier runs used other conditions.

    The folder key holds the profile name and length; this also catches an edited profile
    (another hash) or another dtype, which would otherwise mix silently with earlier tasks.
    A condition an older card does not record is not held against it.
    """
    for card_path in sorted((results_dir / "neobench").glob("run-*.yaml")):
        card = record.read_eval_card(card_path)
        if record.mark_orphaned_eval_card(card_path, card):
            logger.warning(
                "%s was left 'running' by a process that no longer exists (killed or crashed); "
                "marked interrupted",
                card_path,
            )
        there, now = asdict(card.conditions), asdict(conditions)
        differing = [k for k in CONDITIONS if there[k] is not None and there[k] != now[k]]
        if differing:
            raise NeobenchError(
                f"{results_dir} holds results made under other conditions ("
                + ", ".join(f"{k}: {there[k]} there, {now[k]} now" for k in differing)
                + f"; see {card_path.name}). Use another --results root or --model-name, "
                "or delete that folder to start over."
            )


CONDITIONS = ("instructions", "instructions_sha256", "max_seq_length", "dtype")


def _run_task(task: AbsTask, run: _Run, reporter: Reporter) -> TaskOutcome:
    """One task: skipped when its result file is complete, else evaluated; a failure is
    recorded in the outcome (the run goes on), an interrupt is not."""
    from mteb.results import TaskResult

    name = task.metadata.name
    outcome = TaskOutcome(name, task.metadata.type, "evaluated")
    path = run.results.get_task_result_path(name, run.encoder.mteb_model_meta)
    if path.is_file():
        try:
            existing = TaskResult.from_disk(path)
        except Exception as error:
            aside = path.with_name(path.name + f".unreadable-{int(time.time())}")
            path.rename(aside)
            logger.warning("%s was unreadable (%s); moved to %s and re-running", path, error, aside)
        else:
            if not existing.get_missing_evaluations(task):
                # Done, with or without units (a result from before they existed, or made with
                # --no-predictions, is not re-run for them).
                outcome.status, outcome.main_score = "cached", float(existing.get_score())
                found = units_path(path.parent, name)
                outcome.units = found is not None
                outcome.units_bytes = found.stat().st_size if found else None
                reporter.task_done(outcome)
                return outcome
    reporter.task_started(name)
    start = time.perf_counter()
    try:
        size = evaluate_staged(task, run.encoder, run.results, run.batch_size, run.predictions)
        outcome.units, outcome.units_bytes = size is not None, size
        # Report what mteb stored (rounded to 6 decimals), so a re-run reports the same number.
        outcome.main_score = float(TaskResult.from_disk(path).get_score())
    except KeyboardInterrupt:
        raise
    except Exception as error:
        outcome.status, outcome.error = "failed", _describe(error)
        outcome.disk_full = disk_full(error)
        # The traceback is for developers (-v); the user gets the one-line reason.
        logger.debug("task %s failed", name, exc_info=True)
    outcome.seconds = round(time.perf_counter() - start, 2)
    reporter.task_done(outcome)
    return outcome


def _describe(error: BaseException) -> str:
    """One line: the error's type and first line, with the file it names, if any."""
    if disk_full(error):
        return "the disk is full"
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _pooling(model: Any) -> str:
    for module in model:
        if hasattr(module, "pooling_mode"):
            return str(module.pooling_mode)
    return "unknown"


def _data_record(tasks: list[AbsTask], data_dir: Path | None) -> dict[str, dict]:
    lock = mirror.read_lock(data_dir) if data_dir else {}
    out = {}
    for need in mirror.repo_needs(tasks):
        repo = need.repo_id if data_dir is None else str(Path(need.repo_id).relative_to(data_dir))
        entry = {
            "repo_id": repo,
            "pinned_revision": need.revision,
            "source": f"mirror:{data_dir}" if data_dir else "hub",
        }
        if repo in lock:
            entry["mirror_revision"] = lock[repo].get("resolved_revision")
        out[need.task] = entry
    return out
