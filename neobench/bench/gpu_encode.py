"""`bench gpu`, sections encode and unpadded: encoding tokens/s of each model three ways, and how
far the unpadded embeddings are from the padded ones.

The three paths, on the same texts under the same autocast dtype, cache off:
  padded    neobench's encoder (length-sorted token-budget batches), attention over padded rows
  unpadded  the same encoder with the real tokens of a batch packed into one row and
            variable-length attention (neobench/models/unpad.py; NeoBERT's own packed path)
  stock     SentenceTransformer.encode, batches of 32, padded
Each path is warmed up on the first 256 texts (a quarter of them, when fewer), then timed
``repeats`` times; the best pass counts.
Tokens are real tokens (no padding), so the % of the GPU's peak is of useful work: FLOPs from the
model's size and the texts' lengths (neobench/bench/encode.py's text_flops) over the nominal dense
half-precision peak of the card (PEAK_FLOPS); none for a CPU or an unknown card.

The unpadded section compares the embeddings the encode section produced: padded against unpadded
(max abs difference, lowest cosine), and padded against stock for scale.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from neobench.bench.config import GpuScale
from neobench.bench.encode import Rate, measure
from neobench.bench.gpu_inputs import BenchModel, Budget, Section
from neobench.encoder.encode import DTYPES, FastEncoder
from neobench.protocol.config import BATCH_SIZE, default_token_budget

PATHS = ("padded", "unpadded", "stock")
WARM_UP = 256  # texts encoded once by each path before it is timed (kernels, allocator)
# Lowest cosine between a text's padded and unpadded embedding that passes, per autocast dtype:
# the two differ in summation order only, which half precision magnifies (bf16 keeps 8 bits).
COSINE_FLOOR = {"float32": 0.99999, "float16": 0.999, "bfloat16": 0.995}


def encode_sections(
    models: list[BenchModel],
    texts: list[str],
    scale: GpuScale,
    device: str,
    dtype: str,
    budget: Budget,
) -> tuple[Section, Section]:
    """(encode, unpadded): every model's three paths, until the budget is spent."""
    encode, unpadded = Section(), Section()
    for model in models:
        if budget.spent(encode, f"encoding with {model.name}"):
            unpadded.mark("partial", f"{model.name}: not encoded, the encode budget was spent")
            break
        rows, vectors, architecture = encode_model(model, texts, scale, device, dtype)
        encode.rows += rows
        if "unpadded" not in vectors:
            unpadded.mark("skipped", f"{model.name}: its architecture cannot run unpadded")
            continue
        row = difference(model.name, architecture, vectors, dtype)
        unpadded.rows.append(row)
        if not row["within"]:
            unpadded.mark(
                "failed",
                f"{model.name}: lowest cosine {row['min_cosine']:.6f} below {row['cosine_floor']}",
            )
    return encode, unpadded


def encode_model(
    model: BenchModel, texts: list[str], scale: GpuScale, device: str, dtype: str
) -> tuple[list[dict], dict[str, np.ndarray], str]:
    """One model's rows (a path each), embeddings by path, and its architecture."""
    from neobench.models.load import load_model

    loaded = load_model(
        model.path,
        device=device,
        max_seq_length=scale.max_seq_length,
        half=dtype != "float32",
        unpadded="on",
    )
    network: Any = loaded.model
    backbone = network[0].auto_model
    native = hasattr(backbone.config, "unpadded_attention")  # NeoBERT packs inside its forward
    lengths = [
        len(ids)
        for ids in network.tokenizer(texts, truncation=True, max_length=network.max_seq_length)[
            "input_ids"
        ]
    ]
    runs = _paths(network, device, dtype, loaded.packed or native)
    rows, vectors = [], {}
    for path, run in runs.items():
        if native:  # stock and padded run NeoBERT padded, as a stock user would
            backbone.config.unpadded_attention = "on" if path == "unpadded" else "off"
        kernel = loaded.attn_implementation if path == "unpadded" else _padded_kernel(loaded)
        run(texts[: min(WARM_UP, max(1, len(texts) // 4))])
        best: Rate | None = None
        for _ in range(scale.repeats):
            out: dict[str, np.ndarray] = {}
            rate = measure(
                path, lambda r=run, o=out: o.setdefault("v", r(texts)), texts, lengths,
                network, device,
            )  # fmt: skip
            if best is None or rate.seconds < best.seconds:
                best, vectors[path] = rate, out["v"]
        rows.append(_rate_row(model.name, path, kernel, best))
    return rows, vectors, loaded.architecture


def _paths(network: Any, device: str, dtype: str, can_unpad: bool) -> dict[str, Any]:
    """path -> a function of texts returning (texts, dim) float32 embeddings."""
    autocast = DTYPES[dtype]

    def fast(packed: bool) -> Any:
        encoder = FastEncoder(
            network,
            "bench-gpu",
            cache=None,
            autocast=autocast or False,
            token_budget=default_token_budget(device),
            packed=packed,
        )
        return lambda texts: encoder.embed(texts, None)

    def stock(texts: list[str]) -> np.ndarray:
        with torch.autocast(
            device.split(":")[0], autocast or torch.float32, enabled=autocast is not None
        ):
            vectors = network.encode(texts, batch_size=BATCH_SIZE, convert_to_tensor=True)
        return vectors.float().cpu().numpy()

    runs = {"padded": fast(False), "unpadded": fast(True), "stock": stock}
    return {p: r for p, r in runs.items() if p != "unpadded" or can_unpad}


def _padded_kernel(loaded: Any) -> str:
    """The attention the backbone's own padded forward runs (NeoBERT's with its packing off)."""
    describe = getattr(loaded.model[0].auto_model, "attention_kernel", None)
    return (
        describe(str(loaded.model.device))
        if callable(describe)
        else loaded.forward_attn_implementation
    )


def _rate_row(model: str, path: str, kernel: str, rate: Rate) -> dict:
    return {
        "model": model,
        "path": path,
        "attention": kernel,
        "texts": rate.texts,
        "tokens": rate.tokens,
        "seconds": round(rate.seconds, 4),
        "tokens_per_s": round(rate.tokens_per_s, 1),
        "peak_fraction": round(rate.flop_fraction, 4) if rate.flop_fraction is not None else None,
        "peak_memory_mb": round(rate.peak_memory_mb, 1),
    }


def difference(model: str, architecture: str, vectors: dict[str, np.ndarray], dtype: str) -> dict:
    """Padded against unpadded embeddings of the same texts (and padded against stock)."""
    padded, unpadded, stock = vectors["padded"], vectors["unpadded"], vectors["stock"]
    norms = np.linalg.norm(padded, axis=1) * np.linalg.norm(unpadded, axis=1)
    cosine = (padded * unpadded).sum(axis=1) / np.maximum(norms, 1e-12)
    floor = COSINE_FLOOR[dtype]
    return {
        "model": model,
        "architecture": architecture,
        "dtype": dtype,
        "max_abs_diff": float(np.abs(padded - unpadded).max()),
        "max_abs_value": float(np.abs(padded).max()),
        "min_cosine": float(cosine.min()),
        "stock_max_abs_diff": float(np.abs(padded - stock).max()),
        "cosine_floor": floor,
        "within": bool(cosine.min() >= floor),
    }
