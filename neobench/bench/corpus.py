"""Generated texts as long as MTEB(eng, v1)'s large retrieval sets (`bench gpu`'s corpus and
recipe-shape train rows: docs/performance.md, "One command for the GPU path"), and the clock of a
network's forward passes on its device.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from neobench.protocol.tasks import CHARS_PER_TOKEN, TextLengths, retrieval_lengths

# The large retrieval sets of MTEB(eng, v1), whose statistics the corpus follows: each one's share
# of the documents and queries is its share of their sizes.
CORPORA = ("MSMARCO", "FEVER", "NQ", "HotpotQA")
# mteb records a side's least, mean and most characters only: lengths are drawn log-normal with
# its mean and this spread, and kept within its least and most.
SPREAD = 0.5


class Words:
    """Texts of a given length in characters, cut from one long run of seeded words of MiniLM's
    vocabulary (about one token each): a text of c characters holds c / CHARS_PER_TOKEN words,
    so its tokens are those of English text of c characters."""

    def __init__(self, vocab_file: Path, seed: int, pool: int = 1_000_000) -> None:
        vocab = vocab_file.read_text(encoding="utf-8").split("\n")
        words = [w for w in vocab if w.isalpha() and w.isascii() and len(w) > 2]
        self.rng = np.random.default_rng(seed)
        chosen = self.rng.integers(0, len(words), pool)
        self.text = " ".join(map(words.__getitem__, chosen.tolist()))
        # Where each word starts in the text (and one past the end).
        sizes = np.array([len(w) + 1 for w in words])[chosen]
        self.starts = np.concatenate([[0], np.cumsum(sizes)])

    def texts(self, lengths: TextLengths, count: int) -> list[str]:
        """``count`` texts whose characters follow ``lengths`` (as English text)."""
        mu = np.log(lengths.mean) - SPREAD**2 / 2  # the log-normal whose mean is lengths.mean
        chars = np.clip(self.rng.lognormal(mu, SPREAD, count), lengths.low, lengths.high)
        words = np.maximum(1, np.round(chars / CHARS_PER_TOKEN)).astype(np.int64)
        words = np.minimum(words, len(self.starts) - 2)
        first = self.rng.integers(0, len(self.starts) - 1 - words)
        begin, end = self.starts[first], self.starts[first + words] - 1
        return [self.text[b:e] for b, e in zip(begin.tolist(), end.tolist(), strict=True)]


def shares(total: int, sizes: list[int]) -> list[int]:
    """``total`` split in proportion to ``sizes`` (at least one each), summing to ``total``."""
    raw = np.array(sizes, dtype=float) / sum(sizes) * total
    counts = np.maximum(1, np.floor(raw)).astype(int)
    counts[int(np.argmax(raw))] += total - int(counts.sum())
    return counts.tolist()


def generated_corpus(words: Words, docs: int, queries: int) -> tuple[list[str], list[str], dict]:
    """(documents, queries, summary): each corpus of CORPORA its share, at its own lengths."""
    stats = {name: retrieval_lengths(name) for name in CORPORA}
    doc_counts = shares(docs, [stats[n][0].count for n in CORPORA])
    query_counts = shares(queries, [stats[n][1].count for n in CORPORA])
    documents: list[str] = []
    asked: list[str] = []
    for name, n_docs, n_queries in zip(CORPORA, doc_counts, query_counts, strict=True):
        documents += words.texts(stats[name][0], n_docs)
        asked += words.texts(stats[name][1], n_queries)
    summary = {
        "corpora": {n: {"documents": d, "queries": q} for n, d, q in
                    zip(CORPORA, doc_counts, query_counts, strict=True)},
        "documents": len(documents),
        "queries": len(asked),
    }  # fmt: skip
    return documents, asked, summary


class ForwardClock:
    """Time the model spends in forward passes, measured on its device: CUDA events around each
    call on the current stream (read once at the end), the process clock on a CPU."""

    def __init__(self, network: Any) -> None:
        self.cuda = network.device.type == "cuda"
        self.pairs: list[tuple[Any, Any]] = []
        self.cpu_seconds = 0.0
        self._begun = 0.0
        self.handles = [
            network.register_forward_pre_hook(lambda *_: self._begin()),
            network.register_forward_hook(lambda *_: self._end()),
        ]

    def _begin(self) -> None:
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)
            start.record()
            self.pairs.append((start, None))
        else:
            self._begun = time.perf_counter()

    def _end(self) -> None:
        if self.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self.pairs[-1] = (self.pairs[-1][0], end)
        else:
            self.cpu_seconds += time.perf_counter() - self._begun

    def seconds(self) -> float:
        """Forward seconds so far (on CUDA after a synchronize)."""
        for handle in self.handles:
            handle.remove()
        if not self.cuda:
            return self.cpu_seconds
        torch.cuda.synchronize()
        return sum(start.elapsed_time(end) for start, end in self.pairs if end) / 1000
