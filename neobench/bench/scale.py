"""`neobench bench scale`: what `neobench eval` costs as a retrieval corpus grows.

Every figure of `bench host` comes from the mirror's small tasks; a real MTEB(eng, v1) run spends
most of its texts on six corpora of 2.7 to 8.8 million documents. For each size in ``--sizes``
this writes a synthetic retrieval task of real text (neobench/bench/scale_data.py) and evaluates
it through run_eval with the null forward pass of `bench host` at a BERT-base width, in a fresh
process per size (neobench/bench/scale_run.py), so each size's peak resident memory is its own.
Per size: seconds by stage, tokens, throughput, peak memory, and what lands on disk (embedding
cache, datasets' arrow cache, result JSON, units). From the sizes: each figure's scaling exponent
and the cost of a whole benchmark run (neobench/bench/scale_fit.py). The table and the JSON are
neobench/bench/scale_report.py. Everything is written under one temporary folder, each size's
part removed before the next size starts, the folder removed at the end.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neobench.bench.config import BenchScaleCommand
from neobench.bench.encode import default_model
from neobench.core.errors import NeobenchError, RunFailed

CACHE_CHOICES = ("on", "off")
SUFFIXES = {"": 1, "k": 1_000, "m": 1_000_000}
LOG_TAIL = 20  # lines of a failed size's log shown in the error


@dataclass
class ScaleBench:
    """The sizes' figures in ascending order, the text pool's sizes, the start-up seconds."""

    runs: list[dict[str, Any]]
    pool: dict[str, Any]
    cores: int
    seconds: float  # the whole command, generation and start-ups included
    exponents: dict[str, Any] = field(default_factory=dict)  # scale_fit.exponents
    extrapolation: dict[str, Any] = field(default_factory=dict)  # scale_fit.extrapolate


def parse_sizes(values: list[str]) -> list[int]:
    """'500k', '1M', '2000000' -> documents, ascending; every bad value reported at once."""
    problems, sizes = [], []
    for value in values:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*", str(value))
        size = round(float(match[1]) * SUFFIXES[match[2].lower()]) if match else 0
        if size < 1:
            problems.append(
                f"--sizes {value}: not a positive number of documents; give e.g. "
                "--sizes 50000,100000,200000 (or 50k,100k,200k)."
            )
        sizes.append(size)
    if not values:
        problems.append("--sizes is empty; give at least two corpus sizes, e.g. 50k,100k.")
    elif not problems and len(set(sizes)) < 2:
        problems.append(
            f"--sizes {','.join(map(str, values))}: give at least two different sizes; the "
            "scaling exponents are fitted across them."
        )
    if problems:
        raise NeobenchError(problems)
    return sorted(set(sizes))


def check_command(cmd: BenchScaleCommand) -> list[int]:
    """Every cheap problem of the command at once; the sizes, ascending."""
    problems: list[str] = []
    try:
        sizes = parse_sizes(cmd.sizes)
    except NeobenchError as error:
        problems += error.problems
        sizes = []
    if cmd.queries < 1:
        problems.append(f"--queries {cmd.queries}: must be a positive number of queries.")
    if cmd.dim < 1:
        problems.append(f"--dim {cmd.dim}: must be a positive embedding width, e.g. 768.")
    if cmd.cache not in CACHE_CHOICES:
        problems.append(f"--cache {cmd.cache}: choose on or off.")
    if not cmd.corpus_tasks:
        problems.append("--corpus-tasks is empty; name retrieval tasks, e.g. SciFact,ArguAna.")
    if not cmd.query_tasks:
        problems.append("--query-tasks is empty; name tasks, e.g. SciFact,Banking77Classification.")
    if problems:
        raise NeobenchError(problems)
    return sizes


def source_tasks(cmd: BenchScaleCommand) -> list[Any]:
    """The corpus and query tasks of the benchmark, reading from the mirror (or the hub)."""
    from neobench.protocol import mirror
    from neobench.protocol.tasks import load_benchmark, select_tasks

    names = list(dict.fromkeys([*cmd.corpus_tasks, *cmd.query_tasks]))
    tasks = [copy.deepcopy(t) for t in select_tasks(load_benchmark(cmd.benchmark), names)]
    data_dir = mirror.resolve_data_dir(cmd.data_dir)
    if data_dir is not None:
        mirror.point_tasks_at_mirror(tasks, data_dir, cmd.benchmark)
    else:
        mirror.check_hub_access(tasks, cmd.benchmark)
    return tasks


def run_scale_bench(
    cmd: BenchScaleCommand, progress: Callable[[str], None] | None = None
) -> ScaleBench:
    """Each size generated, evaluated in its own process and measured, smallest first."""
    from neobench.bench import scale_fit
    from neobench.bench.scale_data import check_size, load_pool
    from neobench.protocol.tasks import load_benchmark

    tell = progress or (lambda _: None)
    start = time.perf_counter()
    sizes = check_command(cmd)
    pool = load_pool(source_tasks(cmd), cmd.corpus_tasks, cmd.query_tasks)
    check_size(pool, sizes[-1], cmd.queries)
    tell(
        f"text pool: {len(pool.sentences):,} sentences of {', '.join(pool.corpus_tasks)}; "
        f"{len(pool.queries):,} queries of {', '.join(pool.query_tasks)}"
    )
    runs = []
    work = Path(cmd.work_dir).expanduser() if cmd.work_dir else None
    if work is not None:
        work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="neobench-bench-scale-", dir=work) as tmp:
        for size in sizes:
            runs.append(_run_size(cmd, pool, size, Path(tmp) / f"size-{size}", tell))
            if cmd.json:
                _keep_partial(Path(cmd.json), runs)
    bench = ScaleBench(
        runs=runs,
        pool={
            "sentences": len(pool.sentences),
            "queries": len(pool.queries),
            "corpus_tasks": pool.corpus_tasks,
            "query_tasks": pool.query_tasks,
        },
        cores=len(os.sched_getaffinity(0)),
        seconds=time.perf_counter() - start,
    )
    bench.exponents = scale_fit.exponents(runs)
    bench.extrapolation = scale_fit.extrapolate(
        bench, load_benchmark(cmd.benchmark).tasks, bench.exponents
    )
    return bench


def partial_path(json_path: Path) -> Path:
    """Where the sizes measured so far are kept while a run goes on (a run of several sizes
    takes hours: one stopped or killed keeps what it measured)."""
    return json_path.with_name(json_path.name + ".partial")


def _keep_partial(json_path: Path, runs: list[dict[str, Any]]) -> None:
    from neobench.core.card_io import write_text_atomic

    body = {"partial": True, "sizes_done": [r["documents"] for r in runs], "runs": runs}
    write_text_atomic(partial_path(json_path), json.dumps(body, indent=1) + "\n")


def _run_size(
    cmd: BenchScaleCommand, pool: Any, size: int, folder: Path, tell: Callable[[str], None]
) -> dict[str, Any]:
    """Generate, evaluate in a child process, measure the folders; then remove them."""
    from neobench.bench.scale_data import write_task

    start = time.perf_counter()
    generated = write_task(folder / "mirror", pool, size, cmd.queries, cmd.seed)
    generation = time.perf_counter() - start
    tell(f"{size:,} documents: written in {generation:.1f} s; evaluating")
    spec = {
        "model": cmd.model or default_model(),
        "mirror": str(folder / "mirror"),
        "results": str(folder / "results"),
        "cache_dir": str(folder / "cache"),
        "no_cache": cmd.cache == "off",
        "device": cmd.device,
        "max_seq_length": cmd.max_seq_length,
        "token_budget": cmd.token_budget,
        "dim": cmd.dim,
        "out": str(folder / "figures.json"),
    }
    (folder / "spec.json").write_text(json.dumps(spec, indent=2))
    start = time.perf_counter()
    maxrss = _spawn(folder, size)
    process = time.perf_counter() - start
    figures = json.loads((folder / "figures.json").read_text())
    figures |= {
        "documents": generated.documents,
        "queries": generated.queries,
        "document_chars": generated.document_chars,
        "query_chars": generated.query_chars,
        "generated_bytes": generated.bytes,
        "generation_seconds": round(generation, 3),
        "process_seconds": round(process, 3),
        "peak_rss_bytes": maxrss,
        "cache_bytes": folder_bytes(folder / "cache"),
        "datasets_cache_bytes": folder_bytes(folder / "datasets-cache"),
    }
    shutil.rmtree(folder)
    seconds = figures["seconds"]["total"]
    tell(
        f"{size:,} documents: {seconds:.1f} s, {figures['tokens'] / seconds / 1e6:.2f}M tokens/s, "
        f"peak {maxrss / 2**30:.2f} GiB"
    )
    return figures


def _spawn(folder: Path, size: int) -> int:
    """Run one size's process; its peak resident bytes (the kernel's ru_maxrss for it)."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        # datasets converts the parquet files to arrow here: part of the run's disk, and removed.
        "HF_DATASETS_CACHE": str(folder / "datasets-cache"),
    }
    log = folder / "log.txt"
    with log.open("wb") as sink:
        child = subprocess.Popen(
            [sys.executable, "-m", "neobench.bench.scale_run", str(folder / "spec.json")],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )
        try:
            _, status, usage = os.wait4(child.pid, 0)
        except BaseException:
            child.kill()
            child.wait()
            raise
        child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-LOG_TAIL:]
        raise RunFailed(
            [
                f"bench scale: the evaluation of {size:,} documents failed (exit code "
                f"{child.returncode}); the last lines of its log:",
                *tail,
                "Too little memory or disk for this size? Try smaller --sizes or --work-dir on "
                "a larger disk.",
            ]
        )
    return int(usage.ru_maxrss) * 1024  # KiB on Linux


def folder_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (0 when it does not exist)."""
    if not path.exists():
        return 0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
