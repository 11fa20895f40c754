"""`neobench eval`: tasks from mteb's benchmark objects -> prompts -> mteb.evaluate -> results/.

Results are written by mteb's own ResultCache, in mteb's layout, under an explicit model name
and revision; the evaluation conditions (instruction profile + hash, max sequence length, dtype)
decide the folder, so runs under different conditions never share one:

    <results>/results/<org__model>/<revision>/<Task>.json             standard conditions
    <results>/results/<org__model>/<revision>/experiments/<kw>/<Task>.json   any other
    ... and beside the task files: neobench/run-<time>-shard<K>of<N>-<pid>.yaml (run cards)
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
import os
import shutil
import time
import warnings
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neobench import attention, mirror, record
from neobench.cache import EmbeddingCache, cache_path
from neobench.encode import DTYPE_ALIASES, DTYPES, FastEncoder, auto_unpadded, resolve_dtype
from neobench.errors import (
    NeobenchError,
    RunFailed,
    check_choice,
    collect,
    disk_full,
    writable_folder_problems,
)
from neobench.instructions import (
    all_mteb_task_names,
    load_profile,
    mteb_prompts,
    validate_profile,
)
from neobench.model import check_spec, load_model, parse_max_seq_length, resolve_device
from neobench.search import RunningTopK
from neobench.tasks import DEFAULT_BENCHMARK, load_benchmark, parse_shard, select_tasks, shard

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

logger = logging.getLogger(__name__)

# The neobench standard conditions (docs/recipe.md): paper instructions, 512 tokens, any backbone.
STANDARD = {"instructions": "paper", "max_seq_length": 512}
# Per-process staging folder for mteb's writes, inside the results root (same file system, so
# the final renames are atomic); mteb.ResultCache(root).load_results() never looks there.
STAGING = ".neobench-staging"


@dataclass
class EvalConfig:
    """Inputs of one evaluation. The CLI flags map one to one onto these fields."""

    model: str  # hub id, local HF folder, or SentenceTransformer folder
    benchmark: str = DEFAULT_BENCHMARK
    tasks: list[str] | None = None  # subset of the benchmark's task names
    types: list[str] | None = None  # subset of its task types (STS, Retrieval, ...)
    instructions: str = "paper"  # profile name or YAML path
    data_dir: str | None = None  # offline mirror; falls back to $NEOBENCH_DATA_DIR, then the hub
    results: str = "."  # mteb ResultCache root: files land in <results>/results/...
    batch_size: int = 32
    device: str = "auto"
    max_seq_length: int | str = 512  # tokens, or "model" to keep a SentenceTransformer's own
    shard: str = "1/1"  # K/N: this process runs the K-th of N disjoint task shards
    trust_remote_code: bool = False
    model_name: str | None = None  # name in results/ (default: hub id, or local/<folder>)
    revision: str | None = None  # hub revision to load; local folders use a content hash
    cache_dir: str | None = (
        None  # embedding cache folder (default: $NEOBENCH_CACHE or ~/.cache/neobench)
    )
    no_cache: bool = False
    token_budget: int | None = (
        None  # padded tokens per forward batch (default: 2,048 CPU, 32,768 CUDA)
    )
    dtype: str = "auto"  # float32 | float16 | bfloat16 autocast; auto: float16 on CUDA
    unpadded: str = "auto"  # variable-length attention: auto (CUDA) | on | off
    # auto: the fastest the backbone's class supports (flash_attention_2 > sdpa > eager)
    attn_implementation: str = "auto"


@dataclass
class TaskOutcome:
    task: str
    type: str
    status: str  # cached | evaluated | failed
    main_score: float | None = None
    seconds: float = 0.0
    error: str | None = None
    disk_full: bool = False  # the results disk filled up: the run stops after this task


@dataclass
class EvalSummary:
    results_dir: Path
    run_card: Path | None
    outcomes: list[TaskOutcome] = field(default_factory=list)
    texts_encoded: int = 0  # texts that went through the model in this run
    texts_requested: int = 0  # texts mteb asked for (the rest came from the embedding cache)

    @property
    def failed(self) -> list[TaskOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]


class Reporter:
    """Progress hooks; the library stays silent, the CLI renders these with rich."""

    def start(self, total: int, results_dir: Path) -> None: ...
    def task_started(self, task: str) -> None: ...
    def task_done(self, outcome: TaskOutcome) -> None: ...


def prepare_tasks(cfg: EvalConfig) -> tuple[list[AbsTask], Any]:
    """Validate every cheap input at once and return (this shard's tasks, profile)."""
    problems: list[str] = []
    benchmark = collect(problems, load_benchmark, cfg.benchmark)
    profile = collect(problems, load_profile, cfg.instructions)
    shard_kn = collect(problems, parse_shard, cfg.shard)
    collect(problems, parse_max_seq_length, cfg.max_seq_length)
    collect(problems, resolve_device, cfg.device)
    collect(problems, check_choice, "--dtype", cfg.dtype, ["auto", *DTYPES, *DTYPE_ALIASES])
    collect(problems, check_choice, "--unpadded", cfg.unpadded, ["auto", "on", "off"])
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


def run_eval(cfg: EvalConfig, reporter: Reporter | None = None) -> EvalSummary:
    """Evaluate one model on (a shard of) a benchmark; finished tasks are skipped."""
    import mteb
    import torch

    reporter = reporter or Reporter()
    tasks, profile = prepare_tasks(cfg)
    results_root = Path(cfg.results).expanduser().resolve()
    if not tasks:
        logger.warning("shard %s holds no task (more shards than tasks)", cfg.shard)
        return EvalSummary(results_root, None)

    # 1. Data: every task must be loadable before the model is loaded.
    data_dir = mirror.resolve_data_dir(cfg.data_dir)
    if data_dir is not None:
        mirror.point_tasks_at_mirror(tasks, data_dir, cfg.benchmark)
    else:
        mirror.check_hub_access(tasks, cfg.benchmark)

    # 2. Embedding cache, before the model: a folder that cannot hold it is an error of the
    # command (fixed in seconds); a damaged file is moved aside here with a warning.
    embedding_cache = None if cfg.no_cache else EmbeddingCache(cache_path(cfg.cache_dir))

    # 3. Model.
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
    tuned = _finetune_record(Path(loaded.path))
    if tuned.get("name") and not cfg.model_name:
        loaded.name = tuned["name"]

    # 4. Prompts: the profile replaces whatever prompts the model folder carried.
    prompts, without_instruction = mteb_prompts(profile, tasks)
    fast = FastEncoder(
        loaded.model,
        # The weights (hub commit or local content hash), not the results name: the same weights
        # under another --model-name share their embeddings.
        fingerprint=f"{loaded.source}:{loaded.revision}|{loaded.max_seq_length}|{dtype}",
        cache=embedding_cache,
        autocast=DTYPES[dtype] or False,
        token_budget=cfg.token_budget
        if cfg.token_budget is not None
        else (32_768 if device.startswith("cuda") else 2_048),
        packed=loaded.packed,
    )
    encoder = _Encoder(loaded.model, prompts, fast)
    conditions = {
        "instructions": profile.name,
        "instructions_sha256": profile.sha256,
        "max_seq_length": loaded.max_seq_length,
        "dtype": dtype,
    }
    encoder.mteb_model_meta = encoder.mteb_model_meta.model_copy(
        update={
            "name": loaded.name,
            "revision": loaded.revision,
            "experiment_kwargs": experiment_kwargs(profile.name, loaded.max_seq_length),
        }
    )
    meta = encoder.mteb_model_meta
    cache = mteb.ResultCache(results_root)
    results_dir = cache.get_task_result_path("_", meta).parent
    check_same_conditions(results_dir, conditions)

    # 5. Run card, written before any work.
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    k, n = parse_shard(cfg.shard)
    card_path = results_dir / "neobench" / f"run-{stamp}-shard{k}of{n}-{os.getpid()}.yaml"
    # Two runs of one process within a second (library use, tests) must not share a card.
    serial = 1
    while card_path.exists():
        serial += 1
        card_path = card_path.with_name(f"run-{stamp}-shard{k}of{n}-{os.getpid()}-{serial}.yaml")
    card = {
        "kind": "neobench eval",
        "started": record.now(),
        "status": "running",
        "owner": record.owner(),
        "config": asdict(cfg),
        "benchmark": cfg.benchmark,
        "shard": {"k": k, "n": n, "tasks": [t.metadata.name for t in tasks]},
        "conditions": conditions,
        "model": {
            "name": loaded.name,
            "revision": loaded.revision,
            "source": loaded.source,
            "kind": loaded.kind,
            "path": loaded.path,
            "architecture": loaded.architecture,
            "max_seq_length": loaded.max_seq_length,
            "attn_implementation": loaded.attn_implementation,
            "attn_implementation_requested": cfg.attn_implementation,
            "unpadded": loaded.unpadded,
            "tokenizer": loaded.tokenizer,
            "trust_remote_code": loaded.trust_remote_code,
            "pooling": _pooling(loaded.model),
            "recipe_sha256": tuned.get("recipe_sha256"),
        },
        "runtime": {
            **record.device_info(device),
            "dtype": dtype,
            "autocast": dtype != "float32",
            "torch_threads": torch.get_num_threads(),
            "batch_size": cfg.batch_size,
        },
        "instructions": {
            "profile": profile.name,
            "file": profile.source,
            "sha256": profile.sha256,
            "prompts": prompts,
            "tasks_without_instruction": without_instruction,
        },
        "data": _data_record(tasks, data_dir),
        "seeds": {t.metadata.name: getattr(t, "seed", None) for t in tasks},
        "environment": record.environment(),
        "tasks": {},
    }
    _write_card(card_path, card, results_root)

    # 6. Tasks, one at a time, so a kill loses at most the task in flight.
    summary = EvalSummary(results_dir, card_path)
    reporter.start(len(tasks), results_dir)
    try:
        for task in tasks:
            outcome = _run_task(task, encoder, cache, meta, cfg.batch_size, reporter)
            summary.outcomes.append(outcome)
            card["tasks"][outcome.task] = {
                k: v for k, v in asdict(outcome).items() if k not in ("task", "disk_full")
            }
            if outcome.disk_full:
                card["status"] = "failed: results disk full"
                raise RunFailed(_disk_full_message(results_root, summary))
            _write_card(card_path, card, results_root, summary)
    except KeyboardInterrupt:
        card["status"] = "interrupted"
        raise
    except RunFailed:
        if card["status"] == "running":
            card["status"] = "failed"
        raise
    finally:
        if card["status"] == "running":
            card["status"] = "failed" if summary.failed else "complete"
        card["finished"] = record.now()
        summary.texts_requested, summary.texts_encoded = fast.texts_requested, fast.texts_encoded
        card["encoding"] = {
            "embedding_cache": str(embedding_cache.path) if embedding_cache else None,
            "texts_requested": fast.texts_requested,
            "texts_encoded": fast.texts_encoded,
            "token_budget": fast.token_budget,
        }
        if embedding_cache:
            embedding_cache.close()
            card["encoding"]["cache_damaged_entries"] = embedding_cache.bad_entries
            card["encoding"]["cache_warnings"] = embedding_cache.events
        try:
            record.write_card(card_path, card)
        except OSError as error:
            # Nothing more can be written there; the next run marks this card interrupted.
            logger.warning("could not update the run card %s: %s", card_path, error.strerror)
    return summary


def _write_card(
    path: Path, card: dict[str, Any], root: Path, summary: EvalSummary | None = None
) -> None:
    """Write the run card; a folder that cannot take it any more ends the run with one message."""
    try:
        record.write_card(path, card)
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

    Standard conditions (the paper's instructions, 512 tokens) write to mteb's plain
    ``<model>/<revision>/`` folder, which ``ResultCache.load_results()`` reads by default;
    ablations go to ``experiments/<kwargs>/`` (``load_results(load_experiments="match_name")``).
    """
    if profile == STANDARD["instructions"] and max_seq_length == STANDARD["max_seq_length"]:
        return None
    return {"instructions": profile, "max_seq_length": max_seq_length}


def check_same_conditions(results_dir: Path, conditions: dict[str, Any]) -> None:
    """Refuse to add results to a folder whose earlier runs used other conditions.

    The folder key holds the profile name and length; this also catches an edited profile
    (another hash) or another dtype, which would otherwise mix silently with earlier tasks.
    """
    for card_path in sorted((results_dir / "neobench").glob("run-*.yaml")):
        card = record.read_card(card_path)
        if record.mark_orphaned(card_path, card):
            logger.warning(
                "%s was left 'running' by a process that no longer exists (killed or crashed); "
                "marked interrupted",
                card_path,
            )
        earlier = card.get("conditions") or {}
        differing = [k for k in conditions if k in earlier and earlier[k] != conditions[k]]
        if differing:
            raise NeobenchError(
                f"{results_dir} holds results made under other conditions ("
                + ", ".join(f"{k}: {earlier[k]} there, {conditions[k]} now" for k in differing)
                + f"; see {card_path.name}). Use another --results root or --model-name, "
                "or delete that folder to start over."
            )


def _run_task(
    task: AbsTask, encoder: Any, cache: Any, meta: Any, batch_size: int, reporter: Reporter
) -> TaskOutcome:
    from mteb.results import TaskResult

    name = task.metadata.name
    outcome = TaskOutcome(name, task.metadata.type, "evaluated")
    path = cache.get_task_result_path(name, meta)
    if path.is_file():
        try:
            existing = TaskResult.from_disk(path)
        except Exception as error:
            aside = path.with_name(path.name + f".unreadable-{int(time.time())}")
            path.rename(aside)
            logger.warning("%s was unreadable (%s); moved to %s and re-running", path, error, aside)
        else:
            if not existing.get_missing_evaluations(task):
                outcome.status, outcome.main_score = "cached", float(existing.get_score())
                reporter.task_done(outcome)
                return outcome
    reporter.task_started(name)
    start = time.perf_counter()
    try:
        _evaluate_staged(task, encoder, cache, meta, batch_size)
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


# mteb writes its files without an atomic rename (a full disk would leave them truncated), so it
# writes into a staging folder and each file is moved into place only when whole. The task file
# is the task's own; model_meta.json is the same for every task of a model; run_settings.jsonl is
# shared by all tasks (and by concurrent shards), so it is merged at publication, not copied in
# before the task runs (a shard's entries written meanwhile would be lost).
RUN_SETTINGS = "run_settings.jsonl"


def _evaluate_staged(task: AbsTask, encoder: Any, cache: Any, meta: Any, batch_size: int) -> None:
    """mteb.evaluate into a private staging folder, then the files published into the results
    folder. A failure (a full disk included) leaves every existing result file as it was and no
    temporary file behind."""
    import mteb

    name = task.metadata.name
    final = cache.get_task_result_path(name, meta)
    staging_root = Path(cache.cache_path) / STAGING / str(os.getpid())
    staging = mteb.ResultCache(staging_root)
    staged = staging.get_task_result_path(name, meta)
    try:
        staged.parent.mkdir(parents=True, exist_ok=True)
        if final.is_file():  # mteb completes a task from its earlier splits
            shutil.copyfile(final, staged)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*superseded.*")
            mteb.evaluate(
                encoder,
                [task],
                cache=staging,
                overwrite_strategy="only-missing",
                encode_kwargs={"batch_size": batch_size, "show_progress_bar": False},
                show_progress_bar=False,
            )
        final.parent.mkdir(parents=True, exist_ok=True)
        # Side files first: the task file is what marks the task done.
        if (staged.parent / RUN_SETTINGS).is_file():
            _merge_run_settings(staged.parent / RUN_SETTINGS, final.parent / RUN_SETTINGS)
        for file_name in ("model_meta.json", final.name):
            if (staged.parent / file_name).is_file():
                os.replace(staged.parent / file_name, final.parent / file_name)
    finally:
        shutil.rmtree(staging_root, ignore_errors=True)
        with contextlib.suppress(OSError):
            staging_root.parent.rmdir()  # only when no other process stages there


def _merge_run_settings(new: Path, final: Path) -> None:
    """This task's entries merged into the shared run_settings.jsonl by mteb's own merge (same
    format as mteb writes it), on a copy renamed over the original: the original stays whole
    if anything fails."""
    from mteb.results.task_result import _read_run_settings_from_file, _write_and_merge_keyed_json

    merged = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    try:
        if final.is_file():
            shutil.copyfile(final, merged)
        _write_and_merge_keyed_json(merged, _read_run_settings_from_file(new))
        os.replace(merged, final)
    finally:
        merged.unlink(missing_ok=True)


def _finetune_record(folder: Path) -> dict[str, Any]:
    """Name and recipe hash recorded by `neobench finetune` in a model folder, if any."""
    card = folder / "neobench_run_card.yaml"
    return (record.read_card(card).get("output_model") or {}) if card.is_file() else {}


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


@functools.cache
def _make_encoder_class() -> type:
    from mteb.models.abs_encoder import get_prompt_name
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper

    class Encoder(SentenceTransformerEncoderWrapper):
        """mteb's SentenceTransformer wrapper whose text encoding goes through neobench's
        FastEncoder (embedding cache, sorted token-budget batches, unpadded attention and
        fp16/bf16 autocast on CUDA)."""

        def __init__(self, model: Any, prompts: dict[str, str], fast: FastEncoder) -> None:
            model.prompts = dict(prompts)
            model.default_prompt_name = None
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # mteb nags about missing query/document prompts
                super().__init__(model, model_prompts=dict(prompts) or None)
            self.fast = fast

        def encode(
            self, inputs: Any, *, task_metadata: Any, prompt_type: Any = None, **kwargs: Any
        ) -> Any:
            features = inputs.dataset.features
            if set(features) & {"image", "audio", "video"}:  # not text: mteb's own path
                return super().encode(
                    inputs, task_metadata=task_metadata, prompt_type=prompt_type, **kwargs
                )
            name = get_prompt_name(self.model_prompts, task_metadata, prompt_type)
            prompt = (self.model_prompts or {}).get(name) if name else None
            texts = [text for batch in inputs for text in batch["text"]]
            return self.fast.embed(texts, prompt)

        # mteb's SearchProtocol: with these two methods mteb hands retrieval to the encoder
        # instead of its SearchEncoderWrapper (CPU similarity per chunk + Python heap merge).
        def index(self, corpus: Any, **kwargs: Any) -> None:
            self.task_corpus = corpus

        def search(self, queries: Any, **kwargs: Any) -> dict[str, dict[str, float]]:
            return _search(self, queries, **kwargs)

    return Encoder


def _Encoder(model: Any, prompts: dict[str, str], fast: FastEncoder) -> Any:
    return _make_encoder_class()(model, prompts, fast)


CORPUS_CHUNK = 200_000  # documents encoded (and held in host memory) at a time during search


def _search(
    encoder: Any,
    queries: Any,
    *,
    task_metadata: Any,
    hf_split: str,
    hf_subset: str,
    top_k: int,
    encode_kwargs: dict[str, Any],
    top_ranked: Any = None,
    num_proc: int | None = None,
    timer: Any = None,
    **_: Any,  # mteb's SearchProtocol reserves further keyword arguments
) -> dict[str, dict[str, float]]:
    """Encode queries and corpus with the fast encoder, then blocked top-k on the model's device;
    reranking tasks (``top_ranked``) go through mteb's own reranking function."""
    import torch
    from mteb._create_dataloaders import create_dataloader
    from mteb.models.search_wrappers import rerank_top_ranked_documents
    from mteb.timing import TimingStack
    from mteb.types import PromptType

    corpus = getattr(encoder, "task_corpus", None)
    if corpus is None:
        raise ValueError("index() must be called before search()")
    encoder.task_corpus = None
    timer = timer or TimingStack()
    where = {"task_metadata": task_metadata, "hf_split": hf_split, "hf_subset": hf_subset}

    def encode(rows: Any, prompt_type: PromptType) -> Any:
        loader = create_dataloader(
            rows,
            task_metadata=task_metadata,
            prompt_type=prompt_type,
            num_proc=num_proc,
            batch_size=encode_kwargs.get("batch_size", 32),
        )
        return encoder.encode(loader, prompt_type=prompt_type, **where, **encode_kwargs)

    with timer("Encoding queries", split=hf_split, subset=hf_subset):
        query_embeddings = encode(queries, PromptType.query)
    query_ids = list(queries["id"])
    if top_ranked is not None:
        heaps = rerank_top_ranked_documents(
            task_corpus=corpus,
            query_idx_to_id=dict(enumerate(query_ids)),
            query_embeddings=query_embeddings,
            top_ranked=top_ranked,
            top_k=top_k,
            encode_kwargs=encode_kwargs,
            encode_fn=encoder.encode,
            similarity_fn=encoder.similarity,
            num_proc=num_proc,
            timer=timer,
            task_metadata=task_metadata,
            hf_split=hf_split,
            hf_subset=hf_subset,
        )
        return {qid: {doc: score for score, doc in heap} for qid, heap in heaps.items()}

    ranking = RunningTopK(
        torch.as_tensor(query_embeddings), top_k, encoder.similarity, encoder.model.device
    )
    with timer("Searching corpus", split=hf_split, subset=hf_subset):
        for start in range(0, len(corpus), CORPUS_CHUNK):
            chunk = corpus.select(range(start, min(start + CORPUS_CHUNK, len(corpus))))
            ranking.add(torch.as_tensor(encode(chunk, PromptType.document)))
        scores, indices = ranking.result()
    doc_ids = list(corpus["id"])
    return {
        qid: {doc_ids[i]: s for s, i in zip(row_scores, row_indices, strict=True)}
        for qid, row_scores, row_indices in zip(
            query_ids, scores.tolist(), indices.tolist(), strict=True
        )
    }
