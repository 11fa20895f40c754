"""The run card of `neobench eval`: written before any work, rewritten after each task, ended
whatever happens (complete, failed, interrupted). What it records:
docs/guide.md, "`neobench eval`" (Run cards).
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neobench.compat import patches
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
from neobench.core.selection import eval_record
from neobench.evaluation.model import PreparedModel
from neobench.evaluation.outcomes import EvalSummary
from neobench.protocol.config import EvalConfig

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

    from neobench.encoder.cache import EmbeddingCache
    from neobench.encoder.encode import FastEncoder
    from neobench.protocol.mirror import TaskData

logger = logging.getLogger(__name__)


def new_card(
    cfg: EvalConfig,
    tasks: list[AbsTask],
    model: PreparedModel,
    instructions: EvalInstructions,
    data: TaskData,
    shard: tuple[int, int],
) -> EvalCard:
    """The run card as written before any work (status running, no task yet): ``shard`` is the
    parsed --shard (K, N)."""
    import torch

    k, n = shard
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
        data=data.record,
        seeds={t.metadata.name: getattr(t, "seed", None) for t in tasks},
        environment=card_io.card_from_dict(EvalEnvironment, provenance.environment()),
        library_patches=patches.enabled(),
        library_patches_off=patches.off_reason(),
    )


def end_card(
    card: EvalCard,
    path: Path,
    fast: FastEncoder,
    embedding_cache: EmbeddingCache | None,
    summary: EvalSummary,
    cache_use: dict[str, Any] | None = None,
) -> None:
    """Final status, end time, encoder counts and the cache's policy, cap and use
    (``cache_use``, from evaluation/cache_use.py); a card that cannot be written any more is
    left for the next run to mark interrupted."""
    if card.status == "running":
        card.status = "failed" if summary.failed else "complete"
    card.finished = card_io.now()
    summary.texts_requested, summary.texts_encoded = fast.texts_requested, fast.texts_encoded
    summary.tokens_encoded = fast.tokens_encoded
    summary.embedding_cache = embedding_cache.path if embedding_cache else None
    card.encoding = {
        "embedding_cache": str(embedding_cache.path) if embedding_cache else None,
        "texts_requested": fast.texts_requested,
        "texts_encoded": fast.texts_encoded,
        "tokens_encoded": fast.tokens_encoded,
        "token_budget": fast.token_budget,
        "tokenize_workers": fast.tokenize_workers,
        **(cache_use or {}),
    }
    if embedding_cache:
        embedding_cache.close()
        card.encoding["cache_damaged_entries"] = embedding_cache.bad_entries
        card.encoding["cache_warnings"] = embedding_cache.events
    try:
        record.write_eval_card(path, card)
    except OSError as error:
        logger.warning("could not update the run card %s: %s", path, error.strerror)


# The model-section fields that are LoadedModel's own.
AS_LOADED = ("name", "revision", "source", "kind", "path", "architecture", "max_seq_length")
AS_LOADED += ("attn_implementation", "unpadded", "tokenizer", "trust_remote_code")


def _model_section(cfg: EvalConfig, model: PreparedModel) -> EvalModel:
    loaded = model.loaded
    return EvalModel(
        **{key: getattr(loaded, key) for key in AS_LOADED},
        attn_implementation_requested=cfg.attn_implementation,
        pooling=_pooling(loaded.model),
        **_finetuned_from(model.tuned),
        sweep=eval_record(Path(cfg.sweep), cfg.model) if cfg.sweep else None,
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


def _pooling(model: Any) -> str:
    for module in model:
        if hasattr(module, "pooling_mode"):
            return str(module.pooling_mode)
    return "unknown"
