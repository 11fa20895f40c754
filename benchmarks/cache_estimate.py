"""What the embedding cache holds after a whole benchmark run, per policy: an estimate from mteb's
own descriptive statistics (distinct texts per task) and the bytes a row really takes.

The texts each policy stores come from the same decision the run takes
(neobench/evaluation/cache_use.py, neobench/protocol/cache_policy.py), task by task in the
benchmark's order under the standard instruction profile. A row's bytes are measured, not
assumed: ROWS random vectors of the width are stored in a fresh cache (same schema, page size
and indexes as a run's) and its database size, (page_count - freelist_count) x page_size, is
divided by ROWS.

    python benchmarks/cache_estimate.py --dim 768
    python benchmarks/cache_estimate.py --dim 384 --per-task
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from neobench.encoder.cache import EmbeddingCache
from neobench.evaluation.cache_use import CacheUse
from neobench.protocol.cache_policy import shared_texts, task_texts
from neobench.protocol.config import DEFAULT_BENCHMARK, standard
from neobench.protocol.instructions import load_profile, mteb_prompts
from neobench.protocol.tasks import load_benchmark

ROWS = 20_000  # rows stored to measure one row's bytes
BATCH = 1_000  # rows per transaction, as the encoder stores a call's new embeddings


@dataclass
class CacheEstimate:
    """Bytes on disk after a whole run of ``benchmark`` at ``dim`` dimensions, per policy."""

    benchmark: str
    dim: int
    row_bytes: float  # measured: the database's bytes per stored row
    texts: dict[str, int | None] = field(default_factory=dict)  # task -> distinct texts
    stored: dict[str, dict[str, int]] = field(default_factory=dict)  # policy -> task -> texts

    def total_texts(self, policy: str) -> int:
        return sum(self.stored[policy].values())

    def gigabytes(self, policy: str) -> float:
        return self.total_texts(policy) * self.row_bytes / 1e9

    @property
    def unknown(self) -> list[str]:
        """Tasks without statistics (counted as 0 texts: the estimate is short by them)."""
        return [name for name, n in self.texts.items() if n is None]


def row_bytes(dim: int, rows: int = ROWS) -> float:
    """The database bytes per row of a cache holding ``rows`` random ``dim``-wide vectors."""
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="neobench-rowbytes-") as folder:
        cache = EmbeddingCache(Path(folder) / "embeddings.sqlite", read_from=[])
        for start in range(0, rows, BATCH):
            n = min(BATCH, rows - start)
            keys = [rng.bytes(32) for _ in range(n)]  # sha256 keys: 32 random-looking bytes
            cache.put(keys, rng.standard_normal((n, dim)).astype(np.float32))
        held = cache.held_bytes() or 0
        cache.close()
    return held / rows


def estimate(benchmark: str = DEFAULT_BENCHMARK, dim: int = 768) -> CacheEstimate:
    """Stored texts per task under each policy for a whole run of ``benchmark`` (one process,
    its tasks in the benchmark's order), and the measured bytes of a ``dim``-wide row."""
    tasks = list(load_benchmark(benchmark).tasks)
    prompts, _ = mteb_prompts(load_profile(standard().instructions), tasks)
    out = CacheEstimate(benchmark, dim, row_bytes(dim))
    out.texts = {t.metadata.name: task_texts(t) for t in tasks}
    names = list(out.texts)
    # `all` stores every distinct text once: a partner's shared side is read, not stored again.
    read_again = _shared_reads(tasks)
    out.stored["all"] = {n: max(0, (out.texts[n] or 0) - read_again.get(n, 0)) for n in names}
    use = CacheUse("reusable", None, prompts, dict(zip(names, tasks, strict=True)))
    out.stored["reusable"] = {
        name: out.texts[name] or 0
        for i, (name, task) in enumerate(zip(names, tasks, strict=True))
        if use.decide(task, names[i + 1 :]).store
    }
    out.stored["off"] = {}
    return out


def _shared_reads(tasks: list) -> dict[str, int]:
    """Texts a later task of a shared_texts.yaml group finds stored by an earlier one: the
    smaller of the two sides' distinct texts (document side: the corpus)."""
    order = [t.metadata.name for t in tasks]
    by_name = dict(zip(order, tasks, strict=True))
    reads: dict[str, int] = {}
    for entry in shared_texts():
        members = [n for n in order if n in entry.tasks]
        if len(members) < 2:
            continue
        sizes = {n: _side_texts(by_name[n], entry.side) for n in members}
        for later in members[1:]:
            reads[later] = min(sizes[members[0]], sizes[later])
    return reads


def _side_texts(task: object, side: str) -> int:
    """Distinct texts of one side (``document`` or ``query``) by the statistics."""
    key = "documents_text_statistics" if side == "document" else "queries_text_statistics"
    stats = task.metadata.descriptive_stats or {}
    return sum(
        int(((stats.get(split) or {}).get(key) or {}).get("unique_texts") or 0)
        for split in task.eval_splits
    )


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
