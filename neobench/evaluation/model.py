"""The model `neobench eval` runs: loaded at the precision it runs in, wrapped for mteb."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from neobench.core import cards as record
from neobench.encoder.cache import EmbeddingCache
from neobench.encoder.encode import DTYPES, FastEncoder, auto_unpadded, resolve_dtype
from neobench.evaluation.adapter import MtebEncoder
from neobench.evaluation.results_folder import experiment_kwargs
from neobench.models.load import LoadedModel, load_model, parse_max_seq_length, resolve_device
from neobench.protocol.config import EvalConfig, default_token_budget
from neobench.protocol.instructions import InstructionProfile


@dataclass
class PreparedModel:
    """The model made ready to evaluate: loaded, on its device, in its precision, with the
    record of the fine-tune that made it (step 5 of run_eval)."""

    loaded: LoadedModel
    device: str
    dtype: str  # float32 | float16 | bfloat16 (autocast)
    tuned: record.OutputModel | None  # set when `neobench finetune` made the model


def load(cfg: EvalConfig) -> PreparedModel:
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
    return PreparedModel(loaded, device, dtype, tuned)


def encoder(
    cfg: EvalConfig,
    model: PreparedModel,
    profile: InstructionProfile,
    prompts: dict[str, str],
    embedding_cache: EmbeddingCache | None,
) -> MtebEncoder:
    loaded = model.loaded
    fast = FastEncoder(
        loaded.model,
        # The weights, not the results name: one model under two --model-name shares embeddings.
        fingerprint=f"{loaded.source}:{loaded.revision}|{loaded.max_seq_length}|{model.dtype}",
        cache=embedding_cache,
        autocast=DTYPES[model.dtype] or False,
        token_budget=cfg.token_budget or default_token_budget(model.device),
        packed=loaded.packed,
        tokenize_workers=cfg.tokenize_workers,
    )
    return MtebEncoder(
        loaded.model,
        prompts,
        fast,
        name=loaded.name,
        revision=loaded.revision,
        experiment_kwargs=experiment_kwargs(profile.name, loaded.max_seq_length),
        declared=model.tuned,
    )
