"""What `neobench eval` costs as a retrieval corpus grows, and what a whole run would cost.

Every figure of benchmarks/host_pipeline.py comes from the mirror's small tasks; a real
MTEB(eng, v1) run spends most of its texts on six corpora of 2.7 to 8.8 million documents. For
each size in --sizes this writes a synthetic retrieval task of real text (documents recombined
from the mirror's retrieval corpora, real queries, seeded relevance) and evaluates it through
run_eval (`neobench eval`'s own path) with the null forward pass of host_pipeline.py at a
BERT-base width (768) and MiniLM's tokenizer, in a fresh process per size, so each size's peak
resident memory is its own. Per size: seconds by stage, tokens, throughput, peak memory, and what
lands on disk (embedding cache, datasets' arrow cache, result JSON, units). From the sizes: each
figure's scaling exponent, and the cost of one model's run of MTEB(eng, v1) from mteb's task
statistics. Everything is written under one temporary folder, each size's part removed before the
next size starts, the folder removed at the end.

    python benchmarks/scale_rehearsal.py --data-dir ../shared/data/hub --json scale.json
    python benchmarks/scale_rehearsal.py --data-dir DIR --sizes 50k,100k,200k --cache off
    python benchmarks/scale_rehearsal.py --data-dir DIR --work-dir /scratch/me --device cuda

The default sizes (0.25, 0.5, 1 and 2 million documents) need about 5 KB of disk per document of
the largest size at --dim 768 (embedding cache, parquet, datasets' arrow copy); --help lists every
flag. The script reads top to bottom: its flags, the run, one size in its own process, the
synthetic task, its corpora, the fits and the extrapolation, the output.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import logging
import math
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.task_metadata import TaskMetadata

from neobench.bench.gpu import default_model
from neobench.cli import flags
from neobench.cli.progress import silence_libraries
from neobench.core import provenance
from neobench.core.card_io import write_text_atomic
from neobench.core.errors import NeobenchError, RunFailed
from neobench.evaluation.adapter import CORPUS_CHUNK
from neobench.protocol.config import DEFAULT_BENCHMARK, TOKEN_BUDGET, EvalConfig, like, opt
from neobench.protocol.instructions import expand
from neobench.protocol.mirror import locate
from neobench.protocol.tasks import load_benchmark, select_tasks

# The null forward pass and the timed evaluation are host_pipeline.py's, beside this script (on
# the path already when it runs as a script; not when a test imports it from its file).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from host_pipeline import STAGE_ORDER, HostRun, nullify, timed_null_eval

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask


# Documents per synthetic corpus. The six large corpora of MTEB(eng, v1) hold 2.7 (NQ) to 8.8
# (MSMARCO) million documents; every size here holds at least one search chunk (200,000
# documents, neobench/evaluation/adapter.py), so memory is measured as it behaves at full size, and
# the four take about half the time of 0.5-4 million (docs/performance.md).
SIZES = ["250000", "500000", "1000000", "2000000"]


@dataclass(kw_only=True)
class ScaleConfig:
    """The rehearsal's flags: one field each, with its default and the help --help gives it
    (neobench's own flag builder, neobench/cli/flags.py)."""

    sizes: list[str] = opt(
        SIZES,
        "comma-separated corpus sizes in documents (k and M allowed: 500k,1M)",
        csv=True,
    )
    queries: int = opt(7000, "real queries per corpus (MSMARCO's dev set has 6,980)")
    dim: int = opt(768, "width of the null embeddings (768: BERT-base)")
    cache: str = opt(
        "on",
        "embedding cache: on (an empty one per size, every text stored: --cache-policy all) | off",
    )
    model: str | None = opt(
        None, "model whose tokenizer and settings are used (default: the packaged MiniLM)"
    )
    corpus_tasks: list[str] = opt(
        ["SciFact", "ArguAna"],
        "retrieval tasks whose corpora's sentences make the documents",
        csv=True,
    )
    query_tasks: list[str] = opt(
        ["SciFact", "ArguAna", "Banking77Classification"],
        "tasks whose texts are the queries (a retrieval task's queries, another's texts)",
        csv=True,
    )
    benchmark: str = opt(
        DEFAULT_BENCHMARK, "mteb benchmark the source tasks belong to and that is extrapolated to"
    )
    data_dir: str | None = like(EvalConfig, "data_dir")
    device: str = like(EvalConfig, "device")
    max_seq_length: int | str = like(EvalConfig, "max_seq_length")
    token_budget: int = opt(
        TOKEN_BUDGET["cuda"],
        "padded tokens per forward batch (default: the CUDA default, the batches whose host "
        "cost a GPU waits on)",
    )
    seed: int = opt(0, "seed of the documents, the queries drawn and the relevance")
    work_dir: str | None = opt(
        None,
        "folder for the corpora, caches and results, removed afterwards (default: the system's "
        "temporary folder; the largest size needs about 5 KB per document at --dim 768)",
        metavar="DIR",
    )
    json: str | None = opt(None, "also write the figures to this JSON file", metavar="FILE")


# The run: each size generated, evaluated in its own process and measured, smallest first.

CACHE_CHOICES = ("on", "off")
SUFFIXES = {"": 1, "k": 1_000, "m": 1_000_000}
LOG_TAIL = 20  # lines of a failed size's log shown in the error
ONE_SIZE = "--one-size"  # a child's first argument: evaluate the one size its spec names


@dataclass
class ScaleBench:
    """The sizes' figures in ascending order, the text pool's sizes, the start-up seconds."""

    runs: list[dict[str, Any]]
    pool: dict[str, Any]
    cores: int
    seconds: float  # the whole command, generation and start-ups included
    exponents: dict[str, Any] = field(default_factory=dict)  # exponents()
    extrapolation: dict[str, Any] = field(default_factory=dict)  # extrapolate()


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


def check_command(cmd: ScaleConfig) -> list[int]:
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


def source_tasks(cmd: ScaleConfig) -> list[Any]:
    """The corpus and query tasks of the benchmark, reading from the mirror (or the hub)."""
    names = list(dict.fromkeys([*cmd.corpus_tasks, *cmd.query_tasks]))
    tasks = [copy.deepcopy(t) for t in select_tasks(load_benchmark(cmd.benchmark), names)]
    locate(tasks, cmd.data_dir, cmd.benchmark)
    return tasks


def run_scale_bench(cmd: ScaleConfig, progress: Callable[[str], None] | None = None) -> ScaleBench:
    """Each size generated, evaluated in its own process and measured, smallest first."""
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
    bench.exponents = exponents(runs)
    bench.extrapolation = extrapolate(bench, load_benchmark(cmd.benchmark).tasks, bench.exponents)
    return bench


def partial_path(json_path: Path) -> Path:
    """Where the sizes measured so far are kept while a run goes on (a run of several sizes
    takes hours: one stopped or killed keeps what it measured)."""
    return json_path.with_name(json_path.name + ".partial")


def _keep_partial(json_path: Path, runs: list[dict[str, Any]]) -> None:
    body = {"partial": True, "sizes_done": [r["documents"] for r in runs], "runs": runs}
    write_text_atomic(partial_path(json_path), json.dumps(body, indent=1) + "\n")


def _run_size(
    cmd: ScaleConfig, pool: Any, size: int, folder: Path, tell: Callable[[str], None]
) -> dict[str, Any]:
    """Generate, evaluate in a child process, measure the folders; then remove them."""
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
            [sys.executable, str(Path(__file__).resolve()), ONE_SIZE, str(folder / "spec.json")],
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
                f"scale rehearsal: the evaluation of {size:,} documents failed (exit code "
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


# One size, in a process of its own (so its peak memory is its own): the parent writes the
# synthetic task's folder and a spec, then runs `python benchmarks/scale_rehearsal.py ONE_SIZE
# SPEC.json`, which evaluates the task through run_eval (`neobench eval`'s own path) with the null
# forward pass at the spec's width, under the stage clock, and writes its figures to the spec's
# ``out``.


def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    """Evaluate the synthetic task as the spec says; its figures (stages, counts, bytes)."""
    cfg = _eval_config(spec)
    seen: dict[str, Any] = {}

    def hook(loaded: Any) -> None:
        # What the extrapolation needs of the tokenizer: the tokens every text gets besides its
        # own ([CLS] and [SEP] for BERT) and the length texts are cut to.
        seen["special_tokens"] = len(loaded.model.tokenizer("")["input_ids"])
        seen["max_seq_length"] = loaded.max_seq_length
        nullify(loaded, spec["dim"])

    with registered():
        summary, wall, clock = timed_null_eval(cfg, hook, "scale rehearsal")
    run = HostRun(
        cache="off" if spec["no_cache"] else "on",
        wall=wall,
        tokens=summary.tokens_encoded,
        texts_requested=summary.texts_requested,
        texts_encoded=summary.texts_encoded,
        seconds=dict(clock.seconds),
        cpu=dict(clock.cpu_seconds),
        busy=dict(clock.busy_seconds),
    )
    outcome = summary.outcomes[0]
    result = next(Path(spec["results"]).rglob(f"{TASK_NAME}.json"))
    return {
        **run.summary(),
        **seen,
        "main_score": outcome.main_score,
        "result_bytes": result.stat().st_size,
        "units_bytes": outcome.units_bytes or 0,
        "vm_hwm_bytes": _vm_hwm(),
        # Linux reports ru_maxrss in KiB.
        "ru_maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def _eval_config(spec: dict[str, Any]) -> Any:
    """`neobench eval`'s config for the synthetic task in the spec's folders."""
    return EvalConfig(
        model=spec["model"],
        benchmark=BENCHMARK_NAME,
        tasks=[TASK_NAME],
        data_dir=spec["mirror"],
        results=spec["results"],
        cache_dir=spec["cache_dir"],
        no_cache=spec["no_cache"],
        # "all": what the cache costs per stored text at this size. The synthetic task has no
        # mteb statistics, so eval's default policy would store none of it; what the default
        # stores of a real run is benchmarks/cache_estimate.py's figure.
        cache_policy="all",
        device=spec["device"],
        max_seq_length=spec["max_seq_length"],
        token_budget=spec["token_budget"],
    )


def _vm_hwm() -> int | None:
    """The kernel's peak resident set of this process (VmHWM), or None off Linux."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def one_size(argv: list[str]) -> int:
    """The child's entry: evaluate the spec at argv[0], write its figures to the spec's out."""
    spec = json.loads(Path(argv[0]).read_text())
    try:
        figures = run_one(spec)
    except NeobenchError as error:  # the parent shows the log's last lines: make them the reason
        print("\n".join(f"error: {p}" for p in error.problems), file=sys.stderr)
        return error.exit_code
    Path(spec["out"]).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


# The synthetic retrieval task, and how run_eval finds it.
#
# ``ScaleRetrieval`` is a plain mteb retrieval task (mteb's own loader, evaluator and metrics) with
# its own metadata: its dataset is a folder shaped like a hub repo,
# ``<mirror>/neobench/scale-retrieval/``, that write_task writes for each corpus size. run_eval
# reaches tasks only through a benchmark name, so ``registered()`` adds a one-task benchmark to
# mteb's benchmark registry for the duration of a rehearsal (in the rehearsal's own process): the
# eval path itself (checks, mirror, adapter, encoder, cache, staged writes) is used unchanged, and
# no real task or benchmark is touched.

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
    from mteb.benchmarks.benchmark import Benchmark

    from neobench.compat.mteb import benchmark_registry

    try:
        registry = benchmark_registry()
    except RuntimeError as error:
        raise NeobenchError(f"scale rehearsal: {error}.") from None
    registry[BENCHMARK_NAME] = Benchmark(
        name=BENCHMARK_NAME, tasks=[ScaleRetrieval()], description=ScaleRetrieval.__doc__
    )
    try:
        yield
    finally:
        registry.pop(BENCHMARK_NAME, None)


# The corpora: real text, any size, seeded.
#
# Documents are recombined from the sentences of the mirror's retrieval corpora (SciFact and
# ArguAna by default: 108 thousand distinct sentences): document ``i`` is a sentence pair chosen by
# a bijection of ``i`` (so no two documents repeat, which matters: the encoder deduplicates and
# the cache stores each distinct text once, and repeated texts would make a large corpus look
# cheap), then up to MAX_EXTRA further sentences drawn at random, under the title of the first
# sentence's source document. The queries are real texts of the mirror's tasks (the retrieval
# tasks' queries, Banking77's customer questions), drawn without repetition; each has one seeded
# relevant document. The folder is shaped like a hub repo (configs ``corpus``, ``queries``,
# ``default`` = qrels, as mteb's retrieval loader reads them), at ``<mirror>/<REPO_ID>/``.
#
# Same pool, size and seed: the same bytes. A smaller corpus is a prefix of a larger one.

MAX_EXTRA = 2  # further sentences per document after the pair: 2 to 4 sentences in all
BLOCK = 100_000  # documents generated and written (one parquet row group) at a time
# A sentence ends at . ! or ? followed by white space; the corpora's abstracts and arguments
# are running prose, so this gives their sentences (a few abbreviations split wrongly do not
# matter here: every piece is still real text).
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

README = """---
configs:
- config_name: corpus
  data_files:
  - split: corpus
    path: corpus/corpus-00000-of-00001.parquet
- config_name: queries
  data_files:
  - split: queries
    path: queries/queries-00000-of-00001.parquet
- config_name: default
  data_files:
  - split: {split}
    path: qrels/{split}-00000-of-00001.parquet
---

# {repo}

Generated by benchmarks/scale_rehearsal.py (seed {seed}): {documents:,} documents recombined
from the sentences of {corpus_tasks}; {queries:,} queries from {query_tasks}; one seeded relevant
document per query. A temporary rehearsal corpus, not a benchmark.
"""


@dataclass
class TextPool:
    """The real texts a synthetic task is made of."""

    sentences: list[str]  # distinct, sorted
    titles: list[str]  # the title of the document each sentence first came from
    queries: list[str]  # distinct, sorted
    corpus_tasks: list[str] = field(default_factory=list)
    query_tasks: list[str] = field(default_factory=list)

    @property
    def max_documents(self) -> int:
        """Distinct documents the pool can make: one per ordered sentence pair."""
        return len(self.sentences) ** 2


@dataclass
class Generated:
    """What was written for one size: counts and characters as mteb will join them."""

    documents: int
    queries: int
    document_chars: int  # (title + " " + text) per document, summed
    query_chars: int
    bytes: int  # the folder's size on disk


def load_pool(tasks: list[AbsTask], corpus_tasks: list[str], query_tasks: list[str]) -> TextPool:
    """Sentences of ``corpus_tasks``' corpora and the texts of ``query_tasks``, read through
    mteb's own loaders from tasks already pointed at the mirror."""
    by_name = {t.metadata.name: t for t in tasks}
    titled: dict[str, str] = {}
    queries: set[str] = set()
    for name in corpus_tasks:
        for title, text in _corpus(by_name[name]):
            for sentence in SENTENCE_END.split(text.strip()):
                if sentence:
                    titled.setdefault(sentence, title)
    for name in query_tasks:
        queries.update(q.strip() for q in _queries(by_name[name]) if q.strip())
    sentences = sorted(titled)
    return TextPool(
        sentences=sentences,
        titles=[titled[s] for s in sentences],
        queries=sorted(queries),
        corpus_tasks=list(corpus_tasks),
        query_tasks=list(query_tasks),
    )


def _corpus(task: AbsTask) -> list[tuple[str, str]]:
    """(title, text) of each document of a retrieval task's eval splits."""
    if task.metadata.type != "Retrieval":
        raise NeobenchError(
            f"scale rehearsal: --corpus-tasks {task.metadata.name} is a {task.metadata.type} task; "
            "documents are made from retrieval corpora. Name retrieval tasks, e.g. SciFact."
        )
    task.load_data()
    out = []
    for split in _retrieval_splits(task):
        corpus = split["corpus"]
        titles = corpus["title"][:] if "title" in corpus.column_names else [""] * len(corpus)
        out += list(zip(titles, corpus["text"][:], strict=True))
    return out


def _queries(task: AbsTask) -> list[str]:
    """A retrieval task's queries, or every text of another task's splits."""
    task.load_data()
    if task.metadata.type == "Retrieval":
        return [q for split in _retrieval_splits(task) for q in split["queries"]["text"][:]]
    texts: list[str] = []
    dataset: Any = task.dataset
    subsets = dataset.values() if "default" in dataset else [dataset]
    for subset in subsets:
        for split in subset.values():
            if "text" in split.column_names:
                texts += [t for t in split["text"][:] if isinstance(t, str)]
    if not texts:
        raise NeobenchError(
            f"scale rehearsal: --query-tasks {task.metadata.name} has no text column to draw "
            "queries from. Name retrieval tasks or tasks with a 'text' column (e.g. "
            "classification)."
        )
    return texts


def _retrieval_splits(task: AbsTask) -> list[Any]:
    dataset: Any = task.dataset
    return [split for subset in dataset.values() for split in subset.values()]


def write_task(mirror: Path, pool: TextPool, documents: int, queries: int, seed: int) -> Generated:
    """The task folder ``mirror/REPO_ID/`` for ``documents`` documents and ``queries`` queries."""
    check_size(pool, documents, queries)
    folder = mirror / REPO_ID
    for part in ("corpus", "queries", "qrels"):
        (folder / part).mkdir(parents=True, exist_ok=True)
    document_chars = _write_corpus(
        folder / "corpus/corpus-00000-of-00001.parquet", pool, documents, seed
    )
    query_chars = _write_queries(folder, pool, documents, queries, seed)
    (folder / "README.md").write_text(
        README.format(
            split=SPLIT,
            repo=REPO_ID,
            seed=seed,
            documents=documents,
            queries=queries,
            corpus_tasks=", ".join(pool.corpus_tasks),
            query_tasks=", ".join(pool.query_tasks),
        )
    )
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    return Generated(documents, queries, document_chars, query_chars, size)


def check_size(pool: TextPool, documents: int, queries: int) -> None:
    """Sizes the pool cannot make, reported at once."""
    problems = []
    if documents > pool.max_documents:
        problems.append(
            f"--sizes {documents:,}: the {len(pool.sentences):,} sentences of "
            f"{', '.join(pool.corpus_tasks)} make at most {pool.max_documents:,} distinct "
            "documents; use smaller sizes or add retrieval tasks to --corpus-tasks."
        )
    if queries > len(pool.queries):
        problems.append(
            f"--queries {queries:,}: {', '.join(pool.query_tasks)} hold {len(pool.queries):,} "
            "distinct texts; ask for at most that many, or add tasks to --query-tasks."
        )
    if problems:
        raise NeobenchError(problems)


def _write_corpus(path: Path, pool: TextPool, documents: int, seed: int) -> int:
    """Documents in blocks of BLOCK rows; returns their characters as mteb joins them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    n = len(pool.sentences)
    first, second = rng.permutation(n), rng.permutation(n)
    schema = pa.schema([("_id", pa.string()), ("title", pa.string()), ("text", pa.string())])
    chars = 0
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, documents, BLOCK):
            i = np.arange(start, min(start + BLOCK, documents))
            # (i mod n, i div n) is a bijection of i < n^2; shifting the second index by the
            # first keeps it so, and keeps neighbouring documents from sharing a sentence.
            a, b = first[i % n], second[(i % n + i // n) % n]
            # Whole blocks are drawn even for a short last one, so document i's draws do not
            # depend on the corpus size (a smaller corpus is a prefix of a larger one).
            extra = rng.integers(0, MAX_EXTRA + 1, size=BLOCK)[: len(i)]
            more = rng.integers(0, n, size=(BLOCK, MAX_EXTRA))[: len(i)]
            texts = [
                " ".join(pool.sentences[k] for k in (x, y, *row[:e]))
                for x, y, row, e in zip(
                    a.tolist(), b.tolist(), more.tolist(), extra.tolist(), strict=True
                )
            ]
            titles = [pool.titles[x] for x in a.tolist()]
            chars += sum(len(t) + 1 for t in titles if t) + sum(map(len, texts))
            ids = [f"d{k}" for k in i.tolist()]
            writer.write_table(pa.table([ids, titles, texts], schema=schema))
    return chars


def _write_queries(folder: Path, pool: TextPool, documents: int, queries: int, seed: int) -> int:
    """Queries drawn without repetition, one seeded relevant document each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng([seed, 1])  # independent of the corpus's stream
    picked = [pool.queries[k] for k in rng.choice(len(pool.queries), queries, replace=False)]
    ids = [f"q{k}" for k in range(queries)]
    relevant = rng.integers(0, documents, size=queries)
    pq.write_table(
        pa.table({"_id": ids, "text": picked}), folder / "queries/queries-00000-of-00001.parquet"
    )
    pq.write_table(
        pa.table(
            {
                "query-id": ids,
                "corpus-id": [f"d{k}" for k in relevant.tolist()],
                "score": np.ones(queries, dtype=np.int64),
            }
        ),
        folder / f"qrels/{SPLIT}-00000-of-00001.parquet",
    )
    return sum(map(len, picked))


# Fits and extrapolation: from the sizes to a whole benchmark run.
#
# Scaling exponents: each figure y (seconds of a stage, bytes, peak memory) is fitted as
# y = c * N^e over the corpus sizes N by least squares on log y against log N; e near 1 means
# linear in the corpus, near 0 constant, above 1 worse than linear.
#
# The extrapolation to one model's run of a benchmark reads what each task encodes from mteb's own
# descriptive statistics (``task.metadata.descriptive_stats``, shipped with mteb: per eval split,
# for each text field, the number of texts, their characters and the distinct texts), because the
# mirror holds 16 of MTEB(eng, v1)'s 56 tasks. Per text field, distinct texts x (mean characters x
# the rehearsal's tokens per character + the tokenizer's special tokens), capped at the max length,
# gives its tokens. A classification task also encodes its training texts, at most n_experiments x
# samples_per_label per label (mteb's undersampling). Corpora whose statistics agree to SAME_CORPUS
# (FEVER and ClimateFEVER share one) are counted once, as the embedding cache stores them once.
# Then:
#
# - disk: cache bytes per stored text x distinct texts; one result file per task and units bytes
#   per evaluated item (query, pair, sample), both as measured on the synthetic retrieval task;
# - peak memory: the peak-RSS fit at the benchmark's largest corpus (MSMARCO's 8.8 million), on
#   the sizes of at least one search chunk (``memory_fit``);
# - host hours: the seconds each further token costs between the two largest sizes, as a pipeline
#   with a free forward pass: the slower of the tokenizer worker and the main thread's other host
#   work (``host_cost``; the retrieval scoring is left out, a GPU run does it on the device) x the
#   benchmark's tokens; the tokeniser's tokens/s per core and core-hours beside it.

# Two tasks' corpora whose document counts and characters agree this closely are one corpus
# (FEVER's and ClimateFEVER's statistics differ by 25 of 5.4 million documents).
SAME_CORPUS = 1e-4
# Figures fitted besides every stage's seconds: name -> where it is in a size's record.
FIGURES = {
    "total_seconds": ("seconds", "total"),
    "tokenize_seconds": ("seconds", "tokenize"),
    "other_host_seconds": ("seconds", "other_host"),
    "scoring_seconds": ("seconds", "scoring"),
    "tokens": ("tokens",),
    "peak_rss_bytes": ("peak_rss_bytes",),
    "cache_bytes": ("cache_bytes",),
    "datasets_cache_bytes": ("datasets_cache_bytes",),
    "result_bytes": ("result_bytes",),
    "units_bytes": ("units_bytes",),
}


def power_fit(sizes: list[float], values: list[float]) -> dict[str, float] | None:
    """y = coefficient * N^exponent by least squares in log-log; None without two positive
    values at two different sizes."""
    points = [(math.log(n), math.log(v)) for n, v in zip(sizes, values, strict=True) if v > 0]
    if len({x for x, _ in points}) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return {"exponent": round(slope, 4), "coefficient": math.exp(my - slope * mx)}


def exponents(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Every figure's fit, and every stage's seconds' under ``stages``."""
    sizes = [float(r["documents"]) for r in runs]

    def get(run: dict[str, Any], path: tuple[str, ...]) -> float:
        value: Any = run
        for key in path:
            value = value.get(key, 0.0) if isinstance(value, dict) else 0.0
        return float(value or 0.0)

    out: dict[str, Any] = {
        name: power_fit(sizes, [get(r, p) for r in runs]) for name, p in FIGURES.items()
    }
    stages = sorted({s for r in runs for s in r["seconds"]} - {"total", "tokenize", "other_host"})
    out["stages"] = {s: power_fit(sizes, [r["seconds"].get(s, 0.0) for r in runs]) for s in stages}
    return out


def task_texts(
    task: AbsTask, tokens_per_char: float, specials: int, max_len: int
) -> dict[str, Any]:
    """What one (non-aggregate) task encodes, by mteb's descriptive statistics."""
    stats = task.metadata.descriptive_stats or {}
    fields: list[dict[str, Any]] = []
    items = 0
    for split in task.eval_splits:
        for block in _split_stats(task, stats.get(split) or {}):
            fields += _text_fields(block)
            items += int(block.get("num_queries") or block.get("num_samples") or 0)
    train = getattr(task, "train_split", None)
    if task.metadata.type == "Classification" and train in stats:
        for block in _split_stats(task, stats[train]):
            labels = (block.get("label_statistics") or {}).get("unique_labels") or 0
            drawn = task.n_experiments * task.samples_per_label * labels  # type: ignore[attr-defined]
            share = min(1.0, drawn / max(1, int(block.get("num_samples") or 1)))
            fields += [f | {"unique": f["unique"] * share} for f in _text_fields(block)]
    for f in fields:
        per_text = min(f["mean_chars"] * tokens_per_char + specials, max_len)
        f["tokens"] = f["unique"] * per_text
    return {
        "task": task.metadata.name,
        "type": task.metadata.type,
        "items": items,
        "fields": fields,
    }


def _split_stats(task: AbsTask, split: dict[str, Any]) -> list[dict[str, Any]]:
    """A split's statistics, per evaluated subset when mteb records them by subset."""
    by_subset = split.get("hf_subset_descriptive_stats")
    subsets = getattr(task, "hf_subsets", None) or []
    if by_subset and subsets and set(subsets) < set(by_subset):
        return [by_subset[s] for s in subsets if s in by_subset]
    return [split]


def _text_fields(block: dict[str, Any]) -> list[dict[str, Any]]:
    """Each ``*_statistics`` entry of text: its texts, distinct texts and mean characters."""
    out = []
    for key, value in block.items():
        if not (key.endswith("_statistics") and isinstance(value, dict)):
            continue
        mean = value.get("average_text_length")
        if not mean or "total_text_length" not in value:
            continue
        texts = value["total_text_length"] / mean
        unique = float(value.get("unique_texts") or texts)
        out.append(
            {
                # documents_text_statistics -> documents (text1_statistics stays text1)
                "field": key.removesuffix("_statistics").removesuffix("_text"),
                "texts": texts,
                "unique": unique,
                "mean_chars": float(mean),
                "chars": float(value["total_text_length"]),
            }
        )
    return out


def _same_corpus(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """(documents, characters) within SAME_CORPUS of each other: one corpus in two tasks."""
    return all(abs(x - y) <= SAME_CORPUS * max(x, y) for x, y in zip(a, b, strict=True))


def benchmark_totals(
    tasks: list[AbsTask], tokens_per_char: float, specials: int, max_len: int
) -> dict[str, Any]:
    """Texts, distinct texts and tokens of a benchmark's tasks; corpora counted once."""
    per_task: list[dict[str, Any]] = []
    seen: list[tuple[float, float]] = []
    largest = {"task": None, "documents": 0}
    for task in expand(tasks):
        row = task_texts(task, tokens_per_char, specials, max_len)
        for f in row["fields"]:
            f["shared"] = False
            if f["field"] != "documents":
                continue
            key = (f["texts"], f["chars"])
            f["shared"] = any(_same_corpus(key, other) for other in seen)
            seen.append(key)
            if f["texts"] > largest["documents"]:
                largest = {"task": row["task"], "documents": round(f["texts"])}
        per_task.append(row)
    kept = [f for row in per_task for f in row["fields"] if not f["shared"]]
    return {
        "tasks": len(per_task),
        "texts": round(sum(f["texts"] for row in per_task for f in row["fields"])),
        "distinct_texts": round(sum(f["unique"] for f in kept)),
        "tokens": round(sum(f["tokens"] for f in kept)),
        "items": sum(row["items"] for row in per_task),
        "largest_corpus": largest,
        "per_task": [
            {
                "task": row["task"],
                "type": row["type"],
                "distinct_texts": round(sum(f["unique"] for f in row["fields"] if not f["shared"])),
                "tokens": round(sum(f["tokens"] for f in row["fields"] if not f["shared"])),
            }
            for row in per_task
        ],
    }


def _per_token(smaller: dict[str, Any], larger: dict[str, Any], seconds: Any) -> float:
    """Seconds each further token adds between two sizes, once the fixed costs (process start,
    model load, checks) are paid; the larger size's mean where the difference is not positive
    (noise on a busy machine)."""
    extra_tokens = larger["tokens"] - smaller["tokens"]
    extra = seconds(larger) - seconds(smaller)
    if extra_tokens > 0 and extra > 0:
        return extra / extra_tokens
    return seconds(larger) / max(larger["tokens"], 1)


def host_cost(smaller: dict[str, Any], larger: dict[str, Any]) -> dict[str, float]:
    """Host seconds per token, as a pipeline: the tokenizer worker (busy seconds) beside the main
    thread's own work (other_host: all but tokenising, waiting for it, the forward pass and the
    scoring). With a forward pass that costs nothing the slower of the two sets the pace."""
    tokenize = _per_token(smaller, larger, lambda r: r["seconds"]["tokenize"])
    main_thread = _per_token(smaller, larger, lambda r: r["seconds"]["other_host"])
    return {"tokenize": tokenize, "other_host": main_thread, "host": max(tokenize, main_thread)}


def memory_fit(runs: list[dict[str, Any]]) -> tuple[dict[str, float] | None, list[int]]:
    """The peak-RSS fit used for the largest corpus, and the sizes it is fitted on.

    Search encodes the corpus CORPUS_CHUNK documents at a time, so below that size a corpus
    holds a partial chunk and memory grows with it; above it, the chunk's share is constant.
    The sizes from one chunk up are used when there are two of them, else all sizes."""
    chunked = [r for r in runs if r["documents"] >= CORPUS_CHUNK]
    used = chunked if len(chunked) >= 2 else runs
    sizes = [r["documents"] for r in used]
    return power_fit([float(n) for n in sizes], [r["peak_rss_bytes"] for r in used]), sizes


def extrapolate(bench: ScaleBench, tasks: list[AbsTask], fits: dict[str, Any]) -> dict[str, Any]:
    """One model's run of the benchmark at this machine's measured costs (the section's
    comment above says how)."""
    big = bench.runs[-1]
    specials, max_len = int(big["special_tokens"]), int(big["max_seq_length"])
    texts = big["texts_encoded"]
    chars = big["document_chars"] + big["query_chars"]
    tokens_per_char = max(big["tokens"] - specials * texts, 1) / max(chars, 1)
    totals = benchmark_totals(tasks, tokens_per_char, specials, max_len)
    cost = host_cost(bench.runs[-2], big)
    per_core = 1 / cost["tokenize"] / bench.cores
    largest = totals["largest_corpus"]["documents"]
    rss, rss_sizes = memory_fit(bench.runs)
    per_text = big["cache_bytes"] / max(big["texts_encoded"], 1)
    return {
        "tokens_per_char": round(tokens_per_char, 5),
        "special_tokens": specials,
        "max_seq_length": max_len,
        **{k: v for k, v in totals.items() if k != "per_task"},
        "disk_bytes": {
            "cache": round(per_text * totals["distinct_texts"]),
            "results": round(big["result_bytes"] * totals["tasks"]),
            "units": round(big["units_bytes"] / max(big["queries"], 1) * totals["items"]),
        },
        "cache_bytes_per_text": round(per_text, 1),
        "peak_rss_bytes": round(rss["coefficient"] * largest ** rss["exponent"]) if rss else None,
        "peak_rss_fit_sizes": rss_sizes,
        "host_seconds_per_million_tokens": {k: round(v * 1e6, 3) for k, v in cost.items()},
        "host_hours": round(cost["host"] * totals["tokens"] / 3600, 3),
        "tokenize_tokens_per_second_per_core": round(per_core),
        "tokenize_core_hours": round(totals["tokens"] / per_core / 3600, 3),
        "cores": bench.cores,
        "per_task": totals["per_task"],
    }


# The output: one column per corpus size and the fitted exponent beside each figure, then the
# whole-benchmark extrapolation; and the JSON record (keys documented in docs/performance.md, "What
# a run costs as it grows").

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


def to_json(bench: ScaleBench, cmd: ScaleConfig) -> str:
    """The figures as JSON: per size (``runs``), the fits, the extrapolation, the settings."""
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


def parse_args(argv: list[str] | None = None) -> ScaleConfig:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n")[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    flags.add_fields(parser, ScaleConfig)
    return flags.config_from_args(ScaleConfig, parser.parse_args(argv))


def main(argv: list[str] | None = None) -> int:
    """The rehearsal: progress on stderr, the table on stdout, the figures to --json."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    silence_libraries(False)
    cfg = parse_args(argv)
    try:
        bench = run_scale_bench(cfg, progress=lambda line: print(line, file=sys.stderr, flush=True))
    except NeobenchError as error:
        for problem in error.problems:
            print(f"error: {problem}", file=sys.stderr)
        return error.exit_code
    # Line by line: each is flushed as it is printed, so a log shows whole lines.
    for line in report(bench):
        print(line, flush=True)
    if cfg.json:
        write_text_atomic(Path(cfg.json), to_json(bench, cfg))
        partial_path(Path(cfg.json)).unlink(missing_ok=True)  # the whole run is written
        print(f"wrote {cfg.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == [ONE_SIZE]:  # a child of _spawn
        sys.exit(one_size(sys.argv[2:]))
    sys.exit(main())
