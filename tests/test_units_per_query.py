"""Retrieval units' fast per-query values equal mteb's own functions, float for float.

`retrieval.per_query` cuts each query's results to its top-k candidates and asks pytrec_eval for
one measure (MRR: sorts the candidates); mteb's `calculate_retrieval_scores` and `mrr` score the
whole results for every metric. Both are run on SciFact's real judgments and corpus ids from the
mirror, with 1,000 results per query whose scores are coarse on purpose: ties everywhere, at the
k-th place too, where the document id decides; in half the queries, scores that differ in float64
but not in float32 (pytrec_eval ranks by float32). One query holds a NaN score, some hold their own
id (ArguAna's ignore_identical_ids); every metric at every k, with and without skip_first_result.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import mteb
import numpy as np
import pytest
from mteb._evaluators.retrieval_metrics import calculate_retrieval_scores, mrr

from neobench.evaluation.units import retrieval
from neobench.protocol import mirror as mirror_mod

METRICS = ("ndcg", "map", "recall", "precision", "hit_rate", "mrr")


@pytest.fixture(scope="module")
def scifact(mirror) -> tuple[retrieval.Qrels, retrieval.Run, list[int]]:
    """SciFact's test judgments and a tie-heavy run over its real corpus ids."""
    task = mteb.get_task("SciFact")
    mirror_mod.point_tasks_at_mirror([task], Path(mirror).resolve(), "MTEB(eng, v1)")
    task.load_data()
    qrels = retrieval._qrels(task, "default", "test")
    corpus = task.dataset["default"]["test"]["corpus"]["id"][:]  # a list (datasets 5: a Column)
    rng = np.random.default_rng(0)
    run: retrieval.Run = {}
    for n, qid in enumerate(qrels):
        docs = [corpus[i] for i in rng.choice(len(corpus), 1000, replace=False)]
        docs[: len(qrels[qid])] = list(qrels[qid])  # its relevant documents among the results
        if n % 7 == 0:
            docs[-1] = qid  # a query that finds itself
        scores = rng.integers(0, 40, len(docs)) / 40  # 40 distinct scores: many ties
        if n % 2:  # ties in float32 (pytrec_eval's precision) that float64 tells apart
            scores += rng.integers(0, 2, len(docs)) * 1e-12
        run[qid] = {doc: float(s) for doc, s in zip(docs, scores, strict=True)}
    run[next(iter(run))][corpus[0]] = float("nan")
    return qrels, run, list(task.k_values)


def mteb_skip_first(run: retrieval.Run) -> retrieval.Run:
    """mteb's calculate_retrieval_scores, skip_first_result=True."""
    return {
        qid: dict(sorted(docs.items(), key=lambda x: x[1], reverse=True)[1:])
        for qid, docs in run.items()
    }


@pytest.mark.parametrize("skip_first", [False, True])
def test_every_metric_at_every_k_equals_mteb(scifact, skip_first):
    qrels, run, k_values = scifact
    assert len(qrels) == 300 and k_values == [1, 3, 5, 10, 20, 100, 1000]
    ours = retrieval._skip_first(run) if skip_first else run
    theirs = mteb_skip_first(run) if skip_first else run
    assert ours == theirs  # the same documents and scores left per query
    stock = calculate_retrieval_scores(run, qrels, k_values, skip_first_result=skip_first)
    stock_mrr = mrr(qrels, theirs, k_values)
    for metric in METRICS:
        for k in k_values:
            got = retrieval.per_query(ours, qrels, metric, k, k_values)
            if metric == "mrr":
                expected = dict(zip(theirs, stock_mrr[f"MRR@{k}"], strict=True))
            else:
                key = f"{retrieval._PYTREC[metric]}{k}"
                expected = {qid: float(s[key]) for qid, s in stock.all_scores.items()}
            assert list(got) == list(expected), (metric, k)  # mteb's query order
            assert got == expected, (metric, k)  # exact floats


def test_top_candidates_keep_every_tie_at_the_cut(scifact):
    _, run, _ = scifact
    docs = list(run.values())[1]
    for k in (1, 10, 100):
        top = retrieval._top(docs, k)
        kth = np.float32(sorted(docs.values(), reverse=True)[k - 1])
        assert top == {d: s for d, s in docs.items() if np.float32(s) >= kth} and len(top) >= k
    nan_query = next(iter(run.values()))
    assert retrieval._top(nan_query, 10) is nan_query  # no order to cut by: kept whole


def test_all_queries_cut_at_once_equal_the_cut_per_query(scifact):
    _, run, _ = scifact
    assert len({len(docs) for docs in run.values()}) > 1  # some queries lost documents
    for k in (1, 10, 100, 999, 1000, 1001):
        expected = {qid: retrieval._top(docs, k) for qid, docs in run.items()}
        got = retrieval._tops(run, k)
        assert got == expected and list(got) == list(expected)
        for qid, docs in got.items():  # each query's documents in their first order
            assert list(docs) == list(expected[qid])
    odd = {"short": {"d1": 0.5, "d2": 0.25}, "nan": {"d1": float("nan"), "d2": 1.0, "d3": 0.0}}
    assert retrieval._tops(odd, 1) == {"short": {"d1": 0.5}, "nan": odd["nan"]}
    assert retrieval._tops({}, 10) == {}


def test_identical_ids_are_dropped_as_mteb_drops_them(scifact):
    _, run, _ = scifact
    mine = retrieval._run(SimpleNamespace(ignore_identical_ids=True), run)
    expected = {q: {d: s for d, s in docs.items() if d != q} for q, docs in run.items()}
    assert mine == expected and list(mine) == list(run)
    assert sum(q in docs for q, docs in run.items()) == 43  # the run holds some to drop
    assert retrieval._run(SimpleNamespace(ignore_identical_ids=False), run) is run
