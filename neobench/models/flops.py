"""A model's arithmetic: the FLOPs of one text's forward pass, the weights every token is multiplied
by, and the GPUs' nominal peaks they are compared with (docs/performance.md, "The ceiling").
`bench gpu` reports shares of the peak with them; a study's dry run turns them into GPU-hours."""

from __future__ import annotations

import math
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
    field = config.get if isinstance(config, dict) else lambda name: getattr(config, name, None)
    layers = int(field("num_hidden_layers") or 0)
    every = field("global_attn_every_n_layers")  # ModernBERT's config.json, before transformers
    kinds = field("layer_types") or [
        "full_attention" if not every or i % every == 0 else "sliding_attention"
        for i in range(layers)
    ]
    window = field("local_attention") or field("sliding_window")
    keys = sum(min(length, window) if window and "sliding" in k else length for k in kinds)
    return 2 * params * length + 4 * int(field("hidden_size") or 0) * length * float(keys)


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


def weights_per_token(fields: dict[str, Any]) -> tuple[int, bool]:
    """(non_embedding_parameters of the network a config.json's ``fields`` describe, whether its
    model_type's layout is known), from the shapes alone (no torch, for a dry run): BERT-like
    layers (BERT, RoBERTa, DeBERTa-v2; any other type is counted as BERT), ModernBERT's gated
    layers without biases, NeoBERT's SwiGLU layers (tests/test_estimate.py checks each count
    against the built network)."""
    h, layers = int(fields["hidden_size"]), int(fields["num_hidden_layers"])
    inner = int(fields.get("intermediate_size") or 4 * h)
    kind = fields.get("model_type")
    if kind == "modernbert":  # Wqkv, Wo; Wi (2 x inner), Wo; two norms (the first layer's
        return layers * (4 * h * h + 3 * h * inner + 2 * h), True  # is the final norm's)
    if kind == "neobert":  # qkv, wo; w12 (2 x F), w3 with F = 8 ceil(int(2 inner / 3) / 8); 2 norms
        swiglu = 8 * math.ceil(int(2 * inner / 3) / 8)
        return layers * (4 * h * h + 3 * h * swiglu + 2 * h) + h, True  # + the final norm
    # Q, K, V, O with biases; two norms; the MLP with biases. DeBERTa-v2 adds the encoder's norm
    # of its relative-position table.
    count = layers * (4 * h * h + 2 * h * inner + 9 * h + inner)
    if kind == "deberta-v2" and "layer_norm" in str(fields.get("norm_rel_ebd", "")):
        count += 2 * h
    return count, kind in ("bert", "roberta", "deberta-v2")


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
