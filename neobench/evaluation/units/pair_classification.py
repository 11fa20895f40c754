"""PairClassification units: one labelled pair each; the main score ranks all pairs at once.

A part stores each pair's label and the score of each of mteb's five functions the main score
needs (``max_<metric>`` is the maximum over them; v1: ``max_ap``), in mteb's orientation (for
distances lower means more similar). Every metric depends only on the order of the scores, so
`sts.compact` keeps them exact. AP draws (`score_many`): docs/uncertainty.md, "What it costs".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.metrics import average_precision_score

from neobench.compat.mteb import best_accuracy, best_f1
from neobench.evaluation.units.spec import TypeSpec, blocks, data_split, each_row
from neobench.evaluation.units.sts import compact

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

# mteb's short name -> (key in its predictions, whether a higher score means more similar).
FUNCTIONS = {
    "similarity": ("similarity_scores", True),
    "cosine": ("cosine_scores", True),
    "manhattan": ("manhattan_distances", False),
    "euclidean": ("euclidean_distances", False),
    "dot": ("dot_scores", True),
}
METRICS = ("accuracy", "f1", "precision", "recall", "ap")
# Resamples x pairs per block of `score_many`: its arrays stay under ~100 MB, numpy at full speed.
BLOCK = 2_000_000


def _split_name(main_score: str) -> tuple[list[str], str]:
    """``max_ap`` -> (all five functions, ``ap``); ``cosine_f1`` -> ([``cosine``], ``f1``)."""
    prefix, _, metric = main_score.partition("_")
    if metric not in METRICS or (prefix != "max" and prefix not in FUNCTIONS):
        raise ValueError(f"not a pair-classification score mteb computes: {main_score!r}")
    return (list(FUNCTIONS) if prefix == "max" else [prefix]), metric


def build(
    task: AbsTask, predictions: dict[str, Any], hf_subset: str, split: str
) -> tuple[list[str], dict[str, Any]]:
    rows = data_split(task, hf_subset, split)
    # v1 datasets hold the whole split in one row of lists (mteb unpacks it the same way).
    labels = rows[0][task.label_column_name] if len(rows) == 1 else rows[task.label_column_name]
    labels = [int(x) for x in labels]
    functions, _ = _split_name(task.metadata.main_score)
    data: dict[str, Any] = {"label": labels}
    for name in functions:
        scores = predictions[FUNCTIONS[name][0]]
        if len(scores) != len(labels):
            raise ValueError(f"{len(scores)} predicted pairs for {len(labels)} labels")
        data[name] = compact(scores)
    return [str(i) for i in range(len(labels))], data


def metric_value(
    scores: np.ndarray, labels: np.ndarray, higher_similar: bool, metric: str
) -> float:
    """One function's metric, computed by mteb's own code (its threshold searches skip tied
    scores, which a re-implementation would have to match)."""
    if metric == "ap":  # what _compute_metrics_values computes, without the threshold searches
        return float(average_precision_score(labels, scores * (1 if higher_similar else -1)))
    if metric == "accuracy":
        return best_accuracy(scores.tolist(), labels, higher_similar)
    f1, precision, recall = best_f1(scores.tolist(), labels, higher_similar)
    return {"f1": f1, "precision": precision, "recall": recall}[metric]


def score(data: dict[str, np.ndarray], idx: np.ndarray, main_score: str) -> float:
    functions, metric = _split_name(main_score)
    labels = data["label"][idx].astype(np.int64)
    return max(
        metric_value(data[name][idx], labels, FUNCTIONS[name][1], metric) for name in functions
    )


def _ranking(scores: np.ndarray, higher_similar: bool, labels: np.ndarray) -> tuple:
    """What `_ap_block` needs of one function: the pair order by decreasing similarity (as
    sklearn sorts), the positives' positions in it, and the end of each tie run holding a positive
    (the only thresholds of sklearn's that raise the recall)."""
    oriented = scores if higher_similar else -scores
    order = np.argsort(oriented, kind="mergesort")[::-1]
    ends = np.r_[np.flatnonzero(np.diff(oriented[order])), len(order) - 1]
    positives = np.flatnonzero(labels[order] == 1)
    # each positive's tie run, by its end; runs without a positive are never named
    ends = np.unique(ends[np.searchsorted(ends, positives)])
    # positives at or above each of those ends (for the cumulative count of drawn positives)
    upto = np.searchsorted(positives, ends, side="right") - 1
    return order, positives, ends, upto


def _ap_block(counts: np.ndarray, ranking: tuple) -> np.ndarray:
    """sklearn's average_precision_score of each row's resample, from its pair counts: at each
    threshold, tps = drawn positives and ps = drawn pairs at or above it; AP is the sum of
    precision x recall step, as sklearn's step integral."""
    order, positives, ends, upto = ranking
    drawn = counts[:, order]
    ps = np.cumsum(drawn, axis=1)[:, ends].astype(np.float64)
    tps = np.cumsum(drawn[:, positives], axis=1)[:, upto].astype(np.float64)
    precision = np.divide(tps, ps, out=np.zeros_like(tps), where=ps != 0)
    with np.errstate(invalid="ignore", divide="ignore"):  # rows without a positive: see below
        recall = tps / tps[:, -1:]
    return np.maximum(0.0, np.sum(np.diff(recall, axis=1, prepend=0.0) * precision, axis=1))


def score_many(data: dict[str, np.ndarray], idx: np.ndarray, main_score: str) -> np.ndarray:
    """`score` of every row of ``idx``; AP scores are computed in blocks of resamples."""
    functions, metric = _split_name(main_score)
    if metric != "ap":  # threshold searches: mteb's own code, one resample at a time
        return each_row(score, data, idx, main_score)
    labels = data["label"].astype(np.int64)
    rankings = [_ranking(data[name], FUNCTIONS[name][1], labels) for name in functions]
    out = np.empty(len(idx))
    for rows, counts in blocks(idx, len(labels), BLOCK):
        out[rows] = np.max([_ap_block(counts, r) for r in rankings], 0)
    # A resample without a positive pair: sklearn's own answer (its recall is defined as 1).
    for i in np.flatnonzero(labels[idx].sum(axis=1) == 0):
        out[i] = score(data, idx[i], main_score)
    return out


SPEC = TypeSpec(unit="pair", build=build, score=score, score_many=score_many)
