"""Encoding throughput: stock SentenceTransformer.encode vs neobench's encoder, same real texts.

The texts are the SciFact corpus and queries and the STSBenchmark sentences (unique), read through
the offline mirror; both encoders run in one process, alternating, best of N each, cache off.

    python benchmarks/encode_throughput.py --data-dir ../shared/data/hub
    python benchmarks/encode_throughput.py --device cuda --dtypes float16,bfloat16 --max-texts 20000

Each dtype is one comparison (stock and neobench under the same autocast). On CUDA the neobench
rows also give the fraction of the GPU's dense peak FLOP/s for that dtype.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from neobench.bench import encode as bench
from neobench.protocol import config


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", help="default: the packaged all-MiniLM-L6-v2")
    parser.add_argument(
        "--data-dir", default=str(Path(__file__).resolve().parents[2] / "shared/data/hub")
    )
    parser.add_argument("--tasks", default="SciFact,STSBenchmark")
    parser.add_argument("--max-texts", type=int, default=4000)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--dtypes", default="auto", help="comma list: auto,float32,float16,bfloat16"
    )
    parser.add_argument("--unpadded", default="auto", help="auto (CUDA) | on | off")
    parser.add_argument("--max-seq-length", type=int, default=config.standard().max_seq_length)
    args = parser.parse_args()
    tasks = args.tasks.split(",")
    texts = bench.task_texts(tasks, config.DEFAULT_BENCHMARK, args.data_dir, args.max_texts)
    for dtype in args.dtypes.split(","):
        result = bench.compare(
            args.model or bench.default_model(),
            texts,
            device=args.device,
            repeats=args.repeats,
            dtype=dtype,
            unpadded=args.unpadded,
            max_seq_length=args.max_seq_length,
        )
        print(bench.report(result.rates, bench.describe_device(args.device, dtype, result.packed)))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
