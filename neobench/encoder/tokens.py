"""Texts -> the features of any batch of them: ``model.preprocess``'s tokens, padded per batch.

preprocess runs as sentence-transformers runs it (embeddings stay ``SentenceTransformer.encode``'s)
but returns unpadded lists, turned at once into flat int64 arrays (``Flat``, cheap to pickle) and
padded per forward batch with numpy: transformers' own tensor conversion walks every id in Python,
about half of the tokenisation time, holding the GIL. Unpadded, texts tokenise independently, so a
chunk may be tokenised in pieces (tokenpool.py) and joined: the same tokens. Anything but the plain
case (tensors returned anyway, flattened flash-attention inputs, keys of unknown padding) takes
the stock path: preprocess's padded tensors, cut per batch.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from neobench.core.stages import stage

# preprocess options for unpadded lists (sentence-transformers merges these over its own).
UNPADDED_LISTS = {"common": {"return_tensors": None}, "text": {"padding": False}}
# Per-token keys this module knows how to pad (anything else: the stock path).
PAD_KEYS = ("input_ids", "attention_mask", "token_type_ids", "special_tokens_mask")
MAX_BATCH = 512  # texts per forward batch, at most


def token_budget_batches(
    lengths: Sequence[int] | np.ndarray, budget: int, max_batch: int = MAX_BATCH
) -> list[list[int]]:
    """Indices grouped longest first so that (longest in batch) x (batch size) <= budget."""
    lengths = np.asarray(lengths, dtype=np.int64)
    # Stable, so equal lengths keep their order (as sorted() by -length does).
    order = np.argsort(-lengths, kind="stable").tolist()
    lengths = lengths.tolist()
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        longest = lengths[current[0]] if current else lengths[index]
        if current and (longest * (len(current) + 1) > budget or len(current) >= max_batch):
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


@dataclass
class Flat:
    """Texts' tokens from preprocess, unpadded, one array entry per real token (a few arrays
    pickle fast; lists of lists do not)."""

    lengths: np.ndarray  # (n,) int64: real tokens per text
    keys: list[str]  # the per-token keys, in preprocess's order
    # key -> (sum(lengths),) int64, or one int when every token has that value (the attention
    # mask's ones, BERT's token type 0): nothing to send, and padding is a comparison.
    values: dict[str, np.ndarray | int]
    rest: dict[str, Any]  # per-call values, e.g. modality, prompt_length
    seconds: float = 0.0  # the tokenizer's time, wherever it ran

    @property
    def tokens(self) -> int:
        return int(self.lengths.sum())


def flat_tokens(model: Any, texts: list[str], prompt: str | None) -> Flat | None:
    """``texts`` through preprocess as unpadded lists, flattened; None unless the plain case."""
    start = time.perf_counter()
    try:
        out = model.preprocess(texts, prompt=prompt or None, processing_kwargs=UNPADDED_LISTS)
    except TypeError:  # an input module whose preprocess takes no processing_kwargs
        return None
    flat = _flatten(out, len(texts))
    if flat is not None:
        flat.seconds = time.perf_counter() - start
    return flat


def _flatten(out: dict[str, Any], n: int) -> Flat | None:
    per_row = {k: v for k, v in out.items() if isinstance(v, list) and len(v) == n}
    if (
        n == 0
        or "input_ids" not in per_row
        or set(per_row) - set(PAD_KEYS)
        or not all(isinstance(v[0], list) for v in per_row.values())
    ):
        return None
    lengths = np.fromiter(map(len, per_row["input_ids"]), dtype=np.int64, count=n)
    total = int(lengths.sum())
    values: dict[str, np.ndarray | int] = {}
    for key, rows in per_row.items():
        flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64)
        if flat.shape[0] != total:  # rows of another length than the ids: not the plain case
            return None
        values[key] = int(flat[0]) if total and (flat == flat[0]).all() else flat
    mask = values.get("attention_mask", 1)
    if total and not (isinstance(mask, int) and mask == 1):
        return None  # an unpadded mask holds ones only
    rest = {k: v for k, v in out.items() if k not in per_row}
    return Flat(lengths, list(per_row), values, rest)


def join(pieces: list[Flat]) -> Flat | None:
    """Pieces of one chunk as one, in order; None if they disagree on keys or per-call values."""
    first = pieces[0]
    if len(pieces) == 1:
        return first
    try:
        if any(p.keys != first.keys or p.rest != first.rest for p in pieces):
            return None
    except (RuntimeError, ValueError):  # values that do not compare to one bool (tensors)
        return None
    values: dict[str, np.ndarray | int] = {}
    for key in first.keys:
        parts = [p.values[key] for p in pieces]
        if all(isinstance(v, int) for v in parts) and len(set(parts)) == 1:
            values[key] = parts[0]
            continue
        arrays = [
            np.full(p.tokens, v, np.int64) if isinstance(v, int) else v
            for p, v in zip(pieces, parts, strict=True)
        ]
        values[key] = np.concatenate(arrays)
    lengths = np.concatenate([p.lengths for p in pieces])
    return Flat(lengths, first.keys, values, first.rest, sum(p.seconds for p in pieces))


@dataclass
class Chunk:
    """A chunk of texts, tokenised: real tokens per text, and the features of any rows of it."""

    lengths: np.ndarray  # (n,) int64
    features: Callable[[np.ndarray], dict[str, Any]]  # rows -> that batch's padded features
    stock: bool = False  # built by the stock (padded tensor) path

    @property
    def tokens(self) -> int:
        return int(self.lengths.sum())


def tokenize(model: Any, texts: list[str], prompt: str | None) -> Chunk:
    """``texts`` tokenised as sentence-transformers would, in this thread, ready to cut."""
    with stage("tokenize"):
        flat = flat_tokens(model, texts, prompt)
        chunk = chunk_of(model.tokenizer, flat) if flat is not None else None
        return chunk if chunk is not None else stock_chunk(model, texts, prompt)


def chunk_of(tokenizer: Any, flat: Flat) -> Chunk | None:
    """The chunk whose batches are padded from ``flat``; None without a pad token."""
    pad = {
        "input_ids": getattr(tokenizer, "pad_token_id", None),
        "attention_mask": 0,
        "token_type_ids": getattr(tokenizer, "pad_token_type_id", 0),
        "special_tokens_mask": 1,
    }
    if pad["input_ids"] is None:
        return None
    lengths = flat.lengths
    offsets = np.cumsum(lengths) - lengths  # where each text's tokens start
    # transformers adds the mask when the tokenizer gives none; unpadded, it is all ones.
    keys = [*flat.keys, *(["attention_mask"] if "attention_mask" not in flat.keys else [])]
    values = {"attention_mask": 1, **flat.values}
    left = getattr(tokenizer, "padding_side", "right") == "left"

    def features(rows: np.ndarray) -> dict[str, Any]:
        rows = np.asarray(rows, dtype=np.int64)
        sizes = lengths[rows]
        width = int(sizes.max())
        # (batch, width): True at real tokens; row-major order is each text's token order.
        positions = np.arange(width)
        real = positions >= (width - sizes)[:, None] if left else positions < sizes[:, None]
        source = None  # each real token's index in the flat arrays, in the order of ``real``
        batch: dict[str, Any] = {}
        for key in keys:
            value = values[key]
            if isinstance(value, int):
                padded = np.where(real, value, pad[key]).astype(np.int64, copy=False)
            else:
                if source is None:
                    starts = np.cumsum(sizes) - sizes
                    source = np.arange(int(sizes.sum())) + np.repeat(offsets[rows] - starts, sizes)
                padded = np.full((len(rows), width), pad[key], dtype=np.int64)
                padded[real] = value[source]
            batch[key] = torch.from_numpy(padded)
        return batch | flat.rest

    return Chunk(lengths, features)


def stock_chunk(model: Any, texts: list[str], prompt: str | None) -> Chunk:
    """preprocess's padded tensors for the chunk, cut to each batch's longest row (right
    padding), or tokenised again per batch (left padding: cutting would drop real tokens)."""
    features = model.preprocess(texts, prompt=prompt or None)
    mask = features["attention_mask"]
    lengths = mask.sum(dim=1).numpy().astype(np.int64)
    right_padded = bool((mask[:, 1:] <= mask[:, :-1]).all())

    def cut(rows: np.ndarray) -> dict[str, Any]:
        if not right_padded:
            return model.preprocess([texts[i] for i in rows], prompt=prompt or None)
        return _rows(features, rows, int(lengths[rows].max()))

    return Chunk(lengths, cut, stock=True)


def _rows(features: dict, rows: np.ndarray, length: int) -> dict:
    """The features of ``rows``, cut to ``length`` tokens; per-chunk values pass through."""
    n = features["input_ids"].shape[0]
    index = torch.as_tensor(rows)
    picked = {}
    for key, value in features.items():
        if isinstance(value, torch.Tensor) and value.ndim >= 1 and value.shape[0] == n:
            value = value[index]
            if value.ndim == 2:
                value = value[:, :length]
        picked[key] = value
    return picked
