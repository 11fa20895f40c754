"""Tokenising in several processes: the same batches, features and embeddings as one thread,
errors brought back to the caller, and no process left behind."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest
import torch

from neobench.core.errors import NeobenchError
from neobench.encoder import feed, tokenpool
from neobench.encoder.encode import FastEncoder


@pytest.fixture(scope="module")
def model(minilm_model):
    return minilm_model


@pytest.fixture(scope="module")
def texts(mirror_texts):
    # Abstracts up to the 512-token limit, short sentences, and the edges.
    abstracts, sentences = mirror_texts["abstracts"], mirror_texts["sentences"]
    return [*abstracts[:80], *sentences[:120], "", "a", "x " * 600]


@pytest.fixture(scope="module")
def pool(model):
    pool = tokenpool.TokenizePool(model, 2)
    yield pool
    pool.close()


def _batches(model, pieces, prompt, pool):
    return [
        (i.chunk, i.rows, i.features) if isinstance(i, feed.Batch) else i
        for i in feed.feed(model, pieces, prompt, 2048, pool)
    ]


@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("prompt", [None, "query: "])
def test_processes_give_the_same_batches_as_one_thread(
    model, texts, pool, monkeypatch, padding_side, prompt
):
    """Two processes, each a piece of every chunk: the same batches, each with the same
    features, tensor for tensor (dtype included), as tokenising in this process."""
    monkeypatch.setattr(model.tokenizer, "padding_side", padding_side)
    pieces = [texts[:150], texts[150:]]
    assert len(feed.split(pieces[0], 2)) == 2  # the first chunk is split over both processes
    inline, pooled = _batches(model, pieces, prompt, None), _batches(model, pieces, prompt, pool)
    assert len(inline) == len(pooled) > 4
    for one, other in zip(inline, pooled, strict=True):
        if isinstance(one, feed.ChunkEnd):
            assert one == other
            continue
        assert one[0] == other[0] and np.array_equal(one[1], other[1])
        assert one[2].keys() == other[2].keys()
        for key, value in one[2].items():
            if isinstance(value, torch.Tensor):
                assert value.dtype == other[2][key].dtype and torch.equal(value, other[2][key])
            else:
                assert value == other[2][key], key


def test_embeddings_equal_one_thread_and_stock(model, texts):
    some = texts[:40] + texts[80:140]
    stock = model.encode(some, prompt="query: ", batch_size=32)
    one = FastEncoder(model, "fp", None, tokenize_workers=1)
    two = FastEncoder(model, "fp", None, tokenize_workers=2)
    try:
        assert one.tokenize_workers == 1 and two.tokenize_workers == 2
        ours = two.embed(some, "query: ")
        np.testing.assert_array_equal(ours, one.embed(some, "query: "))  # bit for bit
        assert np.abs(ours - stock).max() < 1e-5
        assert one._pool is None and len(two._pool.processes) == 2
        assert two.tokens_encoded == one.tokens_encoded > 0
        processes = two._pool.processes
    finally:
        two.close()
    assert all(p.exitcode is not None for p in processes)


def test_an_error_in_a_worker_reaches_the_caller(model, texts, monkeypatch):
    """The worker's exception is raised in the caller with its traceback as a note; the next
    request works, and close() ends every process."""
    original = model.preprocess

    def fails_on_boom(batch, **kwargs):
        if "boom" in batch:
            raise ValueError("cannot tokenise boom")
        return original(batch, **kwargs)

    monkeypatch.setattr(model, "preprocess", fails_on_boom)  # before the fork: workers have it
    encoder = FastEncoder(model, "fp", None, tokenize_workers=2)
    try:
        with pytest.raises(ValueError, match="cannot tokenise boom") as raised:
            encoder.embed([*texts[:100], "boom", *texts[100:200]], None)
        assert "in a tokenizer process" in "".join(raised.value.__notes__)
        # The feed ended: its one kept thread is free at once for other work.
        assert encoder._feeder.submit(lambda: "free").result(timeout=1.0) == "free"
        vectors = encoder.embed(texts[:70], None)  # stale jobs of the failed request dropped
        assert vectors.shape == (70, 384)
        processes = encoder._pool.processes
    finally:
        encoder.close()
    assert all(p.exitcode is not None for p in processes)


def test_a_killed_worker_is_one_clear_error(model, texts):
    pool = tokenpool.TokenizePool(model, 2)
    os.kill(pool.processes[0].pid, signal.SIGKILL)
    pool.processes[0].join()
    with pytest.raises(tokenpool.WorkerFailed, match="--tokenize-workers"):
        # Enough jobs that the dead worker would have had one.
        for job in [pool.submit(texts[:64], None) for _ in range(4)]:
            pool.result(job)
    assert pool.closed and all(p.exitcode is not None for p in pool.processes)


def test_close_ends_workers_quietly_under_the_cli_s_signal_handler(model, texts):
    """The CLI's SIGTERM handler raises Terminated; forked workers inherit it, but close()'s
    SIGTERM must end them at once, not raise it there (a traceback in the run's log): a
    worker killed by the signal itself exits with -SIGTERM, one that raised with 1."""

    def raises(signum, frame):
        raise RuntimeError("the parent's handler ran in a worker")

    previous = signal.signal(signal.SIGTERM, raises)
    try:
        pool = tokenpool.TokenizePool(model, 2)
        assert pool.result(pool.submit(texts[:64], None)).tokens > 0
        pool.close()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert [p.exitcode for p in pool.processes] == [-signal.SIGTERM] * 2


def test_workers_leave_ctrl_c_to_the_parent(model, texts, pool):
    """Ctrl-C reaches the whole process group; a worker ignores it and goes on."""
    os.kill(pool.processes[1].pid, signal.SIGINT)
    time.sleep(0.2)
    jobs = [pool.submit(texts[:64], None) for _ in range(4)]
    assert all(pool.result(job).tokens > 0 for job in jobs)
    assert all(p.exitcode is None for p in pool.processes)


def test_resolve_workers():
    assert tokenpool.resolve_workers("auto") == tokenpool.cores()
    assert tokenpool.resolve_workers("1") == 1 and tokenpool.resolve_workers(3) == 3
    for bad in ("0", "-2", "many"):
        with pytest.raises(NeobenchError, match=r"--tokenize-workers .*auto or a positive"):
            tokenpool.resolve_workers(bad)
