"""STS units: one sentence pair each; the main score is a correlation over the pairs.

mteb (AbsTaskSTS._calculate_scores) correlates the gold scores, normalised to [0, 1] by the task's
``min_score``/``max_score``, with one similarity per pair: ``cosine_*`` with cosine similarity,
``manhattan_*``/``euclidean_*`` with the negated distances, and plain ``pearson``/``spearman``
with the model's own similarity (cosine when the model has none). A part stores, per pair, the
similarity of the task's main score (``pred``) and the normalised gold score (``gold``).

The helpers `data_split` and `compact` are shared with the other pair-type modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.stats import pearsonr, spearmanr

from neobench.units import TypeSpec

if TYPE_CHECKING:
    from datasets import Dataset
    from mteb.abstasks.abstask import AbsTask

# Prefix of mteb's score name -> the key of the per-pair similarity in its predictions.
SIMILARITY = {
    "": "similarity_scores",
    "cosine": "cosine_scores",
    "manhattan": "manhattan_distances",
    "euclidean": "euclidean_distances",
}


def data_split(task: AbsTask, hf_subset: str, split: str) -> Dataset:
    """The rows mteb evaluated for (subset, split), picked the way AbsTask.evaluate picks them."""
    if hf_subset not in task.dataset and hf_subset == "default":
        return task.dataset[split]
    return task.dataset[hf_subset][split]


def compact(values: Any) -> list[float]:
    """Floats as short as exactness allows.

    mteb's similarities come from float32 embeddings, so each is a float32 value held in a
    float64 (17 digits in JSON). When all are, they are rewritten as the shortest decimal that
    reads back as the same float32 (about 9 digits): distinct values stay distinct and in the same
    order, ties stay ties, so rank statistics (Spearman, AP, best thresholds) are unchanged and
    value statistics (Pearson) move by ~1e-8. Anything else is kept at full precision.
    """
    full = np.asarray(values, dtype=np.float64)
    single = full.astype(np.float32)
    if not np.array_equal(single.astype(np.float64), full, equal_nan=True):
        return full.tolist()
    return [float(np.format_float_positional(v, unique=True, trim="-")) for v in single]


def _split_name(main_score: str) -> tuple[str, str]:
    """``cosine_spearman`` -> (``cosine``, ``spearman``); ``spearman`` -> (``""``, ``spearman``)."""
    prefix, _, correlation = main_score.rpartition("_")
    if prefix not in SIMILARITY or correlation not in {"pearson", "spearman"}:
        raise ValueError(f"not an STS score mteb computes: {main_score!r}")
    return prefix, correlation


def build(
    task: AbsTask, predictions: dict[str, Any], hf_subset: str, split: str
) -> tuple[list[str], dict[str, Any]]:
    prefix, _ = _split_name(task.metadata.main_score)
    scores = predictions[SIMILARITY[prefix]]
    if scores is None:  # no similarity function of its own: mteb falls back to cosine
        scores = predictions["cosine_scores"]
    # The same normalisation as mteb's (float64 arithmetic, same order of operations).
    gold = [task._normalize(x) for x in data_split(task, hf_subset, split)["score"]]
    if len(gold) != len(scores):
        raise ValueError(f"{len(scores)} predicted pairs for {len(gold)} gold pairs")
    return [str(i) for i in range(len(gold))], {"pred": compact(scores), "gold": gold}


def score(data: dict[str, np.ndarray], idx: np.ndarray, main_score: str) -> float:
    _, correlation = _split_name(main_score)
    gold, pred = data["gold"][idx], data["pred"][idx]
    # mteb's argument order (gold first): Pearson's float result depends on it at ~1e-16.
    if correlation == "spearman":
        return float(spearmanr(gold, pred)[0])
    return float(pearsonr(gold, pred)[0])


SPEC = TypeSpec(unit="pair", build=build, score=score)
