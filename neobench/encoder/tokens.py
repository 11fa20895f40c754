"""Texts -> the features of any batch of them, tokenised once per chunk, off the main thread.

The features are sentence-transformers' own (``model.preprocess``: the model's prompt handling,
truncation and special tokens), so embeddings stay those of ``SentenceTransformer.encode``. Two
things are done differently, both for speed, neither changing a token:

- preprocess is asked for unpadded Python lists (``return_tensors=None, padding=False``) and the
  padding is done here, per forward batch, with numpy. transformers' own tensor conversion first
  flattens every id of the chunk in Python to test for emptiness, then builds the tensor from
  nested lists: about half of a chunk's tokenisation time, and all of it holding the GIL. Padding
  per batch also skips the chunk-wide pad to its longest text.
- ``Tokenizer`` runs chunks in a background thread, one chunk ahead of the forward pass, so the
  GPU (or the rest of the host path) is not kept waiting while the next chunk is tokenised. The
  fast tokenizer's batch call runs across every core in its own thread pool, without the GIL.

Anything but the plain case (a processor that returns tensors anyway, flattened flash-attention
inputs, keys of unknown padding) takes the stock path: padded tensors from preprocess, cut per
batch.
"""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
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
class Chunk:
    """A chunk of texts, tokenised: real tokens per text, and the features of any rows of it."""

    lengths: np.ndarray  # (n,) int64
    features: Callable[[np.ndarray], dict[str, Any]]  # rows -> that batch's padded features
    stock: bool = False  # built by the stock (padded tensor) path

    @property
    def tokens(self) -> int:
        return int(self.lengths.sum())


def tokenize(model: Any, texts: list[str], prompt: str | None) -> Chunk:
    """``texts`` tokenised as sentence-transformers would, ready to cut into batches."""
    with stage("tokenize"):
        try:
            out = model.preprocess(texts, prompt=prompt or None, processing_kwargs=UNPADDED_LISTS)
        except TypeError:  # an input module whose preprocess takes no processing_kwargs
            return _stock(model, texts, prompt)
        chunk = _ragged(model.tokenizer, out, len(texts))
        if chunk is None:
            chunk = _stock(model, texts, prompt)
    return chunk


def _ragged(tokenizer: Any, out: dict[str, Any], n: int) -> Chunk | None:
    """Flat int64 arrays of every per-token key, padded per batch; None unless plain lists."""
    per_row = {k: v for k, v in out.items() if isinstance(v, list) and len(v) == n}
    pad = {
        "input_ids": getattr(tokenizer, "pad_token_id", None),
        "attention_mask": 0,
        "token_type_ids": getattr(tokenizer, "pad_token_type_id", 0),
        "special_tokens_mask": 1,
    }
    if (
        n == 0
        or "input_ids" not in per_row
        or set(per_row) - set(PAD_KEYS)
        or pad["input_ids"] is None
        or not all(isinstance(v[0], list) for v in per_row.values())
    ):
        return None
    lengths = np.fromiter(map(len, per_row["input_ids"]), dtype=np.int64, count=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    flat = {}
    for key, rows in per_row.items():
        values = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64)
        if values.shape[0] != total:  # rows of another length than the ids: not the plain case
            return None
        flat[key] = values
    if "attention_mask" in flat and total and flat["attention_mask"].min() != 1:
        return None  # an unpadded mask holds ones only
    rest = {k: v for k, v in out.items() if k not in per_row}
    left = getattr(tokenizer, "padding_side", "right") == "left"

    def features(rows: np.ndarray) -> dict[str, Any]:
        rows = np.asarray(rows, dtype=np.int64)
        sizes = lengths[rows]
        width = int(sizes.max())
        # For every real token of the batch: its row, its position in the text, its source.
        starts = np.cumsum(sizes) - sizes
        within = np.arange(int(sizes.sum())) - np.repeat(starts, sizes)
        row = np.repeat(np.arange(len(rows)), sizes)
        column = within + np.repeat(width - sizes, sizes) if left else within
        source = np.repeat(offsets[rows], sizes) + within
        batch: dict[str, Any] = {}
        for key, values in flat.items():
            padded = np.full((len(rows), width), pad[key], dtype=np.int64)
            padded[row, column] = values[source]
            batch[key] = torch.from_numpy(padded)
        if "attention_mask" not in batch:  # transformers' default when the tokenizer gives none
            batch["attention_mask"] = torch.from_numpy(
                (np.arange(width) < sizes[:, None]).astype(np.int64)
            )
        return batch | rest

    return Chunk(lengths, features)


def _stock(model: Any, texts: list[str], prompt: str | None) -> Chunk:
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


@dataclass
class Prepared:
    """A chunk ready for the forward pass: its token-budget batches, each (rows, features)."""

    batches: list[tuple[np.ndarray, dict[str, Any]]]
    tokens: int


def prepare(model: Any, texts: list[str], prompt: str | None, budget: int) -> Prepared:
    """Tokenise ``texts``, cut them into length-sorted token-budget batches, pad each."""
    chunk = tokenize(model, texts, prompt)
    with stage("batching"):
        batches = []
        for batch in token_budget_batches(chunk.lengths, budget):
            rows = np.asarray(batch, dtype=np.int64)
            batches.append((rows, chunk.features(rows)))
    return Prepared(batches, chunk.tokens)


@dataclass
class Tokenizer:
    """Prepares chunks one ahead of the consumer, in one background thread (the clock's stages
    follow it: its work counts as busy time, the consumer's waiting as ``tokenize wait``)."""

    model: Any
    prompt: str | None
    budget: int

    def chunks(self, pieces: list[list[str]]) -> Iterator[Prepared]:
        if len(pieces) == 1:  # nothing to overlap with: no thread
            yield prepare(self.model, pieces[0], self.prompt, self.budget)
            return
        with ThreadPoolExecutor(1, thread_name_prefix="neobench-tokenize") as pool:
            pending = self._submit(pool, pieces[0])
            for i in range(len(pieces)):
                with stage("tokenize wait"):
                    chunk = pending.result()
                if i + 1 < len(pieces):
                    pending = self._submit(pool, pieces[i + 1])
                yield chunk

    def _submit(self, pool: ThreadPoolExecutor, texts: list[str]) -> Future[Prepared]:
        context = contextvars.copy_context()  # the stage clock, if one runs
        return pool.submit(context.run, prepare, self.model, texts, self.prompt, self.budget)
