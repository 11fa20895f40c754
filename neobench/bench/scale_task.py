"""The synthetic retrieval task `neobench bench scale` evaluates, and how run_eval finds it.

``ScaleRetrieval`` is a plain mteb retrieval task (mteb's own loader, evaluator and metrics) with
its own metadata: its dataset is a folder shaped like a hub repo, ``<mirror>/neobench/scale-
retrieval/``, that neobench/bench/scale_data.py writes for each corpus size. run_eval reaches
tasks only through a benchmark name, so ``registered()`` adds a one-task benchmark to mteb's
benchmark registry for the duration of a rehearsal (in the rehearsal's own process): the eval
path itself (checks, mirror, adapter, encoder, cache, staged writes) is used unchanged, and no
real task or benchmark is touched.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.task_metadata import TaskMetadata

from neobench.core.errors import NeobenchError

TASK_NAME = "NeobenchScaleRetrieval"
BENCHMARK_NAME = "neobench scale rehearsal"
REPO_ID = "neobench/scale-retrieval"  # the folder under the generated mirror
SPLIT = "test"


class ScaleRetrieval(AbsTaskRetrieval):
    """Documents recombined from real corpora's sentences, real queries, seeded qrels."""

    metadata = TaskMetadata(
        name=TASK_NAME,
        description=(
            "A corpus of chosen size whose documents are recombined, seeded, from the sentences "
            "of the offline mirror's retrieval corpora; real queries; seeded relevance. For "
            "measuring what an evaluation costs as the corpus grows, not for scores."
        ),
        reference="https://github.com/embeddings-benchmark/mteb",
        # A local folder: datasets reads it as it is; the revision is recorded, never resolved.
        dataset={"path": REPO_ID, "revision": "generated"},
        type="Retrieval",
        category="t2t",
        modalities=["text"],
        eval_splits=[SPLIT],
        eval_langs=["eng-Latn"],
        main_score="ndcg_at_10",
        date=("2026-01-01", "2026-01-01"),
        domains=[],
        task_subtypes=[],
        license="not specified",
        annotations_creators="derived",
        dialect=[],
        sample_creation="created",
        bibtex_citation="",
    )


@contextlib.contextmanager
def registered() -> Iterator[None]:
    """mteb.get_benchmark(BENCHMARK_NAME) returns a benchmark of ScaleRetrieval while inside.

    mteb 2.x builds its benchmark registry once (a cached dict of the module's Benchmark
    objects) and offers no public way to add one, so the entry is put into that dict and taken
    out again afterwards.
    """
    import importlib

    from mteb.benchmarks.benchmark import Benchmark

    module = importlib.import_module("mteb.benchmarks.get_benchmark")
    build: Any = getattr(module, "_build_registry", None)
    if build is None:
        raise NeobenchError(
            "bench scale: this mteb version has no benchmark registry to add the synthetic task "
            "to (mteb.benchmarks.get_benchmark._build_registry). Use the mteb version pinned in "
            "pyproject.toml."
        )
    registry = build()
    registry[BENCHMARK_NAME] = Benchmark(
        name=BENCHMARK_NAME, tasks=[ScaleRetrieval()], description=ScaleRetrieval.__doc__
    )
    try:
        yield
    finally:
        registry.pop(BENCHMARK_NAME, None)
