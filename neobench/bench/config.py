"""The configs of `neobench bench encode` and `bench host`: which texts, which model, which
settings, each field with its default and the one-line doc that is also its flag's help."""

from __future__ import annotations

from dataclasses import dataclass

from neobench.protocol.config import DEFAULT_BENCHMARK, EvalConfig, like, opt

__all__ = ["HOST_BENCH_TASKS", "BenchEncodeCommand", "BenchHostCommand"]


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
    tokenize_workers: int | str = like(EvalConfig, "tokenize_workers")


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
    tokenize_workers: int | str = like(EvalConfig, "tokenize_workers")
    stock: bool = opt(
        False, "also run the tasks through stock mteb.evaluate + SentenceTransformer.encode"
    )
    json: str | None = opt(None, "also write the figures to this JSON file", metavar="FILE")
