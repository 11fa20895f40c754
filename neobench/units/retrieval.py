"""Retrieval and reranking units: one per query, holding that query's value of the main metric.

mteb 2 scores both types the same way (reranking is retrieval restricted to each query's
``top_ranked`` candidates): pytrec_eval computes every metric per query on the ranked results it
saved, and the task's number is the mean over the evaluated queries. So a part stores only
``ids`` (query ids) and ``value`` (the query's main-metric value, float64 kept whole), never the
rankings, and a resample's score is the mean of the values it draws.

To equal mteb's number exactly, ``build`` goes through mteb's own steps on the saved results:
queries without relevant documents dropped (``_filter_queries_without_positives``), a query's own
id dropped from its results when ``ignore_identical_ids`` (ArguAna, Quora...: the predictions file
is written before mteb removes them), ``skip_first_result``, then mteb's
``calculate_retrieval_scores`` (pytrec_eval, which drops no query: one with no hit scores 0) or
mteb's ``mrr``. ``score`` averages with the builtin ``sum`` in query order and rounds as mteb does:
pytrec_eval metrics (nDCG, MAP, recall, precision, hit rate) to 5 decimals, MRR not at all.
``max_over_subqueries_*`` (MindSmallReranking) merges each query's subqueries first, as mteb's
``max_over_subqueries`` does; its unit is the merged query.

CQADupstackRetrieval is an aggregate of 12 forum tasks, each an ordinary Retrieval task with its
own predictions; mteb's score is the unweighted mean of the 12 main scores. Its units file holds
the 12 subtasks' parts, each built here as any retrieval task and marked with its subtask
(`neobench.units.build`); an interval for the aggregate resamples each subtask's queries within
that subtask and averages the 12 scores (`neobench.units.combine`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

from neobench.units import TypeSpec

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
    """A copy of the saved results as mteb scores them (identical ids removed when asked)."""
    ignore = getattr(task, "ignore_identical_ids", False)
    return {
        qid: {doc: s for doc, s in docs.items() if not (ignore and doc == qid)}
        for qid, docs in predictions.items()
    }


def _skip_first(run: Run) -> Run:
    # mteb's calculate_retrieval_scores: drop each query's top result (sorted by score only)
    return {
        qid: dict(sorted(docs.items(), key=lambda item: item[1], reverse=True)[1:])
        for qid, docs in run.items()
    }


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
    """{query id: value} of ``metric@k``, in mteb's order (the order of its results)."""
    from mteb._evaluators.retrieval_metrics import calculate_retrieval_scores, mrr

    if metric == "mrr":
        values = mrr(qrels, run, k_values)[f"MRR@{k}"]
        return dict(zip(run, values, strict=True))
    scores = calculate_retrieval_scores(run, qrels, k_values).all_scores
    key = f"{_PYTREC[metric]}{k}"
    return {qid: float(s[key]) for qid, s in scores.items()}


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
# Reranking in mteb 2 is retrieval over each query's top_ranked candidates: same units, same score
# (its main score is usually map_at_1000; MindSmallReranking's max_over_subqueries_map_at_1000).
RERANKING_SPEC = TypeSpec(unit="query", build=build, score=score)
