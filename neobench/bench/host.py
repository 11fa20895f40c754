"""`neobench bench host`: what the host costs per token around a forward pass that costs nothing.

`neobench eval`'s own code path (run_eval: mteb.evaluate, the adapter, the encoder, the embedding
cache, the staged result writes) runs on real tasks with a *null encoder*: the real model's
tokenizer and settings, but a forward pass replaced by a lookup that returns an embedding of the
real shape, dtype and device at once. What is left of the wall time is the host's share, which
on a GPU decides how fast the GPU can be fed. The stage clock (neobench/core/stages.py) splits it.

The table and JSON it prints are neobench/bench/host_report.py.

Cache modes: ``off`` (no cache), ``cold`` (an empty cache: every text looked up, encoded and
inserted) and ``warm`` (the cache the cold run filled: every text found, nothing tokenised).
Everything is written to a temporary folder that is removed afterwards.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from neobench.bench.encode import default_model
from neobench.core.stages import StageClock, stage

if TYPE_CHECKING:
    from neobench.bench.config import BenchHostCommand
    from neobench.models.load import LoadedModel

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


def run_null_eval(cmd: BenchHostCommand, cache: str, folder: Path) -> HostRun:
    """run_eval on the tasks with the null encoder, in ``folder`` (results/, cache/)."""
    cfg = _eval_config(cmd, folder / f"results-{cache}", no_cache=cache == "off")
    configs: list[Any] = []

    def hook(loaded: LoadedModel) -> None:
        configs.append(loaded.model[0].auto_model.config)  # type: ignore[index]
        nullify(loaded)

    summary, wall, clock = timed_null_eval(cfg, hook, "bench host")
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


def run_stock(cmd: BenchHostCommand, folder: Path) -> HostRun:
    """The same tasks through stock ``mteb.evaluate`` and ``SentenceTransformer.encode`` (the
    model's forward nulled the same way, the same prompts): the host path neobench replaces."""
    import warnings

    import mteb

    from neobench.core.stages import mteb_timing
    from neobench.evaluation.checks import locate_data, prepare_tasks
    from neobench.models.load import load_model, parse_max_seq_length
    from neobench.protocol.instructions import mteb_prompts

    cfg = _eval_config(cmd, folder / "results-stock", no_cache=True)
    clock = StageClock()
    with clock.running():
        start = time.perf_counter()
        with clock.stage("other"):
            with stage("setup"):
                tasks, profile = prepare_tasks(cfg)
                locate_data(cfg, tasks)
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
            with warnings.catch_warnings(), mteb_timing():
                warnings.simplefilter("ignore")
                outcome = mteb.evaluate(
                    model,
                    tasks,
                    cache=mteb.ResultCache(folder / "results-stock"),
                    encode_kwargs={"batch_size": cfg.batch_size, "show_progress_bar": False},
                    show_progress_bar=False,
                )
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
            for r in outcome.task_results
        ],
    )


def _eval_config(cmd: BenchHostCommand, results: Path, no_cache: bool) -> Any:
    from neobench.protocol.config import EvalConfig

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


def run_host_bench(cmd: BenchHostCommand) -> list[HostRun]:
    """Every requested cache mode, in the order off, cold, warm (warm reads cold's cache), then
    stock mteb when asked."""
    from neobench.core.errors import NeobenchError

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
    with tempfile.TemporaryDirectory(prefix="neobench-bench-host-") as tmp:
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
        if cmd.stock:
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
