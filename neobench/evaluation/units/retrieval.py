"""Retrieval and reranking units: one per query (``ids``), storing its main-metric ``value``
(float64); a resample's score is the mean of the values it draws (mteb 2 scores reranking as
retrieval over each query's ``top_ranked``).

``build`` takes mteb's own steps on the saved results, to equal its number exactly: queries
without relevant documents dropped, a query's own id dropped under ``ignore_identical_ids`` (the
predictions are saved before mteb removes it), ``skip_first_result``, then pytrec_eval's value
(one with no hit scores 0) or mteb's ``mrr`` (`per_query`). ``score`` sums in query order with the
builtin ``sum`` and rounds as mteb does (pytrec_eval metrics to 5 decimals, MRR not at all).
``max_over_subqueries_*`` (MindSmallReranking) merges each query's subqueries first.
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

from neobench.evaluation.units.spec import TypeSpec

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

Run = dict[str, dict[str, float]]  # query id -> {document id: score}
Qrels = dict[str, dict[str, int]]  # query id -> {document id: relevance}

SUBQUERIES = "max_over_subqueries_"
# mteb's main-score name (after "<metric>_at_") -> pytrec_eval's per-query key prefix
_PYTREC = {"ndcg": "ndcg_cut_", "map": "map_cut_", "recall": "recall_", "precision": "P_"}
_PYTREC["hit_rate"] = "success_"
_METRIC = re.compile(r"^(ndcg|map|recall|precision|hit_rate|mrr)_at_(\d+)$")


def _metric(main_score: str) -> tuple[str, int]:
    """``"ndcg_at_10"`` -> ("ndcg", 10); "accuracy" is mteb's name for recall@1."""
    name = main_score.removeprefix(SUBQUERIES)
    if name == "accuracy":
        return "recall", 1
    found = _METRIC.match(name)
    if found is None:
        raise ValueError(
            f"no per-query units for the retrieval main score {main_score!r}: supported are "
            "ndcg|map|recall|precision|hit_rate|mrr _at_<k>, accuracy, each optionally prefixed "
            f"by {SUBQUERIES!r}"
        )
    return found.group(1), int(found.group(2))


def _qrels(task: AbsTask, subset: str, split: str) -> Qrels:
    """The part's relevance judgments, without the queries mteb drops for having none."""
    task.convert_v1_dataset_format_to_v2(num_proc=None)  # no-op once the data is in v2 form
    relevant = task.dataset[subset][split]["relevant_docs"]
    return {qid: dict(docs) for qid, docs in relevant.items() if len(docs) > 0}


def _run(task: AbsTask, predictions: Run) -> Run:
    """The saved results as mteb scores them: identical ids removed when asked. Only a query
    whose results hold its own id is copied; the others are passed on as they are (nothing
    downstream changes a query's results)."""
    if not getattr(task, "ignore_identical_ids", False):
        return predictions
    run: Run = {}
    for qid, docs in predictions.items():
        if qid in docs:
            docs = dict(docs)  # a copy in C, the order kept, then the one id dropped
            del docs[qid]
        run[qid] = docs
    return run


def _skip_first(run: Run) -> Run:
    """mteb's skip_first_result: the first of a stable descending sort dropped, which argmax
    names without sorting (the metrics re-sort what is left). A NaN score takes mteb's sort."""
    skipped: Run = {}
    for qid, docs in run.items():
        scores = np.fromiter(docs.values(), np.float64, len(docs))
        if len(docs) == 0 or np.isnan(scores).any():
            skipped[qid] = dict(sorted(docs.items(), key=lambda item: item[1], reverse=True)[1:])
            continue
        kept = dict(docs)
        del kept[list(docs)[int(np.argmax(scores))]]
        skipped[qid] = kept
    return skipped


