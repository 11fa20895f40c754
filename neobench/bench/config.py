"""The configs of `neobench bench encode`, `bench host` and `bench scale`: which texts, which
model, which settings, each field with its default and the one-line doc that is also its flag's
help."""

from __future__ import annotations

from dataclasses import dataclass

from neobench.protocol.config import DEFAULT_BENCHMARK, EvalConfig, like, opt

__all__ = [
    "HOST_BENCH_TASKS",
    "SCALE_SIZES",
    "BenchEncodeCommand",
    "BenchHostCommand",
    "BenchScaleCommand",
]


@dataclass(kw_only=True)
class BenchEncodeCommand:
    """`neobench bench encode`: which texts, which model, which encoder settings."""

    model: str | None = opt(None, "model (default: the packaged all-MiniLM-L6-v2)")
    tasks: list[str] = opt(
        ["SciFact", "STSBenchmark"], "comma-separated tasks whose texts are encoded", csv=True
    )
    benchmark: str = opt(DEFAULT_BENCHMARK, "mteb benchmark the tasks belong to")
    data_dir: str | None = like(EvalConfig, "data_dir")
    max_texts: int = opt(4000, "texts encoded in all, an equal share from each task")
    device: str = like(EvalConfig, "device")
    batch_size: int = like(EvalConfig, "batch_size", "stock encode's batch size")
    max_seq_length: int | str = like(EvalConfig, "max_seq_length")
    token_budget: int | None = like(EvalConfig, "token_budget")
    dtype: str = like(EvalConfig, "dtype")
    unpadded: str = like(EvalConfig, "unpadded")


HOST_BENCH_TASKS = [
    "SciFact",
    "ArguAna",
    "TwentyNewsgroupsClustering",
    "STSBenchmark",
    "Banking77Classification",
]


@dataclass(kw_only=True)
class BenchHostCommand:
    """`neobench bench host`: the eval path with a null forward pass, per stage."""

    model: str | None = opt(
        None, "model whose tokenizer and settings are used (default: the packaged MiniLM)"
    )
    tasks: list[str] = opt(HOST_BENCH_TASKS, "comma-separated tasks evaluated", csv=True)
    benchmark: str = opt(DEFAULT_BENCHMARK, "mteb benchmark the tasks belong to")
    data_dir: str | None = like(EvalConfig, "data_dir")
    cache: list[str] = opt(
        ["off", "cold", "warm"],
        "embedding cache modes: off | cold (empty) | warm (filled by cold)",
        csv=True,
    )
    device: str = like(EvalConfig, "device")
    instructions: str = like(EvalConfig, "instructions")
    max_seq_length: int | str = like(EvalConfig, "max_seq_length")
    stock: bool = opt(
        False, "also run the tasks through stock mteb.evaluate + SentenceTransformer.encode"
    )
    json: str | None = opt(None, "also write the figures to this JSON file", metavar="FILE")


# Documents per synthetic corpus. The six large corpora of MTEB(eng, v1) hold 2.7 (NQ) to 8.8
# (MSMARCO) million documents; every size here holds at least one search chunk (200,000
# documents, neobench/evaluate/adapter.py), so memory is measured as it behaves at full size, and
# the four take about half the time of 0.5-4 million (docs/performance.md).
SCALE_SIZES = ["250000", "500000", "1000000", "2000000"]


@dataclass(kw_only=True)
class BenchScaleCommand:
    """`neobench bench scale`: the eval path on synthetic retrieval corpora of growing size."""

    sizes: list[str] = opt(
        SCALE_SIZES,
        "comma-separated corpus sizes in documents (k and M allowed: 500k,1M)",
        csv=True,
    )
    queries: int = opt(7000, "real queries per corpus (MSMARCO's dev set has 6,980)")
    dim: int = opt(768, "width of the null embeddings (768: BERT-base)")
    cache: str = opt("on", "embedding cache: on (an empty one per size, as eval's default) | off")
    model: str | None = opt(
        None, "model whose tokenizer and settings are used (default: the packaged MiniLM)"
    )
    corpus_tasks: list[str] = opt(
        ["SciFact", "ArguAna"],
        "retrieval tasks whose corpora's sentences make the documents",
        csv=True,
    )
    query_tasks: list[str] = opt(
        ["SciFact", "ArguAna", "Banking77Classification"],
        "tasks whose texts are the queries (a retrieval task's queries, another's texts)",
        csv=True,
    )
    benchmark: str = opt(
        DEFAULT_BENCHMARK, "mteb benchmark the source tasks belong to and that is extrapolated to"
    )
    data_dir: str | None = like(EvalConfig, "data_dir")
    device: str = like(EvalConfig, "device")
    max_seq_length: int | str = like(EvalConfig, "max_seq_length")
    seed: int = opt(0, "seed of the documents, the queries drawn and the relevance")
    work_dir: str | None = opt(
        None,
        "folder for the corpora, caches and results, removed afterwards (default: the system's "
        "temporary folder; the largest size needs about 5 KB per document at --dim 768)",
        metavar="DIR",
    )
    json: str | None = opt(None, "also write the figures to this JSON file", metavar="FILE")
