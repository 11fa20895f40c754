"""The host's share of an evaluation: `neobench eval`'s path with a forward pass that costs nothing.

`neobench eval`'s own code path (run_eval: mteb.evaluate, the adapter, the encoder, the embedding
cache, the staged result writes) runs on real tasks with a *null encoder*: the real model's
tokenizer and settings, but a forward pass replaced by a lookup that returns an embedding of the
real shape, dtype and device at once. What is left of the wall time is the host's share, which
on a GPU decides how fast the GPU can be fed. The stage clock (benchmarks/stage_clock.py) splits it.

By default SciFact, ArguAna, TwentyNewsgroupsClustering, STSBenchmark and Banking77Classification
run with the embedding cache off, cold (an empty cache: every text looked up, encoded and
inserted) and warm (the cache the cold run filled: every text found, nothing tokenised), then
through stock `mteb.evaluate` + `SentenceTransformer.encode` with the same null forward pass and
prompts, all in one process after one untimed start-up (imports, mteb's benchmark registry) and
one untimed warm-up run. Prints seconds and tokens/s per stage, the end-to-end ratio against
stock, and what one core's tokenisation feeds of an H100's forward ceiling. Everything is written
to a temporary folder that is removed afterwards.

    python benchmarks/host_pipeline.py --data-dir ../shared/data/hub
    python benchmarks/host_pipeline.py --data-dir ../shared/data/hub --json host.json
    python benchmarks/host_pipeline.py --data-dir DIR --tasks SciFact --cache off --no-stock

The script reads top to bottom: its flags, the null forward pass, one timed evaluation, the runs,
the output. benchmarks/scale_rehearsal.py uses its null forward pass and timed evaluation.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from neobench.bench.gpu import default_model
from neobench.cli import flags
from neobench.cli.progress import silence_libraries
from neobench.core.card_io import write_text_atomic
from neobench.core.errors import NeobenchError
from neobench.core.stages import stage
from neobench.models.flops import non_embedding_parameters, text_flops
from neobench.protocol.config import DEFAULT_BENCHMARK, TOKEN_BUDGET, EvalConfig, like, opt

# The repository root, so the clock is imported as benchmarks.stage_clock from any folder.
sys.path.append(str(Path(__file__).resolve().parents[1]))
from benchmarks.stage_clock import StageClock

if TYPE_CHECKING:
    from neobench.models.load import LoadedModel

HOST_BENCH_TASKS = [
    "SciFact",
    "ArguAna",
    "TwentyNewsgroupsClustering",
    "STSBenchmark",
    "Banking77Classification",
]


@dataclass(kw_only=True)
class HostConfig:
    """The benchmark's flags: one field each, with its default and the help --help gives it
    (neobench's own flag builder, neobench/cli/flags.py)."""

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
    # The host's cost per batch is what a GPU waits on, so batches are the GPU path's size.
    token_budget: int = opt(
        TOKEN_BUDGET["cuda"],
        "padded tokens per forward batch (default: the CUDA default, the batches whose host "
        "cost a GPU waits on)",
    )
    no_stock: bool = opt(
        False, "skip the run of the tasks through stock mteb.evaluate + SentenceTransformer.encode"
    )
    no_warmup: bool = opt(
        False,
        "skip the untimed null-model run of the tasks before the timed runs (without it, the "
        "first timed run also pays the process's first-use costs)",
    )
    json: str | None = opt(None, "also write the figures to this JSON file", metavar="FILE")


# The null forward pass and one timed evaluation (benchmarks/scale_rehearsal.py uses both).

CACHE_MODES = ("off", "cold", "warm")
# Stages that are not the host pipeline's own cost: the tokenizer's work (parallel across
# cores), the forward pass (the null stand-in here) and the task's own evaluation algorithm.
TOKENIZE_STAGES = ("tokenize", "tokenize wait")
NOT_HOST = (*TOKENIZE_STAGES, "forward", "scoring")
# other_host's share inside the encoder: work per text and token, what a GPU waits on while a
# corpus streams through. The rest of other_host is around it: per task or per run (data
# loading, mteb's bookkeeping, result dictionaries, units, writes, model load, checks).
ENCODER_STAGES = (
    "collate",
    "cache keys",
    "cache lookup",
    "dedup",
    "batching",
    "copy to device",
    "copy to host",
    "cache insert",
    "cache insert wait",
    "assemble",
    "mteb encode call",
)
NULL_BUCKETS = 1 << 14  # distinct null embeddings (a texts' token ids pick one)


class NullForward:
    """A forward pass that costs nothing: each row's token ids hash to one of NULL_BUCKETS fixed
    random unit vectors. Same text, same vector (as with a real model); different texts spread
    over the buckets, so clustering, classifiers and search meet non-degenerate inputs."""

    def __init__(self, dim: int, device: torch.device, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        table = torch.nn.functional.normalize(torch.randn(NULL_BUCKETS, dim, generator=g), dim=1)
        self.table = table.to(device)
        self.mix = torch.randint(1, 2**31 - 1, (1 << 16,), generator=g).to(device)

    def __call__(self, features: dict[str, Any], **_: Any) -> dict[str, Any]:
        # (sentence-transformers passes forward keyword arguments such as task="query".)
        ids = features["input_ids"]  # (batch, length), padded with 0-mask positions
        mask = features["attention_mask"]
        mixed = (ids * mask * self.mix[: ids.shape[1]]).sum(dim=1)  # (batch,)
        return {**features, "sentence_embedding": self.table[mixed.remainder(NULL_BUCKETS)]}


def nullify(loaded: LoadedModel, dim: int | None = None) -> None:
    """Replace the model's forward by NullForward (of width ``dim``, default the model's own:
    `bench scale` asks for a BERT-base width with MiniLM's tokenizer); rename it so its results
    and cache entries can never pass for the real model's."""
    model: Any = loaded.model
    with stage("forward"):  # building the null model is the stand-in forward's own cost
        model.forward = NullForward(dim or model.get_sentence_embedding_dimension(), model.device)
    loaded.name = "neobench/null-encoder"
    # Another width is another model: its cache entries must not meet the default width's.
    loaded.revision = f"null{'' if dim is None else dim}-{loaded.revision}"


@dataclass
class HostRun:
    """One null-model evaluation: its stages and counts."""

    cache: str  # off | cold | warm
    wall: float
    tokens: int  # tokens that went through the tokenizer
    texts_requested: int
    texts_encoded: int
    seconds: dict[str, float]  # exclusive main-thread seconds per stage
    busy: dict[str, float]  # worker-thread busy seconds per stage
    tasks: list[dict[str, Any]] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)  # the main thread's CPU s per stage
    model_config: Any = None  # the real model's transformers config (for its forward ceiling)
    startup: float = 0.0  # per process, before the runs: imports and mteb's benchmark registry
    warmup: float = 0.0  # per process, after start-up: the untimed null-model run (0: skipped)
    token_budget: int | None = None  # padded tokens per forward batch

    @property
    def label(self) -> str:
        return "stock mteb" if self.cache == "stock" else f"cache {self.cache}"

    @property
    def tokenize(self) -> float:
        """The tokenizer's own seconds, wherever it ran (inline or in workers)."""
        return self.seconds.get("tokenize", 0.0) + self.busy.get("tokenize", 0.0)

    @property
    def other_host(self) -> float:
        """Main-thread wall seconds outside tokenising (or waiting for it), forward, scoring."""
        return self.wall - sum(self.seconds.get(s, 0.0) for s in NOT_HOST)

    @property
    def other_host_cpu(self) -> float:
        """other_host as the main thread's CPU seconds (its wall seconds less the time it
        waited for a core that other threads and processes held)."""
        return sum(self.cpu.values()) - sum(self.cpu.get(s, 0.0) for s in NOT_HOST)

    @property
    def in_encoder(self) -> float:
        """other_host's seconds inside the encoder (ENCODER_STAGES)."""
        return sum(self.seconds.get(s, 0.0) for s in ENCODER_STAGES)

    def summary(self) -> dict[str, Any]:
        seconds = {k: round(v, 4) for k, v in sorted(self.seconds.items())}
        seconds |= {
            "tokenize": round(self.tokenize, 4),
            "scoring": round(self.seconds.get("scoring", 0.0), 4),
            "forward": round(self.seconds.get("forward", 0.0), 4),
            "other_host": round(self.other_host, 4),
            "total": round(self.wall, 4),
        }
        return {
            "cache": self.cache,
            "token_budget": self.token_budget,
            "startup_seconds": round(self.startup, 4),
            "warmup_seconds": round(self.warmup, 4),
            "tokens": self.tokens,
            "texts_requested": self.texts_requested,
            "texts_encoded": self.texts_encoded,
            "seconds": seconds,
            "worker_busy_seconds": {k: round(v, 4) for k, v in sorted(self.busy.items())},
            "main_thread_cpu_seconds": {
                **{k: round(v, 4) for k, v in sorted(self.cpu.items())},
                "other_host": round(self.other_host_cpu, 4),
                "total": round(sum(self.cpu.values()), 4),
            },
            "other_host_split": {
                "in_encoder": round(self.in_encoder, 4),
                "around_encoder": round(self.other_host - self.in_encoder, 4),
            },
            "tasks": self.tasks,
        }


def timed_null_eval(
    cfg: Any, hook: Callable[[LoadedModel], None], label: str
) -> tuple[Any, float, StageClock]:
    """run_eval(cfg) under a stage clock, ``hook`` nulling the model's forward; (summary, wall
    seconds, clock). A failed task fails the benchmark: its seconds would mean nothing."""
    from neobench.core.errors import RunFailed
    from neobench.evaluation.runner import run_eval

    clock = StageClock()
    with clock.running():
        start = time.perf_counter()
        with clock.stage("other"):
            summary = run_eval(cfg, model_hook=hook)
        wall = time.perf_counter() - start
    if summary.failed:
        failed = "; ".join(f"{o.task}: {o.error}" for o in summary.failed)
        raise RunFailed(f"{label}: the null-model evaluation failed ({failed}).")
    return summary, wall, clock


def run_null_eval(cmd: HostConfig, cache: str, folder: Path) -> HostRun:
    """run_eval on the tasks with the null encoder, in ``folder`` (results/, cache/)."""
    cfg = _eval_config(cmd, folder / f"results-{cache}", no_cache=cache == "off")
    configs: list[Any] = []

    def hook(loaded: LoadedModel) -> None:
        configs.append(loaded.model[0].auto_model.config)  # type: ignore[index]
        nullify(loaded)

    summary, wall, clock = timed_null_eval(cfg, hook, "host benchmark")
    return HostRun(
        cache=cache,
        wall=wall,
        tokens=summary.tokens_encoded,
        texts_requested=summary.texts_requested,
        texts_encoded=summary.texts_encoded,
        seconds=dict(clock.seconds),
        cpu=dict(clock.cpu_seconds),
        model_config=configs[0] if configs else None,
        token_budget=cfg.token_budget,
        busy=dict(clock.busy_seconds),
        tasks=[
            {"task": o.task, "type": o.type, "seconds": o.seconds, "main_score": o.main_score}
            for o in summary.outcomes
        ],
    )


def run_stock(cmd: HostConfig, folder: Path) -> HostRun:
    """The same tasks through stock ``mteb.evaluate`` and ``SentenceTransformer.encode`` (the
    model's forward nulled the same way, the same prompts): the host path neobench replaces."""
    import warnings

    import mteb

    from neobench.core.stages import mteb_call
    from neobench.evaluation.checks import prepare_tasks
    from neobench.models.load import load_model, parse_max_seq_length
    from neobench.protocol.instructions import mteb_prompts
    from neobench.protocol.mirror import locate

    cfg = _eval_config(cmd, folder / "results-stock", no_cache=True)
    clock = StageClock()
    with clock.running():
        start = time.perf_counter()
        with clock.stage("other"):
            with stage("setup"):
                inputs = prepare_tasks(cfg)
                tasks, profile = inputs.tasks, inputs.profile
                locate(tasks, cfg.data_dir, cfg.benchmark)
                loaded = load_model(
                    cfg.model, max_seq_length=parse_max_seq_length(cfg.max_seq_length)
                )
                config = loaded.model[0].auto_model.config  # type: ignore[index]
                nullify(loaded)
                model: Any = loaded.model
                model.prompts, _ = mteb_prompts(profile, tasks)
                preprocess = model.preprocess

                def timed_preprocess(*args: Any, **kwargs: Any) -> Any:
                    with stage("tokenize"):
                        return preprocess(*args, **kwargs)

                model.preprocess = timed_preprocess  # encode() calls it per batch
            results: list[Any] = []
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for task in tasks:  # one task a call: mteb times each from its own start
                    with mteb_call() as returned:
                        outcome = mteb.evaluate(
                            model,
                            [task],
                            cache=mteb.ResultCache(folder / "results-stock"),
                            encode_kwargs={
                                "batch_size": cfg.batch_size,
                                "show_progress_bar": False,
                            },
                            show_progress_bar=False,
                        )
                        returned += outcome.task_results
                    results += outcome.task_results
        wall = time.perf_counter() - start
    return HostRun(
        cache="stock",
        wall=wall,
        tokens=0,
        texts_requested=0,
        texts_encoded=0,
        seconds=dict(clock.seconds),
        cpu=dict(clock.cpu_seconds),
        busy=dict(clock.busy_seconds),
        model_config=config,
        tasks=[
            {"task": r.task_name, "seconds": r.evaluation_time, "main_score": r.get_score()}
            for r in results
        ],
    )


def _eval_config(cmd: HostConfig, results: Path, no_cache: bool) -> Any:
    return EvalConfig(
        model=cmd.model or default_model(),
        tasks=list(cmd.tasks),
        benchmark=cmd.benchmark,
        data_dir=cmd.data_dir,
        results=str(results),
        cache_dir=str(results.parent / "cache"),
        no_cache=no_cache,
        device=cmd.device,
        instructions=cmd.instructions,
        max_seq_length=cmd.max_seq_length,
        tokenize_workers=cmd.tokenize_workers,
        token_budget=cmd.token_budget,
    )


def run_host_bench(cmd: HostConfig) -> list[HostRun]:
    """Every requested cache mode, in the order off, cold, warm (warm reads cold's cache), then
    stock mteb unless --no-stock."""
    modes = list(cmd.cache)
    unknown = [m for m in modes if m not in CACHE_MODES]
    if unknown:
        raise NeobenchError(
            f"--cache {','.join(unknown)}: unknown mode; choose from {', '.join(CACHE_MODES)}."
        )
    if "warm" in modes and "cold" not in modes:
        modes.append("cold")  # warm reads the cache a cold run filled
    startup = _start_up(cmd.benchmark, cmd.model or default_model())
    runs = []
    with tempfile.TemporaryDirectory(prefix="neobench-host-pipeline-") as tmp:
        warmup = 0.0
        if not cmd.no_warmup:
            # What a process pays once, at its first evaluation: lazy imports inside mteb,
            # datasets and sklearn, transformers' file lookups, torch's first dispatch of each
            # op. Paid here, untimed, so the first timed run (and stock, which runs last) does
            # not carry it; a full benchmark run pays it once in 56 tasks.
            warmup = run_null_eval(cmd, "off", Path(tmp) / "warm-up").wall
        for mode in (m for m in CACHE_MODES if m in modes):
            runs.append(run_null_eval(cmd, mode, Path(tmp)))
        runs = [r for r in runs if r.cache in cmd.cache]
        if not cmd.no_stock:
            runs.append(run_stock(cmd, Path(tmp)))
    for run in runs:
        run.startup, run.warmup = startup, warmup
    return runs


def _start_up(benchmark: str, model: str) -> float:
    """Once per process, before any timed run (so no run pays for being first): importing mteb,
    sentence-transformers and the model's architecture, and building mteb's benchmark registry.
    Returns the seconds it took."""
    start = time.perf_counter()
    import mteb  # noqa: F401
    import sentence_transformers  # noqa: F401  (imported by the first model load otherwise)
    import sklearn.linear_model  # noqa: F401  (mteb's classifier, imported at first use)

    from neobench.models.attention import backbone_class
    from neobench.protocol.tasks import load_benchmark

    load_benchmark(benchmark)
    if Path(model).is_dir():  # a hub id is located (downloaded) by the run itself
        # The architecture's module (transformers imports it at the first model of its kind).
        # A folder it cannot read this way is the run's to load and report on.
        with contextlib.suppress(ValueError, OSError):
            backbone_class(Path(model), trust_remote_code=False)
    return time.perf_counter() - start


# The output: the per-stage table, what it means for feeding an H100, the JSON record.

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
    (FLOPs per token: neobench/models/flops.py's text_flops, the one formula)."""
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


def to_json(runs: list[HostRun], cmd: HostConfig) -> str:
    """The figures as JSON: the first run's summary at the top (tokens, seconds, tasks), every
    run under ``runs``, and the settings."""
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
            "stock": not cmd.no_stock,
        },
        "environment": provenance.environment(),
    }
    return json.dumps(payload, indent=2, default=str) + "\n"


def parse_args(argv: list[str] | None = None) -> HostConfig:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n")[3],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    flags.add_fields(parser, HostConfig)
    return flags.config_from_args(HostConfig, parser.parse_args(argv))


def main(argv: list[str] | None = None) -> int:
    """The runs, the table on stdout, the figures to --json."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    silence_libraries(False)
    cfg = parse_args(argv)
    try:
        runs = run_host_bench(cfg)
    except NeobenchError as error:
        for problem in error.problems:
            print(f"error: {problem}", file=sys.stderr)
        return error.exit_code
    print(report(runs), flush=True)
    if cfg.json:
        write_text_atomic(Path(cfg.json), to_json(runs, cfg))
        print(f"wrote {cfg.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
