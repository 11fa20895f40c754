"""From the sizes of `neobench bench scale` to a whole benchmark run.

Scaling exponents: each figure y (seconds of a stage, bytes, peak memory) is fitted as
y = c * N^e over the corpus sizes N by least squares on log y against log N; e near 1 means
linear in the corpus, near 0 constant, above 1 worse than linear.

The extrapolation to one model's run of a benchmark reads what each task encodes from mteb's own
descriptive statistics (``task.metadata.descriptive_stats``, shipped with mteb: per eval split,
for each text field, the number of texts, their characters and the distinct texts), because the
mirror holds 16 of MTEB(eng, v1)'s 56 tasks. Per text field, distinct texts x (mean characters x
the rehearsal's tokens per character + the tokenizer's special tokens), capped at the max length,
gives its tokens. A classification task also encodes its training texts, at most n_experiments x
samples_per_label per label (mteb's undersampling). Corpora whose statistics agree to SAME_CORPUS
(FEVER and ClimateFEVER share one) are counted once, as the embedding cache stores them once.
Then:

- disk: cache bytes per stored text x distinct texts; one result file per task and units bytes
  per evaluated item (query, pair, sample), both as measured on the synthetic retrieval task;
- peak memory: the peak-RSS fit at the benchmark's largest corpus (MSMARCO's 8.8 million), on
  the sizes of at least one search chunk (``memory_fit``);
- host hours: the seconds each further token costs between the two largest sizes, as a pipeline
  with a free forward pass: the slower of the tokenizer worker and the main thread's other host
  work (``host_cost``; the retrieval scoring is left out, a GPU run does it on the device) x the
  benchmark's tokens; the tokeniser's tokens/s per core and core-hours beside it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

    from neobench.bench.scale import ScaleBench

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
    from neobench.protocol.instructions import expand

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
    from neobench.evaluation.adapter import CORPUS_CHUNK

    chunked = [r for r in runs if r["documents"] >= CORPUS_CHUNK]
    used = chunked if len(chunked) >= 2 else runs
    sizes = [r["documents"] for r in used]
    return power_fit([float(n) for n in sizes], [r["peak_rss_bytes"] for r in used]), sizes


def extrapolate(bench: ScaleBench, tasks: list[AbsTask], fits: dict[str, Any]) -> dict[str, Any]:
    """One model's run of the benchmark at this machine's measured costs (see the module doc)."""
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
