"""Tokenisation off the main thread, padded per batch: the same features as stock preprocess."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from benchmarks.stage_clock import StageClock
from neobench.core.stages import stage
from neobench.encoder import feed, tokens


@pytest.fixture(scope="module")
def model(minilm_model):
    return minilm_model


@pytest.fixture(scope="module")
def texts(mirror_texts):
    # Abstracts up to the 512-token limit, and the edges: empty, one letter, far too long.
    return [*mirror_texts["abstracts"][:60], "", "a", "short one", "x " * 600]


@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("prompt", [None, "query: "])
def test_batches_hold_exactly_the_stock_features(model, texts, monkeypatch, padding_side, prompt):
    """Every batch equals what preprocess gives for those texts on their own (padded to the
    batch's longest, on the tokenizer's side); the fast path, not the fallback, made them."""
    monkeypatch.setattr(model.tokenizer, "padding_side", padding_side)
    chunk = tokens.tokenize(model, texts, prompt)
    assert not chunk.stock
    rng = np.random.default_rng(0)
    for rows in (np.arange(len(texts)), rng.permutation(len(texts))[:7], np.array([3])):
        ours = chunk.features(rows)
        stock = model.preprocess([texts[i] for i in rows], prompt=prompt)
        assert set(ours) == set(stock)
        for key, value in stock.items():
            if isinstance(value, torch.Tensor):
                assert ours[key].dtype == value.dtype and torch.equal(ours[key], value), key
            else:
                assert ours[key] == value, key
    assert chunk.tokens == int(model.preprocess(texts, prompt=prompt)["attention_mask"].sum())


def test_unknown_per_token_keys_take_the_stock_path(model, texts, monkeypatch):
    """A processor output this module cannot pad falls back to preprocess's own tensors."""
    original = model.preprocess

    def with_offsets(batch, **kwargs):
        out = original(batch, **kwargs)
        if "processing_kwargs" in kwargs:  # the unpadded call: add a key of unknown padding
            out["offset_mapping"] = [[(0, 0)] * len(ids) for ids in out["input_ids"]]
        return out

    monkeypatch.setattr(model, "preprocess", with_offsets)
    chunk = tokens.tokenize(model, texts[:10], None)
    assert chunk.stock
    rows = np.array([4, 1])
    stock = original([texts[i] for i in rows])
    assert torch.equal(chunk.features(rows)["input_ids"], stock["input_ids"])


def test_a_preprocess_without_processing_kwargs_takes_the_stock_path(model, texts, monkeypatch):
    original = model.preprocess

    def older(batch, prompt=None):  # an input module that knows no processing_kwargs
        return original(batch, prompt=prompt)

    monkeypatch.setattr(model, "preprocess", older)
    chunk = tokens.tokenize(model, texts[:10], "query: ")
    assert chunk.stock
    rows = np.array([2, 7])
    stock = original([texts[i] for i in rows], prompt="query: ")
    assert torch.equal(chunk.features(rows)["input_ids"], stock["input_ids"])


def test_batches_are_prepared_in_the_feeder_thread(model, texts):
    """Several chunks: tokenised and padded in another thread, handed over in order; the clock
    counts the feeder's time as tokenisation and batching (busy), the consumer's waiting apart."""
    seen_threads = set()
    original = feed.tokenize

    def spy(model_, batch, prompt):
        seen_threads.add(threading.get_ident())
        return original(model_, batch, prompt)

    pieces = [texts[0:20], texts[20:40], texts[40:]]
    clock = StageClock()
    with pytest.MonkeyPatch.context() as patch, clock.running():
        patch.setattr(feed, "tokenize", spy)
        with stage("consumer"):
            items = list(feed.feed(model, pieces, None, 2048))
    ends = [item for item in items if isinstance(item, feed.ChunkEnd)]
    assert [(e.chunk, e.texts) for e in ends] == [(0, 20), (1, 20), (2, len(texts) - 40)]
    for index, piece in enumerate(pieces):  # every text in exactly one batch of its chunk
        batches = [i for i in items if isinstance(i, feed.Batch) and i.chunk == index]
        rows = np.concatenate([b.rows for b in batches])
        assert sorted(rows.tolist()) == list(range(len(piece)))
        for batch in batches:  # padded to the batch's longest, within budget
            assert batch.features["input_ids"].shape[0] == len(batch.rows)
            assert batch.features["input_ids"].numel() <= 2048 or len(batch.rows) == 1
    assert threading.get_ident() not in seen_threads and len(seen_threads) == 1
    assert clock.busy_seconds["tokenize"] > 0 and "tokenize" not in clock.seconds
    assert clock.busy_seconds["batching"] > 0 and "batching" not in clock.seconds
    assert clock.counts["tokenize wait"] == len(items) + 1  # and the end


def test_a_failure_in_the_feeder_reaches_the_consumer(model, texts, monkeypatch):
    def broken(*args):
        raise ValueError("tokenizer broke")

    monkeypatch.setattr(feed, "tokenize", broken)
    with pytest.raises(ValueError, match="tokenizer broke"):
        list(feed.feed(model, [texts[:5]], None, 2048))
    assert not any(t.name == "neobench-feed" for t in threading.enumerate())  # it ended


def test_pieces_split_by_characters():
    texts = ["a" * n for n in range(1, 400)]
    pieces = feed.split(texts, 3)
    assert [t for p in pieces for t in p] == texts and len(pieces) == 3
    chars = [sum(map(len, p)) for p in pieces]
    assert max(chars) < 1.1 * min(chars)  # balanced by characters, not by count
    assert len(feed.split(texts[:128], 4)) == 2  # at least MIN_PIECE (64) texts a piece
    assert feed.split(texts[:10], 4) == [texts[:10]]
