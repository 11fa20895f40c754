"""Tokenisation throughput with 1, 2, ... tokenizer processes: the encoder's own feeder
(neobench/encoder/feed.py) run to the end with no forward pass, on the texts of the tasks of
benchmarks/host_pipeline.py, 8,192-text chunks as in an evaluation.

For each worker count it prints wall tokens/s, and the CPU seconds per million tokens of the
workers (the tokenizer itself) and of this process (the feeder: joining, sorting, padding;
and the consumer), which do not depend on how busy the machine is. The N-core model in
docs/performance.md is built from those two: tokens/s(N) ~ 1 / (serial + tokenize / N).

    python benchmarks/tokenize_workers.py --data-dir ../shared/data/hub --workers 1,2
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import psutil

from neobench.bench.gpu import default_model, task_texts
from neobench.encoder.encode import TOKENIZE_CHUNK
from neobench.encoder.feed import ChunkEnd, feed
from neobench.encoder.tokenpool import TokenizePool, cores
from neobench.models.load import load_model
from neobench.protocol.config import DEFAULT_BENCHMARK

sys.path.insert(0, str(Path(__file__).resolve().parent))  # host_pipeline.py, beside this script
from host_pipeline import HOST_BENCH_TASKS


def cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def measure(model: object, texts: list[str], workers: int) -> dict[str, float]:
    pieces = [texts[i : i + TOKENIZE_CHUNK] for i in range(0, len(texts), TOKENIZE_CHUNK)]
    pool = TokenizePool(model, workers) if workers > 1 else None
    children = [psutil.Process(p.pid) for p in pool.processes] if pool else []
    me = psutil.Process()
    start_cpu = cpu(me), sum(cpu(c) for c in children)
    start = time.perf_counter()
    tokens = sum(
        i.tokens for i in feed(model, pieces, None, 32_768, pool) if isinstance(i, ChunkEnd)
    )
    wall = time.perf_counter() - start
    own, theirs = cpu(me) - start_cpu[0], sum(cpu(c) for c in children) - start_cpu[1]
    if pool:
        pool.close()
    return {"tokens": tokens, "wall": wall, "own_cpu": own, "workers_cpu": theirs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    parser.add_argument("--max-texts", type=int, default=60_000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    texts = task_texts(HOST_BENCH_TASKS, DEFAULT_BENCHMARK, args.data_dir, args.max_texts)
    model = load_model(default_model(), max_seq_length=512, device="cpu").model
    counts = [int(n) for n in args.workers.split(",")]
    print(f"{len(texts):,} texts, {cores()} cores, load average {os.getloadavg()[0]:.1f}")
    for _ in range(args.repeats):  # alternating, so the machine's load hits every count alike
        for n in counts:
            r = measure(model, texts, n)
            m = r["tokens"] / 1e6
            print(
                f"workers {n}: {r['tokens'] / r['wall'] / 1e6:.3f}M tokens/s wall; CPU s per "
                f"M tokens: this process {r['own_cpu'] / m:.2f}, workers {r['workers_cpu'] / m:.2f}"
            )


if __name__ == "__main__":
    main()
