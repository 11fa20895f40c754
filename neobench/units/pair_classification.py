"""PairClassification units: one labelled pair each; the main score ranks all pairs at once.

mteb (AbsTaskPairClassification._compute_metrics) scores the pairs with five functions (the
model's own similarity, cosine, Manhattan and Euclidean distances, dot product) and reports, per
function, average precision (sklearn's) and the best accuracy / F1 (with its precision and recall)
over thresholds; ``max_<metric>`` is the maximum over the five. The v1 tasks' main score is
``max_ap``. A part stores the label of each pair and the score of each function the main score
needs (all five for ``max_*``), in mteb's orientation (distances are not negated: for them a
lower score means more similar). Every metric depends only on the order of the scores, so the
float32-exact short form (`sts.compact`) keeps them exact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from mteb.abstasks.pair_classification import AbsTaskPairClassification
from sklearn.metrics import average_precision_score

from neobench.units import TypeSpec
from neobench.units.sts import compact, data_split

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
    # Those two methods never read ``self`` (mteb marks them PLR6301), so no task is built here.
    searches = AbsTaskPairClassification
    if metric == "accuracy":
        return float(
            searches._find_best_acc_and_threshold(None, scores.tolist(), labels, higher_similar)[0]
        )
    f1, precision, recall, _ = searches._find_best_f1_and_threshold(
        None, scores.tolist(), labels, higher_similar
    )
    return float({"f1": f1, "precision": precision, "recall": recall}[metric])


def score(data: dict[str, np.ndarray], idx: np.ndarray, main_score: str) -> float:
    functions, metric = _split_name(main_score)
    labels = data["label"][idx].astype(np.int64)
    return max(
        metric_value(data[name][idx], labels, FUNCTIONS[name][1], metric) for name in functions
    )


SPEC = TypeSpec(unit="pair", build=build, score=score)
