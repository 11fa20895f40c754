"""The evaluation encoder: cache first, then each missing text once, in length-sorted
token-budget batches; the steps and why: docs/performance.md, "What the encoder does with a list
of texts". Embeddings are `SentenceTransformer.encode`'s (tested to 1e-5).
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from neobench.core.stages import stage
from neobench.encoder.cache import CacheWriter, EmbeddingCache
from neobench.encoder.feed import ChunkEnd, feed
from neobench.encoder.tokenpool import TokenizePool, resolve_workers
from neobench.models.unpad import unpadded
from neobench.protocol.config import DTYPE_ALIASES, TOKENIZE_WORKERS, default_token_budget

logger = logging.getLogger(__name__)

# Texts tokenized in one call (and sorted by length together): large enough for the tokenizer's
# own thread pool and for near-global length sorting, small enough for host memory at 8k tokens.
TOKENIZE_CHUNK = 8_192


DTYPES = {"float32": None, "float16": torch.float16, "bfloat16": torch.bfloat16}


def resolve_dtype(name: str, device: str) -> str:
    """``auto``: float16 autocast on CUDA (what stock tools use there), float32 elsewhere."""
    name = DTYPE_ALIASES.get(name, name)
    if name == "auto":
        return "float16" if device.startswith("cuda") else "float32"
    return name


def auto_unpadded(mode: str, dtype: str) -> str:
    """``auto`` packs on CUDA in half precision only: the fused varlen kernels take fp16/bf16,
    and in float32 the per-sequence reference would be slower than padded SDPA."""
    return "off" if mode == "auto" and dtype == "float32" else mode


class FastEncoder:
    """Encodes texts for one model: cache first, then sorted token-budget batches."""

    def __init__(
        self,
        model: object,
        fingerprint: str,
        cache: EmbeddingCache | None,
        autocast: bool | torch.dtype = False,
        token_budget: int | None = None,
        packed: bool = False,
        tokenize_workers: int | str = TOKENIZE_WORKERS,
    ) -> None:
        self.model = model
        self.fingerprint = fingerprint
        self.cache = cache
        # True means float16 (the CUDA default); a dtype picks it (torch.bfloat16).
        self.autocast_dtype = torch.float16 if autocast is True else autocast or None
        # Padded tokens per forward batch; left out, the default of the model's device.
        self.token_budget = token_budget or default_token_budget(str(model.device))
        self.packed = packed  # real tokens only, variable-length attention (unpad.py)
        # Tokenizer processes (tokenpool.py); 1: tokenise in a thread of this process.
        self.tokenize_workers = resolve_workers(tokenize_workers)
        self._pool: TokenizePool | None = None
        self._writer: CacheWriter | None = None  # cache.CacheWriter: stores new vectors
        self._feeder: ThreadPoolExecutor | None = None
        self.store = True  # new embeddings go into the cache (set per task by the cache policy)
        self.texts_encoded = 0  # texts that went through the network (not served by the cache)
        self.texts_requested = 0
        self.tokens_encoded = 0  # real (unpadded) tokens of the encoded texts
        self.forward_calls = 0

    def embed(
        self, texts: list[str], prompt: str | None, out: np.ndarray | None = None
    ) -> np.ndarray:
        """(len(texts), dim) float32: cached vectors, the rest encoded once per distinct text.

        ``out``: a float32 (rows, dim) array of at least len(texts) rows, whose first rows take
        the vectors (the return value is then a view of it). Passing the same array for each
        request saves faulting fresh memory in page by page (seconds per GB in a VM)."""
        if out is not None and (out.dtype != np.float32 or out.ndim != 2 or len(out) < len(texts)):
            raise ValueError(
                f"out: needs a float32 (rows, dim) array of at least {len(texts)} rows, got "
                f"{out.dtype} {out.shape}"
            )
        with stage("batching"):  # what no finer stage below claims
            return self._embed(texts, prompt, None if out is None else out[: len(texts)])

    def _embed(self, texts: list[str], prompt: str | None, target: np.ndarray | None) -> np.ndarray:
        prompt = prompt or ""
        self.texts_requested += len(texts)
        if not texts:
            return np.zeros((0, 0), np.float32)
        if self.cache:
            with stage("cache keys"):
                keys: list[Any] = EmbeddingCache.keys(self.fingerprint, prompt, texts)
        else:
            # Without a cache the texts are the keys (one request, one prompt): no hashing.
            keys = texts
        with stage("dedup"):
            # Each distinct key once, in first-seen order; ``where`` maps every text to its row.
            rows: dict[Any, int] = {}
            where = np.fromiter(
                (rows.setdefault(key, len(rows)) for key in keys), dtype=np.int64, count=len(keys)
            )
            unique = list(rows)
            text_of = np.empty(len(unique), dtype=np.int64)
            text_of[where] = np.arange(len(keys))  # a text of each key (one key, one text)
        if self.cache:
            with stage("cache lookup"):
                matrix, found = self.cache.lookup(unique)  # (unique, dim) float32, (unique,) bool
        else:
            matrix, found = np.zeros((len(unique), 0), np.float32), np.zeros(len(unique), bool)
        missing = np.flatnonzero(~found)
        if len(missing):
            # Each new vector goes straight into its row of ``matrix`` (at millions of texts an
            # extra full-size copy costs seconds), and to the cache writer when the policy says.
            # (Found rows are the model's width: the key holds its fingerprint.)
            some = bool(found.any())
            store = self.cache is not None and self.store
            # Nothing found and every text distinct: the vectors go straight into ``target``.
            direct = target if len(unique) == len(texts) else None
            matrix = self._encode(
                [texts[i] for i in text_of[missing]],
                prompt,
                out=matrix if some else direct,
                at=missing if some else None,
                keys=[unique[i] for i in missing] if store else None,
            )
        if len(unique) == len(texts):  # every text distinct: ``where`` is 0..n-1
            if target is None or matrix is target:
                return matrix
            with stage("assemble"):
                target[:] = matrix
                return target
        with stage("assemble"):
            if target is None:
                return matrix[where]
            return np.take(matrix, where, axis=0, out=target)

    def _encode(
        self,
        texts: list[str],
        prompt: str,
        out: np.ndarray | None = None,
        at: np.ndarray | None = None,
        keys: list[bytes] | None = None,
    ) -> np.ndarray:
        """Embeddings of ``texts`` (float32) written to rows ``at`` of ``out`` (None: a new
        (len(texts), dim) matrix, rows 0..n-1); returns ``out``. With ``keys`` (one per text)
        the vectors are in the cache by the time this returns."""
        model = self.model
        model.eval()
        # Padded features of a chunk take (texts x max length) ids: bound that for 8k models.
        step = max(64, min(TOKENIZE_CHUNK, 4_194_304 // max(1, int(model.max_seq_length))))
        pieces = [texts[start : start + step] for start in range(0, len(texts), step)]
        target = _Rows(out, len(texts), at)
        done: list[torch.Tensor] = []
        rows: list[np.ndarray] = []
        pin = model.device.type == "cuda"
        pool = self._tokenize_pool()
        writer = self._cache_writer() if keys is not None else None
        if self._feeder is None:  # the thread preparing batches (feed.py), kept across requests
            self._feeder = ThreadPoolExecutor(1, thread_name_prefix="neobench-feed")
        try:
            with unpadded(model, self.packed):
                for item in feed(
                    model, pieces, prompt or None, self.token_budget, pool, pin, self._feeder
                ):
                    if isinstance(item, ChunkEnd):
                        self.tokens_encoded += item.tokens
                        with stage("copy to host"):
                            written = target.write(done, rows)
                        if writer is not None and keys is not None:
                            with stage("cache insert"):  # the rows handed over (a copy)
                                block = target.rows(written)
                                writer.submit([keys[i] for i in written], block)
                        done, rows = [], []
                        continue
                    done.append(self._forward(item.features))
                    rows.append(item.rows + item.chunk * step)  # the request's row numbers
                    self.texts_encoded += len(item.rows)
        except BaseException:
            if writer is not None:  # what was handed over is stored; the first error stands
                with contextlib.suppress(Exception):
                    writer.flush()
            raise
        if writer is not None:
            writer.flush()
        return target.result()

    def _forward(self, features: dict[str, object]) -> torch.Tensor:
        """One batch's embeddings, (batch, dim) float32, left on the model's device."""
        model, dtype = self.model, self.autocast_dtype
        device = model.device
        with stage("copy to device"):
            features = {k: _to_device(v, device) for k, v in features.items()}
        with (
            stage("forward"),
            torch.inference_mode(),
            torch.autocast(device.type, dtype or torch.float32, enabled=dtype is not None),
        ):
            embeddings = model(features)["sentence_embedding"]
        self.forward_calls += 1
        # Kept on the device until the chunk is done: no host sync per batch.
        return embeddings.float()

    def _tokenize_pool(self) -> TokenizePool | None:
        """The tokenizer processes (started at the first request, kept), or None: this process."""
        if self.tokenize_workers < 2:
            return None
        if self._pool is None or self._pool.closed:
            self._pool = TokenizePool(self.model, self.tokenize_workers)
            weakref.finalize(self, self._pool.close)  # an encoder nobody closed
        return self._pool

    def _cache_writer(self) -> CacheWriter:
        """The thread storing new vectors (started at the first store, kept)."""
        if self._writer is None:
            assert self.cache is not None
            self._writer = CacheWriter(self.cache)
            weakref.finalize(self, self._writer.close)  # an encoder nobody closed
        return self._writer

    def close(self, wait: bool = True) -> None:
        """Stop the tokenizer processes, the feed's thread and the cache writer (a later request
        starts them again); ``wait=False``: without waiting for the processes to end."""
        if self._pool is not None:
            self._pool.close(wait)
            self._pool = None
        if self._feeder is not None:
            feeder, self._feeder = self._feeder, None
            feeder.shutdown()
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.close()


class _Rows:
    """Where a request's new vectors go: rows ``at`` of ``out`` (made at the first chunk, when
    the width is known), each written exactly once."""

    def __init__(self, out: np.ndarray | None, count: int, at: np.ndarray | None) -> None:
        self.out, self.count, self.at = out, count, at
        self.written = 0

    def write(self, done: list[torch.Tensor], rows: list[np.ndarray]) -> np.ndarray:
        """One chunk: its batches' (batch, dim) vectors, and their rows in the request; returns
        those rows, joined."""
        if self.out is None:
            self.out = np.empty((self.count, done[0].shape[1]), np.float32)
        if done[0].device.type == "cpu":  # no joined copy: each batch to its rows
            for vectors, index in zip(done, rows, strict=True):
                self.out[self._at(index)] = vectors.numpy()
        else:  # one transfer per chunk (no host sync per batch)
            self.out[self._at(np.concatenate(rows))] = torch.cat(done).cpu().numpy()
        joined = np.concatenate(rows)
        self.written += len(joined)
        return joined

    def rows(self, index: np.ndarray) -> np.ndarray:
        """A copy of the vectors of the request's rows ``index``."""
        assert self.out is not None
        return self.out[self._at(index)]

    def _at(self, index: np.ndarray) -> np.ndarray:
        return index if self.at is None else self.at[index]

    def result(self) -> np.ndarray:
        # A row never written would be an uninitialised vector passed on as an embedding.
        if self.out is None or self.written != self.count:
            raise RuntimeError(
                f"the encoder produced {self.written} of {self.count} embeddings; "
                "this is a bug in neobench, please report it"
            )
        return self.out


def _to_device(value: object, device: torch.device) -> object:
    if not isinstance(value, torch.Tensor):
        return value
    if device.type == "cuda":
        # Pinned host memory makes the copy asynchronous with respect to the host.
        return value.pin_memory().to(device, non_blocking=True)
    return value.to(device)
