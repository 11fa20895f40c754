"""The embedding cache's size after a whole benchmark run, per cache policy: distinct texts from
mteb's descriptive statistics, bytes per row measured on a real cache file
(neobench/bench/cache_estimate.py).

    python benchmarks/cache_estimate.py --dim 768
    python benchmarks/cache_estimate.py --dim 384 --per-task
"""

from __future__ import annotations

import argparse

from neobench.bench.cache_estimate import estimate
from neobench.protocol.config import DEFAULT_BENCHMARK


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmark", default=DEFAULT_BENCHMARK)
    parser.add_argument("--dim", type=int, default=768, help="embedding width")
    parser.add_argument("--per-task", action="store_true", help="also each task's texts")
    args = parser.parse_args()
    est = estimate(args.benchmark, args.dim)
    print(f"{est.benchmark}, {est.dim} dims: {est.row_bytes:,.0f} bytes per stored row")
    for policy in ("all", "reusable", "off"):
        print(
            f"  {policy:9s} {est.total_texts(policy):>12,} texts  {est.gigabytes(policy):8.1f} GB"
            f"  ({len(est.stored[policy])} tasks store)"
        )
    ratio = est.gigabytes("reusable") / est.gigabytes("all")
    print(f"  reusable / all = {ratio:.3f}")
    if est.unknown:
        print(f"  without statistics (counted as 0): {', '.join(est.unknown)}")
    if args.per_task:
        for name, texts in est.texts.items():
            kept = "stored" if name in est.stored["reusable"] else "-"
            print(f"    {name:42s} {texts or 0:>10,}  {kept}")


if __name__ == "__main__":
    main()
