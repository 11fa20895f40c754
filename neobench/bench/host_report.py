"""`neobench bench host`'s output: the per-stage table of its runs, what the host's speed means
for feeding an H100 (its forward ceiling for the model and for BERT-base), and the JSON record.

The runs themselves (the null forward pass, the timed evaluations) are neobench/bench/host.py.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import torch

from neobench.bench.encode import default_model, non_embedding_parameters, text_flops

if TYPE_CHECKING:
    from neobench.bench.config import BenchHostCommand
    from neobench.bench.host import HostRun

# Forward throughput an H100 reaches on these machines (docs/performance.md: ~800 TFLOP/s of
# bf16 measured, of 989 spec); the ceilings below are FLOPs per token divided into it.
H100_FLOPS = 800e12
# The table's row order: the stages in the order a text meets them, then the rest.
STAGE_ORDER = (
    "load",
    "collate",
    "cache keys",
    "cache lookup",
    "dedup",
    "tokenize",
    "tokenize wait",
    "batching",
    "copy to device",
    "forward",
    "copy to host",
    "cache insert",
    "cache insert wait",
    "assemble",
    "mteb encode call",
    "scoring",
    "result building",
    "units",
    "writing",
    "other",
)


def forward_ceiling(config: Any, context: float) -> float:
    """Tokens/s of an H100 forward at H100_FLOPS for a model of this config at this mean length
    (FLOPs per token: neobench/bench/encode.py's text_flops, the one formula)."""
    from transformers import AutoModel

    from neobench.models import register

    register()
    with torch.device("meta"):
        model = AutoModel.from_config(config)
    per_token = text_flops(non_embedding_parameters(model), config, context) / context
    return H100_FLOPS / per_token


def report(runs: list[HostRun]) -> str:
    """The per-stage table of every run, then what it means for feeding an H100."""
    from transformers import BertConfig

    stages = sorted({s for r in runs for s in r.seconds} | {"tokenize"})
    order = [s for s in STAGE_ORDER if s in stages] + [s for s in stages if s not in STAGE_ORDER]
    head = f"{'stage':<18}" + "".join(f"{r.label:>24}" for r in runs)
    lines = [head, f"{'':<18}" + "".join(f"{'seconds   tokens/s':>24}" for r in runs)]

    def row(label: str, values: list[float]) -> str:
        cells = []
        for r, v in zip(runs, values, strict=True):
            rate = f"{r.tokens / v / 1e6:7.2f}M" if v > 0 and r.tokens else f"{'-':>8}"
            cells.append(f"{v:>12.2f}  {rate:>10}")
        return f"{label:<18}" + "".join(cells)

    for s in order:
        values = [r.tokenize if s == "tokenize" else r.seconds.get(s, 0.0) for r in runs]
        lines.append(row(s, values))
    lines.append(row("= other_host", [r.other_host for r in runs]))
    lines.append(row("= total", [r.wall for r in runs]))
    lines.append(f"{'tokens':<18}" + "".join(f"{r.tokens:>24,}" for r in runs))
    lines.append(
        f"{'texts (encoded)':<18}"
        + "".join(f"{f'{r.texts_requested:,} ({r.texts_encoded:,})':>24}" for r in runs)
    )
    first = runs[0]
    warmup = (
        f"; then an untimed warm-up run of the tasks (first-use costs): {first.warmup:.2f} s"
        if first.warmup
        else "; no warm-up run (--no-warmup): the first run above also pays first-use costs"
    )
    lines.append(
        f"start-up, once per process and not in the runs above (imports, mteb's benchmark "
        f"registry): {first.startup:.2f} s{warmup}"
    )
    stock = next((r for r in runs if r.cache == "stock"), None)
    ours = next((r for r in runs if r.cache == "off"), None)
    if stock and ours:
        lines.append(
            f"end to end, cache off: neobench {ours.wall:.1f} s, stock mteb {stock.wall:.1f} s "
            f"({stock.wall / ours.wall:.2f}x)"
        )
    lines.append("")
    lines += _feeding([r for r in runs if r.cache != "stock"], runs[0].model_config, BertConfig())
    return "\n".join(lines)


def _feeding(runs: list[HostRun], model_config: Any, bert_base: Any) -> list[str]:
    """Host tokens/s per core against an H100's forward ceiling for this model and BERT-base."""
    run = next((r for r in runs if r.tokens), None)
    if run is None:
        return ["no text was tokenised (every text came from the cache)"]
    context = run.tokens / max(1, run.texts_encoded)
    cores = len(os.sched_getaffinity(0))
    # The fast tokenizer's batch calls use every core (its own thread pool).
    per_core = run.tokens / run.tokenize / cores if run.tokenize else 0.0
    host = run.tokens / run.other_host if run.other_host > 0 else float("inf")
    lines = [
        f"cache {run.cache}: {run.tokens:,} tokens, mean {context:.0f} per text; {cores} cores; "
        f"forward batches of at most {run.token_budget or 0:,} padded tokens",
        f"tokenisation: {run.tokens / run.tokenize / 1e6:.2f}M tokens/s "
        f"({per_core / 1e6:.2f}M per core); the rest of the host path (other_host): "
        f"{host / 1e6:.2f}M tokens/s, {run.tokenize / max(run.other_host, 1e-9):.1f}x "
        "tokenisation's speed",
    ]
    if run.cpu:
        lines.append(
            f"other_host as the main thread's CPU time: {run.other_host_cpu:.2f} s "
            f"({run.tokens / max(run.other_host_cpu, 1e-9) / 1e6:.2f}M tokens/s; wall "
            f"{run.other_host:.2f} s, the rest waiting for a core the tokenizer and other "
            "threads held)"
        )
    inside, around = run.in_encoder, run.other_host - run.in_encoder
    lines.append(
        f"other_host: {inside:.2f} s in the encoder (per text: keys, lookups, batching, copies, "
        f"inserts; {run.tokens / max(inside, 1e-9) / 1e6:.2f}M tokens/s), {around:.2f} s around "
        "it (per task and run: data loading, mteb's bookkeeping, result dictionaries, units, "
        "model load)"
    )
    for label, config in (("this model", model_config), ("BERT-base", bert_base)):
        ceiling = forward_ceiling(config, context)
        lines.append(
            f"H100 forward ceiling, {label}: {ceiling / 1e6:.2f}M tokens/s; one core's "
            f"tokenisation feeds {per_core / ceiling:.3f} H100s; "
            f"cores to feed one: {ceiling / per_core:.0f}"
            if per_core
            else f"H100 forward ceiling, {label}: {ceiling / 1e6:.2f}M tokens/s"
        )
    return lines


def to_json(runs: list[HostRun], cmd: BenchHostCommand) -> str:
    """The figures as JSON: the first run's summary at the top (tokens, seconds, tasks), every
    run under ``runs``, and the settings."""
    import json

    from neobench.core import provenance

    first = runs[0].summary()
    payload = {
        **first,
        "runs": [r.summary() for r in runs],
        "settings": {
            "model": cmd.model or default_model(),
            "tasks": list(cmd.tasks),
            "benchmark": cmd.benchmark,
            "device": cmd.device,
            "instructions": cmd.instructions,
            "max_seq_length": cmd.max_seq_length,
            "token_budget": cmd.token_budget,
            "warmup": not cmd.no_warmup,
        },
        "environment": provenance.environment(),
    }
    return json.dumps(payload, indent=2, default=str) + "\n"
