"""`neobench bench scale`'s output: one column per corpus size and the fitted exponent beside
each figure, then the whole-benchmark extrapolation; and the JSON record (keys documented in
docs/performance.md, "What a run costs as it grows").

The runs are neobench/bench/scale.py; the fits and the extrapolation neobench/bench/scale_fit.py.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from neobench.bench.host_report import STAGE_ORDER

if TYPE_CHECKING:
    from neobench.bench.config import BenchScaleCommand
    from neobench.bench.scale import ScaleBench

GIB, MIB = 2**30, 2**20


def report(bench: ScaleBench) -> list[str]:
    """The table's lines, then the extrapolation's."""
    runs, fits = bench.runs, bench.exponents
    width = 14
    lines = [
        f"{'documents':<24}" + "".join(f"{r['documents']:>{width},}" for r in runs) + "  exponent"
    ]

    def row(label: str, values: list[float], fmt: str, fit: dict[str, Any] | None) -> None:
        exponent = f"{fit['exponent']:>10.2f}" if fit else f"{'-':>10}"
        lines.append(f"{label:<24}" + "".join(f"{v:>{width}{fmt}}" for v in values) + exponent)

    stages = sorted({s for r in runs for s in r["seconds"]} - {"total", "tokenize", "other_host"})
    order = [s for s in STAGE_ORDER if s in stages] + [s for s in stages if s not in STAGE_ORDER]
    lines.append("seconds by stage (main thread; tokenize: busy seconds in any thread)")
    for s in order:
        values = [r["seconds"].get(s, 0.0) for r in runs]
        row(f"  {s}", values, ".2f", fits["stages"].get(s))
    for label, key in (
        ("tokenize", "tokenize"),
        ("= other_host", "other_host"),
        ("= total", "total"),
    ):
        row(f"  {label}", [r["seconds"][key] for r in runs], ".2f", fits[f"{key}_seconds"])
    row("tokens", [r["tokens"] for r in runs], ",", fits["tokens"])
    row("tokens/s (total)", [r["tokens"] / r["seconds"]["total"] for r in runs], ",.0f", None)
    row("documents/s (total)", [r["documents"] / r["seconds"]["total"] for r in runs], ",.0f", None)
    row("peak RSS, GiB", [r["peak_rss_bytes"] / GIB for r in runs], ".2f", fits["peak_rss_bytes"])
    row("embedding cache, MiB", [r["cache_bytes"] / MIB for r in runs], ",.1f", fits["cache_bytes"])
    row(
        "datasets cache, MiB",
        [r["datasets_cache_bytes"] / MIB for r in runs],
        ",.1f",
        fits["datasets_cache_bytes"],
    )
    row("result JSON, KiB", [r["result_bytes"] / 1024 for r in runs], ",.1f", fits["result_bytes"])
    row("units, KiB", [r["units_bytes"] / 1024 for r in runs], ",.1f", fits["units_bytes"])
    row("main score (null)", [r["main_score"] for r in runs], ".5f", None)
    lines.append(
        f"each size in its own process; whole command {bench.seconds:.0f} s on {bench.cores} "
        "cores (generation and process start-ups included)"
    )
    return [*lines, "", *extrapolation_lines(bench.extrapolation)]


def extrapolation_lines(extra: dict[str, Any]) -> list[str]:
    """One model's run of the benchmark, in a few lines."""
    disk = extra["disk_bytes"]
    largest = extra["largest_corpus"]
    rss = extra["peak_rss_bytes"]
    cost = extra["host_seconds_per_million_tokens"]
    per_core = extra["tokenize_tokens_per_second_per_core"]
    lines = [
        f"one model on the benchmark ({extra['tasks']} tasks, mteb's descriptive statistics): "
        f"{extra['texts']:,} texts, {extra['distinct_texts']:,} distinct, about "
        f"{extra['tokens'] / 1e9:.2f} billion tokens ({extra['tokens_per_char']:.3f} tokens per "
        "character, as measured here)",
        f"disk: embedding cache {disk['cache'] / GIB:.1f} GiB "
        f"({extra['cache_bytes_per_text']:,.0f} bytes per text), "
        f"results {disk['results'] / MIB:.2f} MiB, units {disk['units'] / MIB:.1f} MiB",
        f"peak memory at the largest corpus ({largest['task']}, {largest['documents']:,} "
        "documents): "
        + (f"{rss / GIB:.1f} GiB" if rss else "no fit")
        + f" (fitted on {', '.join(f'{n:,}' for n in extra['peak_rss_fit_sizes'])} documents)",
        f"host, per million tokens: tokenizer {cost['tokenize']:.1f} s, main thread "
        f"{cost['other_host']:.1f} s (beside the forward pass and scoring) -> "
        f"{extra['host_hours']:.1f} hours on {extra['cores']} cores",
        f"tokenisation: {per_core / 1e6:.3f}M tokens/s per core -> "
        f"{extra['tokenize_core_hours']:.1f} core-hours",
    ]
    return lines


def to_json(bench: ScaleBench, cmd: BenchScaleCommand) -> str:
    """The figures as JSON: per size (``runs``), the fits, the extrapolation, the settings."""
    from neobench.bench.encode import default_model
    from neobench.core import provenance

    payload = {
        "sizes": [r["documents"] for r in bench.runs],
        "runs": bench.runs,
        "exponents": bench.exponents,
        "extrapolation": bench.extrapolation,
        "pool": bench.pool,
        "cores": bench.cores,
        "seconds": round(bench.seconds, 3),
        "settings": {
            "model": cmd.model or default_model(),
            "queries": cmd.queries,
            "dim": cmd.dim,
            "cache": cmd.cache,
            "benchmark": cmd.benchmark,
            "device": cmd.device,
            "max_seq_length": cmd.max_seq_length,
            "token_budget": cmd.token_budget,
            "seed": cmd.seed,
        },
        "environment": provenance.environment(),
    }
    return json.dumps(payload, indent=2, default=str) + "\n"
