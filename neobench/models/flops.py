"""A model's arithmetic: the FLOPs of one text's forward pass, the weights every token is multiplied
by, and the GPUs' nominal peaks they are compared with (docs/performance.md, "The ceiling").
`bench gpu` reports shares of the peak with them; a study's dry run turns them into GPU-hours."""

from __future__ import annotations

from typing import Any

# Nominal dense bf16/fp16 tensor-core peaks (spec sheets, without sparsity), FLOP/s, matched
# against the device name in this order: "A100" before "A10", H100 PCIe and NVL before "H100".
PEAK_FLOPS = (
    ("H100 PCIe", 756e12), ("H100 NVL", 835e12), ("H100", 989e12), ("H200", 989e12),
    ("A100", 312e12), ("L40S", 362e12), ("A10", 125e12),
)  # fmt: skip


def peak_flops(device_name: str) -> float | None:
    """The nominal dense half-precision peak of a GPU by its name; None for an unknown one."""
    return next((peak for name, peak in PEAK_FLOPS if name in device_name), None)


def non_embedding_parameters(backbone: Any) -> int:
    """Weights every token is multiplied by: all but the embedding tables (looked up, not
    multiplied) and a pooler (once per text). NeoBERT names its token embedding ``encoder``, so
    the input embedding is also found by identity, not only by name."""
    try:
        embedding = backbone.get_input_embeddings()
    except (NotImplementedError, AttributeError):
        embedding = None
    skip = {id(p) for p in embedding.parameters()} if embedding is not None else set()
    return sum(
        p.numel()
        for name, p in backbone.named_parameters()
        if id(p) not in skip and "embed" not in name and not name.startswith("pooler.")
    )


def text_flops(params: int, config: Any, length: float) -> float:
    """Forward FLOPs of one text (docs/performance.md, "The ceiling"): 2 x non-embedding
    parameters per token, plus 4 x hidden x (keys attended, over the layers) per token. A query
    attends to every key, except in sliding-window layers (ModernBERT's local layers:
    ``local_attention`` keys)."""
    layers = int(getattr(config, "num_hidden_layers", 0))
    kinds = getattr(config, "layer_types", None) or ["full_attention"] * layers
    window = getattr(config, "local_attention", None) or getattr(config, "sliding_window", None)
    keys = sum(min(length, window) if window and "sliding" in k else length for k in kinds)
    return 2 * params * length + 4 * getattr(config, "hidden_size", 0) * length * float(keys)


# fmt: off
_BERT = {"model_type": "bert", "vocab_size": 30522, "max_position_embeddings": 512}
_ROBERTA = {"model_type": "roberta", "vocab_size": 50265, "max_position_embeddings": 514}
_DEBERTA = {
    "model_type": "deberta-v2", "vocab_size": 128100, "relative_attention": True,
    "position_buckets": 256, "pos_att_type": ["p2c", "c2p"], "norm_rel_ebd": "layer_norm",
    "share_att_key": True, "position_biased_input": False, "max_relative_positions": -1,
}
_MODERNBERT = {
    "model_type": "modernbert", "vocab_size": 50368, "max_position_embeddings": 8192,
    "global_attn_every_n_layers": 3, "local_attention": 128,
}
_BASE = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
         "intermediate_size": 3072}
_LARGE = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
          "intermediate_size": 4096}
# The fields of released checkpoints' config.json that set their arithmetic: `bench gpu` builds
# its base shapes from them, and a study's dry run uses them for a model whose config is not on
# this machine. NomicBERT's custom code cannot be built by transformers; its SwiGLU MLP (three
# 768 x 3,072 matrices) has the weights of a BERT MLP 4,608 wide, and rotary positions no table.
RELEASED: dict[str, dict[str, Any]] = {
    "google-bert/bert-base-uncased": {**_BERT, **_BASE},
    "FacebookAI/roberta-base": {**_ROBERTA, **_BASE},
    "microsoft/deberta-v3-base": {**_DEBERTA, **_BASE},
    "nomic-ai/nomic-bert-2048": {**_BERT, **_BASE, "intermediate_size": 4608,
                                 "max_position_embeddings": 2048},
    "answerdotai/ModernBERT-base": {**_MODERNBERT, **_BASE, "num_hidden_layers": 22,
                                    "intermediate_size": 1152},
    "chandar-lab/NeoBERT": {"model_type": "neobert", "vocab_size": 30522, "max_length": 4096,
                            **_BASE, "num_hidden_layers": 28},
    "google-bert/bert-large-uncased": {**_BERT, **_LARGE},
    "FacebookAI/roberta-large": {**_ROBERTA, **_LARGE},
    "microsoft/deberta-v3-large": {**_DEBERTA, **_LARGE},
    "answerdotai/ModernBERT-large": {**_MODERNBERT, **_LARGE, "num_hidden_layers": 28,
                                     "intermediate_size": 2624},
}
# fmt: on

# A training step's FLOPs per forward FLOP: the forward, and a backward of twice its work.
TRAIN_FLOPS_FACTOR = 3


def build_config(fields: dict[str, Any]) -> Any:
    """The transformers config a config.json's fields describe (its model_type's class)."""
    from transformers import AutoConfig

    from neobench.models import register

    register()  # model_type "neobert"
    rest = dict(fields)
    return AutoConfig.for_model(rest.pop("model_type"), **rest)


def config_parameters(config: Any) -> int:
    """non_embedding_parameters of the network ``config`` describes, counted on torch's meta
    device: shapes without a weight's memory."""
    import torch
    from transformers import AutoModel

    with torch.device("meta"):
        backbone = AutoModel.from_config(config)
    return non_embedding_parameters(backbone)


# `bench gpu`'s models built from configs: the released checkpoint whose shape each has.
BENCH_RELEASED = {
    "bert-base": "google-bert/bert-base-uncased",
    "modernbert-base": "answerdotai/ModernBERT-base",
    "neobert": "chandar-lab/NeoBERT",
}


def bench_model_type(name: str) -> str | None:
    """The model_type of a `bench gpu` model (the packaged all-MiniLM-L6-v2 is a BERT)."""
    if name == "minilm":
        return "bert"
    return RELEASED[BENCH_RELEASED[name]]["model_type"] if name in BENCH_RELEASED else None
