"""Generated texts as long as MTEB(eng, v1)'s large retrieval sets, and `bench gpu`'s corpus
section: `neobench eval`'s own path (the model and encoder it builds: tokenizer workers, token
budget batches, unpadding, the running top-k on the device) searching a generated corpus, cache off.
docs/performance.md, "One command for the GPU path", says what each key means.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from neobench.bench.config import GpuScale
from neobench.models.flops import non_embedding_parameters, peak_flops, text_flops
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

    def __init__(self, seed: int, pool: int = 1_000_000) -> None:
        from neobench.bench.gpu import default_model

        vocab = (Path(default_model()) / "vocab.txt").read_text(encoding="utf-8").split("\n")
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


def generated_corpus(docs: int, queries: int, seed: int) -> tuple[list[str], list[str], dict]:
    """(documents, queries, summary): each corpus of CORPORA its share, at its own lengths."""
    words = Words(seed)
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


def corpus_section(
    models: list[tuple[str, str]], scale: GpuScale, device: str, dtype: str, seed: int,
    budget: Any,
) -> Any:  # fmt: skip
    """Every model's search of the generated corpus, until the budget is spent: one row each."""
    from neobench.bench.gpu import Section
    from neobench.protocol.config import DEFAULT_BENCHMARK
    from neobench.protocol.tasks import load_benchmark, task_tokens

    section = Section()
    documents, queries, summary = generated_corpus(scale.corpus_docs, scale.corpus_queries, seed)
    tasks = list(load_benchmark(DEFAULT_BENCHMARK).tasks)
    for name, path in models:
        if budget.spent(section, f"searching with {name}"):
            break
        row = search_row(name, path, documents, queries, scale, device, dtype)
        row.update(summary)
        texts_and_lengths = [task_tokens(t, scale.max_seq_length) for t in tasks]
        v1_tokens = sum(texts * length for texts, length in texts_and_lengths)
        row["v1_minutes"] = round(v1_tokens / row["tokens_per_s"] / 60, 1)
        complete = row["ranked"] == len(queries) and row["listed"] == row["expected_listed"]
        section.check(row, complete, f"{name}: {row['ranked']} of {len(queries)} queries ranked")
    return section


def search_row(
    name: str, path: str, documents: list[str], queries: list[str], scale: GpuScale,
    device: str, dtype: str,
) -> dict[str, Any]:  # fmt: skip
    """One model's whole search through `neobench eval`'s model and encoder (cache off, no
    instructions), timed after a small untimed search (kernels, workers, allocator)."""
    import mteb
    from datasets import Dataset

    from neobench.bench.gpu import peak_memory_mb, reset_peak_memory
    from neobench.evaluation import model as eval_model
    from neobench.protocol.config import EvalConfig
    from neobench.protocol.instructions import load_profile

    config = EvalConfig(
        model=path, device=device, dtype=dtype, no_cache=True,
        max_seq_length=str(scale.max_seq_length),
    )  # fmt: skip
    run = eval_model.load(config)
    encoder = eval_model.encoder(config, run, load_profile("none"), {}, None)
    metadata = mteb.get_task(CORPORA[0]).metadata
    k = min(scale.k, len(documents))

    def search(docs: list[str], asked: list[str]) -> dict:
        encoder.index(Dataset.from_dict({"id": [f"d{i}" for i in range(len(docs))], "text": docs}))
        rows = Dataset.from_dict({"id": [f"q{i}" for i in range(len(asked))], "text": asked})
        return encoder.search(
            rows, task_metadata=metadata, hf_split="dev", hf_subset="default", top_k=k,
            encode_kwargs={},
        )  # fmt: skip

    try:
        search(documents[:256], queries[:16])
        network = encoder.model
        fast = encoder.fast
        before = (fast.tokens_encoded, fast.texts_encoded)
        clock = ForwardClock(network)
        reset_peak_memory(device)
        start = time.perf_counter()
        ranking = search(documents, queries)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        forward = clock.seconds()
        tokens = fast.tokens_encoded - before[0]
        texts = fast.texts_encoded - before[1]
    finally:
        encoder.fast.close()
    backbone = network[0].auto_model
    mean = tokens / max(1, texts)
    flops = texts * text_flops(non_embedding_parameters(backbone), backbone.config, mean)
    peak = peak_flops(torch.cuda.get_device_name()) if device.startswith("cuda") else None
    return {
        "model": name,
        "attention": run.loaded.attn_implementation,
        "texts": texts,
        "tokens": tokens,
        "mean_tokens": round(mean, 1),
        "seconds": round(seconds, 3),
        "tokens_per_s": round(tokens / seconds, 1),
        "flops_per_s": round(flops / seconds, 1),
        "peak_fraction": round(flops / seconds / peak, 4) if peak else None,
        "forward_share": round(forward / seconds, 4),
        "host_share": round(1 - forward / seconds, 4),
        "peak_memory_mb": round(peak_memory_mb(device), 1),
        "ranked": len(ranking),
        "listed": sum(len(found) for found in ranking.values()),
        "expected_listed": len(queries) * k,
    }