def _merge_subqueries(qrels: Qrels, run: Run) -> tuple[Qrels, Run]:
    """mteb's max_over_subqueries: ``<base>_<i>`` queries become ``<base>``, each document keeping
    its best score over the subqueries; the judgments are the last subquery's (all the same)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for qid in qrels:
        groups["_".join(qid.split("_")[:-1])].append(qid)
    merged_qrels, merged_run = {}, {}
    for base, qids in groups.items():
        best: dict[str, float] = {}
        for qid in qids:
            for doc, s in run[qid].items():
                best[doc] = s if doc not in best else max(s, best[doc])
        merged_run[base] = best
        merged_qrels[base] = qrels[qids[-1]]
    return merged_qrels, merged_run


def per_query(run: Run, qrels: Qrels, metric: str, k: int, k_values: list[int]) -> Run:
    """{query id: value} of ``metric@k``, in mteb's order. Only the top-k candidates (`_top`) and
    the one measure (mteb computes all, ~2 s for ArguAna): the same floats, as a metric at k reads
    only the k first documents. ``k_values`` is kept for the callers."""
    import pytrec_eval

    top = _tops(run, k)
    if metric == "mrr":
        return {qid: _reciprocal_rank(docs, qrels[qid], k) for qid, docs in top.items()}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {f"{_PYTREC[metric].rstrip('_')}.{k}"})
    key = f"{_PYTREC[metric]}{k}"
    return {qid: float(s[key]) for qid, s in evaluator.evaluate(top).items()}


def _top(docs: dict[str, float], k: int) -> dict[str, float]:
    """The documents scoring, as float32, at least the k-th highest (ties kept), in first order:
    the k first of pytrec_eval's float32 ranking and of mteb's float64 MRR alike. A query with k
    or fewer results, or a NaN score, is kept whole."""
    if len(docs) <= k:
        return docs
    values = np.fromiter(docs.values(), np.float64, len(docs)).astype(np.float32)
    if np.isnan(values).any():
        return docs
    kth = np.partition(values, len(docs) - k)[len(docs) - k]
    ids = list(docs)
    return {ids[i]: docs[ids[i]] for i in np.flatnonzero(values >= kth).tolist()}


def _tops(run: Run, k: int) -> Run:
    """``{qid: _top(docs, k)}`` for every query at once: the scores of all queries in one
    (queries, longest) float32 array (short rows padded with -inf, masked out), each query's
    k-th highest found by one partition over it. Per query only the selection is Python."""
    if not run:
        return {}
    lengths = np.fromiter(map(len, run.values()), np.int64, len(run))
    real = np.arange(lengths.max()) < lengths[:, None]  # (queries, longest)
    values = np.full(real.shape, -np.inf, np.float32)
    flat = itertools.chain.from_iterable(docs.values() for docs in run.values())
    # A boolean mask fills row by row, each row's first len(docs) cells: the order of ``flat``.
    values[real] = np.fromiter(flat, np.float64, int(lengths.sum())).astype(np.float32)
    at = min(k, values.shape[1]) - 1  # each row's k-th highest (rows of k or fewer: unused)
    kth = -np.partition(-values, at, axis=1)[:, at]
    kept = (values >= kth[:, None]) & real
    # Kept whole, as _top keeps them: k or fewer results, or a NaN (no order to cut by).
    whole = (lengths <= k) | np.isnan(values).any(axis=1)
    top: Run = {}
    for (qid, docs), row, as_is in zip(run.items(), kept, whole, strict=True):
        if as_is:
            top[qid] = docs
            continue
        ids = list(docs)
        top[qid] = {ids[i]: docs[ids[i]] for i in np.flatnonzero(row).tolist()}
    return top


def _reciprocal_rank(docs: dict[str, float], judged: dict[str, int], k: int) -> float:
    """mteb's mrr for one query at one k: 1/rank of the first relevant document among the top k
    by (score, document id), descending; 0 when none is."""
    relevant = {doc for doc, rel in judged.items() if rel > 0}
    top = sorted(docs.items(), key=lambda item: (item[1], item[0]), reverse=True)[:k]
    return next((1.0 / (rank + 1) for rank, (doc, _) in enumerate(top) if doc in relevant), 0.0)


def build(
    task: AbsTask, predictions: Run, hf_subset: str, split: str
) -> tuple[list[str], dict[str, Any]]:
    """One part's query ids and per-query main-metric values, from mteb's saved results."""
    main_score = task.metadata.main_score
    metric, k = _metric(main_score)
    k_values = list(task.k_values)
    if k not in k_values:
        raise ValueError(f"{task.metadata.name}: {main_score} needs k={k} in {k_values}")
    qrels, run = _qrels(task, hf_subset, split), _run(task, predictions)
    if main_score.startswith(SUBQUERIES):
        # mteb merges the results after removing identical ids but never skips a first result
        qrels, run = _merge_subqueries(qrels, run)
    elif getattr(task, "skip_first_result", False):
        run = _skip_first(run)
    values = per_query(run, qrels, metric, k, k_values)
    return list(values), {"value": np.fromiter(values.values(), np.float64, len(values))}


def score(data: dict[str, np.ndarray], idx: np.ndarray, main_score: str) -> float:
    """Mean of the drawn queries' values, summed and rounded the way mteb does."""
    drawn = data["value"][np.asarray(idx, dtype=np.intp)].tolist()
    mean = sum(drawn) / len(drawn)  # builtin sum: mteb's exact float result, whatever Python
    metric, _ = _metric(main_score)
    return mean if metric == "mrr" else round(mean, 5)


SPEC = TypeSpec(unit="query", build=build, score=score)
RERANKING_SPEC = SPEC  # usually map_at_1000; MindSmallReranking's max_over_subqueries_map_at_1000
