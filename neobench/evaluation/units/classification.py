"""Classification units: one test item each, ``gold`` and ``pred`` (one label per experiment,
(n_items, n_experiments), in test-split order as mteb's predictions file); a resample's score is
the mean over experiments of the metric on the resampled items. Cross-validated tasks
(``is_cross_validation``: none in MTEB(eng, v1/v2)) predict each item once, in its fold's
experiment; there an item also carries its ``fold``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.metrics import average_precision_score, f1_score, precision_score, recall_score
from sklearn.model_selection import KFold

from neobench.evaluation.units.spec import TypeSpec, data_split, each_row

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

Metric = Callable[[np.ndarray, np.ndarray], float]


def _accuracy(gold: np.ndarray, pred: np.ndarray) -> float:
    # sklearn's accuracy_score is np.average(gold == pred): numpy directly is quicker.
    return float(np.mean(gold == pred))


def _averaged(fn: Callable[..., float], average: str) -> Metric:
    return lambda gold, pred: float(fn(gold, pred, average=average))


# mteb's ClassificationMetrics, computed as AbsTaskClassification._calculate_scores does.
METRICS: dict[str, Metric] = {
    "accuracy": _accuracy,
    "f1": _averaged(f1_score, "macro"),
    "f1_weighted": _averaged(f1_score, "weighted"),
    "precision": _averaged(precision_score, "macro"),
    "precision_weighted": _averaged(precision_score, "weighted"),
    "recall": _averaged(recall_score, "macro"),
    "recall_weighted": _averaged(recall_score, "weighted"),
    # Only for binary tasks; mteb feeds the predicted labels (not probabilities) to it.
    "ap": _averaged(average_precision_score, "macro"),
    "ap_weighted": _averaged(average_precision_score, "weighted"),
}


def _as_codes(gold: list[Any], pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Labels as ints for compact JSON; other labels (strings) become their sorted rank among all
    labels: accuracy, f1, precision and recall do not change under a one-to-one relabelling, and
    the sorted order keeps which of two labels is the positive one for ap."""
    gold_arr = np.asarray(gold)
    if np.issubdtype(gold_arr.dtype, np.integer) and np.issubdtype(pred.dtype, np.integer):
        return gold_arr.astype(np.int64), pred.astype(np.int64)
    _, codes = np.unique(np.concatenate([gold_arr.ravel(), pred.ravel()]), return_inverse=True)
    return codes[: gold_arr.size], codes[gold_arr.size :].reshape(pred.shape)


def _cross_validation(
    task: AbsTask, predictions: list[list[Any]], gold: list[Any]
) -> tuple[list[str], dict[str, Any]]:
    """Cross-validated tasks: experiment i predicts only fold i's items, so an item carries its
    fold and its one prediction; the folds are KFold's, seeded as mteb seeds them."""
    splitter = KFold(n_splits=task.n_splits, shuffle=True, random_state=task.seed)
    fold = np.empty(len(gold), dtype=np.int64)
    pred: list[Any] = [None] * len(gold)
    for i, (_, val_idx) in enumerate(splitter.split(range(len(gold)))):
        fold[val_idx] = i
        for j, label in zip(val_idx, predictions[i], strict=True):
            pred[j] = label
    gold_codes, pred_codes = _as_codes(gold, np.asarray(pred)[:, None])
    return [str(i) for i in range(len(gold))], {
        "gold": gold_codes,
        "pred": pred_codes,
        "fold": fold,
    }


def build(
    task: AbsTask, predictions: list[list[Any]], hf_subset: str, split: str
) -> tuple[list[str], dict[str, Any]]:
    gold = data_split(task, hf_subset, split)[task.label_column_name]
    if task.is_cross_validation:
        return _cross_validation(task, predictions, gold)
    pred = np.asarray(predictions).T  # (n_experiments, n_items) -> (n_items, n_experiments)
    if pred.shape[0] != len(gold):
        raise ValueError(
            f"{task.metadata.name} {hf_subset}/{split}: {pred.shape[0]} predictions per "
            f"experiment for {len(gold)} test items"
        )
    gold_codes, pred_codes = _as_codes(gold, pred)
    return [str(i) for i in range(len(gold))], {"gold": gold_codes, "pred": pred_codes}


def score(data: dict[str, np.ndarray], idx: np.ndarray, main_score: str) -> float:
    """Mean over experiments of the main metric on the items ``idx`` (cross-validated: mean over
    folds of the metric on the resampled items of each fold)."""
    metric = METRICS[main_score]
    gold, pred = data["gold"][idx], data["pred"][idx]
    if "fold" in data:
        fold = data["fold"][idx]
        per_fold = [metric(gold[fold == f], pred[fold == f, 0]) for f in np.unique(fold)]
        return float(np.mean(per_fold))
    return float(np.mean([metric(gold, pred[:, e]) for e in range(pred.shape[1])]))


def score_many(data: dict[str, np.ndarray], idx: np.ndarray, main_score: str) -> np.ndarray:
    """`score` of every row of ``idx``. Accuracy (the usual main score) needs only how many of
    its experiments got each item right: one gather per resample instead of one per experiment
    (AmazonPolarity: 400,000 items x 10 experiments)."""
    if main_score != "accuracy" or "fold" in data:
        return each_row(score, data, idx, main_score)
    pred = data["pred"]
    # items right per item (uint8 for 10 experiments: the gather is memory-bound)
    right = (data["gold"][:, None] == pred).sum(axis=1).astype(np.min_scalar_type(pred.shape[1]))
    return right[idx].sum(axis=1) / (idx.shape[1] * pred.shape[1])


SPEC = TypeSpec(unit="item", build=build, score=score, score_many=score_many)
