"""A request's texts -> its forward batches (padded, pinned for a GPU), prepared by one feeder
thread while the device runs the previous batch (docs/performance.md, "What the encoder does with
a list of texts"). Chunks are sorted as wholes, so splitting one across tokenizer processes
changes no batch and no embedding.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import functools
import itertools
import queue
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from neobench.core.stages import busy, stage
from neobench.encoder.tokenpool import TokenizePool
from neobench.encoder.tokens import (
    Chunk,
    Flat,
    chunk_of,
    join,
    stock_chunk,
    token_budget_batches,
    tokenize,
)

QUEUED = 64  # batches ready and waiting for the forward pass, at most
AHEAD = 2  # chunks submitted to the tokenizer processes ahead of the one being batched
MIN_PIECE = 64  # texts per process's piece, at least (smaller pieces cost more than they save)


@dataclass
class Batch:
    """One forward batch: rows of its chunk (the chunk's own order) and their features."""

    chunk: int
    rows: np.ndarray  # (batch,) int64
    features: dict[str, Any]


@dataclass
class ChunkEnd:
    """Every batch of chunk ``chunk`` was handed over."""

    chunk: int
    texts: int
    tokens: int


@dataclass
class _Raised:
    error: BaseException


_DONE = object()


def feed(
    model: Any,
    pieces: list[list[str]],
    prompt: str | None,
    budget: int,
    pool: TokenizePool | None = None,
    pin: bool = False,
    feeder: concurrent.futures.Executor | None = None,
) -> Iterator[Batch | ChunkEnd]:
    """Each chunk's batches, then its ChunkEnd, chunk after chunk. The consumer's waiting counts
    as ``tokenize wait``. The feeder runs in ``feeder`` (a one-thread executor the caller keeps
    across requests), else in a thread of its own."""
    items: queue.Queue[Any] = queue.Queue(maxsize=QUEUED)
    stop = threading.Event()
    # Without processes the feeder tokenises (the fast tokenizer's own Rust pool across cores).
    inline = (tokenize(model, piece, prompt) for piece in pieces)
    chunks = _pooled(model, pieces, prompt, pool) if pool else inline
    context = contextvars.copy_context()  # the stage clock, if one runs
    work = (context.run, _produce, chunks, budget, pin, items, stop)
    if feeder is not None:
        # A kept thread: Thread.start() waits until the OS schedules the new thread, which on
        # cores the tokenizer processes keep busy is milliseconds per request.
        finished: Any = functools.partial(concurrent.futures.wait, [feeder.submit(*work)])
    else:
        thread = threading.Thread(target=work[0], args=work[1:], name="neobench-feed", daemon=True)
        thread.start()
        finished = thread.join
    try:
        while True:
            with stage("tokenize wait"):
                item = items.get()
            if item is _DONE:
                return
            if isinstance(item, _Raised):
                raise item.error
            yield item
    finally:
        stop.set()  # a consumer that stops early (an exception) stops the feeder too
        finished()
        if pool is not None:
            pool.forget()


def _produce(
    chunks: Iterator[Chunk],
    budget: int,
    pin: bool,
    items: queue.Queue[Any],
    stop: threading.Event,
) -> None:
    """The feeder thread: every chunk cut into batches, padded (and pinned), queued."""
    try:
        for index, chunk in enumerate(chunks):
            with stage("batching"):
                batches = token_budget_batches(chunk.lengths, budget)
            for batch in batches:
                with stage("batching"):
                    rows = np.asarray(batch, dtype=np.int64)
                    features = chunk.features(rows)
                    if pin:  # pinned memory: the consumer's copy to the GPU does not block
                        features = {k: _pinned(v) for k, v in features.items()}
                if not _put(items, Batch(index, rows, features), stop):
                    return
            if not _put(items, ChunkEnd(index, len(chunk.lengths), chunk.tokens), stop):
                return
        _put(items, _DONE, stop)
    except BaseException as error:  # handed to the consumer, raised there
        _put(items, _Raised(error), stop)


def _put(items: queue.Queue[Any], item: Any, stop: threading.Event) -> bool:
    """Queue ``item`` unless the consumer has stopped; False when it has."""
    while not stop.is_set():
        try:
            items.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


def _pinned(value: Any) -> Any:
    return value.pin_memory() if isinstance(value, torch.Tensor) else value


def _pooled(
    model: Any, pieces: list[list[str]], prompt: str | None, pool: TokenizePool
) -> Iterator[Chunk]:
    """Chunks tokenised by the processes, each split into one piece per process, AHEAD chunks
    submitted ahead; the workers' own seconds count as ``tokenize``."""
    workers = len(pool.processes)
    pending: deque[tuple[list[str], list[int]]] = deque()
    upcoming = iter(pieces)
    for piece in upcoming:
        pending.append((piece, [pool.submit(p, prompt) for p in split(piece, workers)]))
        if len(pending) >= AHEAD:
            break
    while pending:
        piece, jobs = pending.popleft()
        following = next(upcoming, None)
        if following is not None:
            pending.append((following, [pool.submit(p, prompt) for p in split(following, workers)]))
        flats = [pool.result(job) for job in jobs]
        busy("tokenize", sum(f.seconds for f in flats if f is not None))
        yield _chunk(model, piece, prompt, flats)


def _chunk(model: Any, texts: list[str], prompt: str | None, flats: list[Flat | None]) -> Chunk:
    """The pieces joined; anything but the plain case: the stock path, here."""
    flat = None if any(f is None for f in flats) else join(flats)  # type: ignore[arg-type]
    chunk = chunk_of(model.tokenizer, flat) if flat is not None else None
    if chunk is None:
        with stage("tokenize"):
            chunk = stock_chunk(model, texts, prompt)
    return chunk


def split(texts: list[str], parts: int) -> list[list[str]]:
    """``texts`` in at most ``parts`` consecutive pieces of about equal characters (tokenising
    time follows them), none under MIN_PIECE texts unless there is only one."""
    parts = max(1, min(parts, len(texts) // MIN_PIECE))
    if parts == 1:
        return [texts]
    chars = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
    cuts = np.searchsorted(chars, chars[-1] * np.arange(1, parts) / parts).tolist()
    bounds = [0, *cuts, len(texts)]
    return [texts[a:b] for a, b in itertools.pairwise(bounds) if b > a]
