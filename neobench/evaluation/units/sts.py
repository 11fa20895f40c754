"""STS units: one sentence pair each, storing the similarity of the main score (``pred``) and the
gold score normalised to [0, 1] by ``min_score``/``max_score`` (``gold``), as
AbsTaskSTS._calculate_scores: ``cosine_*`` cosine, ``manhattan_*``/``euclidean_*`` negated
distances, plain ``pearson``/``spearman`` the model's own similarity (cosine when it has none).
Spearman draws (`score_many`): docs/uncertainty.md, "What it costs".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.stats import pearsonr, spearmanr

from neobench.compat.mteb import normalized_score
from neobench.evaluation.units.spec import TypeSpec, blocks, data_split, each_row

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

# Prefix of mteb's score name -> the key of the per-pair similarity in its predictions.
SIMILARITY = {
    "": "similarity_scores",
    "cosine": "cosine_scores",
    "manhattan": "manhattan_distances",
    "euclidean": "euclidean_distances",
}
BLOCK = 2_000_000  # resamples x pairs per block of `score_many` (a few float64 arrays that size)


def compact(values: Any) -> list[float]:
    """Floats as short as exactness allows: when all are float32 values (mteb's similarities of
    float32 embeddings), the shortest decimal of each float32 (~9 digits, not 17). Order and ties
    are kept, so rank statistics are unchanged and Pearson moves by ~1e-8; else full precision."""
    full = np.asarray(values, dtype=np.float64)
    single = full.astype(np.float32)
    if not np.array_equal(single.astype(np.float64), full, equal_nan=True):
        return full.tolist()
    return [float(np.format_float_positional(v, unique=True, trim="-")) for v in single]


def split_name(
    main_score: str, prefixes: dict[str, str] = SIMILARITY, kind: str = "an STS"
) -> tuple[str, str]:
    """``cosine_spearman`` -> (``cosine``, ``spearman``); ``spearman`` -> (``""``, ``spearman``)."""
    prefix, _, correlation = main_score.rpartition("_")
    if prefix not in prefixes or correlation not in {"pearson", "spearman"}:
        raise ValueError(f"not {kind} score mteb computes: {main_score!r}")
    return prefix, correlation


def build(
    task: AbsTask, predictions: dict[str, Any], hf_subset: str, split: str
) -> tuple[list[str], dict[str, Any]]:
    prefix, _ = split_name(task.metadata.main_score)
    scores = predictions[SIMILARITY[prefix]]
    if scores is None:  # no similarity function of its own: mteb falls back to cosine
        scores = predictions["cosine_scores"]
    # The same normalisation as mteb's (float64 arithmetic, same order of operations).
    gold = [normalized_score(task, x) for x in data_split(task, hf_subset, split)["score"]]
    if len(gold) != len(scores):
        raise ValueError(f"{len(scores)} predicted pairs for {len(gold)} gold pairs")
    return [str(i) for i in range(len(gold))], {"pred": compact(scores), "gold": gold}


def score(data: dict[str, np.ndarray], idx: np.ndarray, main_score: str) -> float:
    _, correlation = split_name(main_score)
    gold, pred = data["gold"][idx], data["pred"][idx]
    # mteb's argument order (gold first): Pearson's float result depends on it at ~1e-16.
    if correlation == "spearman":
        return float(spearmanr(gold, pred)[0])
    return float(pearsonr(gold, pred)[0])


def _ties(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sort order, first sorted position of each run of equal values, each pair's run)."""
    order = np.argsort(values, kind="mergesort")
    starts = np.r_[0, np.flatnonzero(np.diff(values[order])) + 1]
    run = np.empty(len(values), dtype=np.intp)
    run[order] = np.cumsum(np.r_[1, np.diff(values[order]) != 0]) - 1
    return order, starts, run


def _midranks(counts: np.ndarray, ties: tuple) -> np.ndarray:
    """[rows, n] each pair's rank among the drawn pairs (ties get the mean of their ranks,
    as scipy's rankdata), from the pairs' draw counts."""
    order, starts, run = ties
    drawn = np.add.reduceat(counts[:, order], starts, axis=1).astype(np.float64)
    below = np.cumsum(drawn, axis=1) - drawn
    return (below + (drawn + 1) / 2)[:, run]


def score_many(data: dict[str, np.ndarray], idx: np.ndarray, main_score: str) -> np.ndarray:
    """`score` of every row of ``idx``; Spearman in blocks of resamples."""
    if split_name(main_score)[1] != "spearman":
        return each_row(score, data, idx, main_score)
    gold, pred = _ties(data["gold"]), _ties(data["pred"])
    centre = (idx.shape[1] + 1) / 2  # the mean rank of any m values
    out = np.empty(len(idx))
    for rows, counts in blocks(idx, len(data["gold"]), BLOCK):
        a, b = _midranks(counts, gold) - centre, _midranks(counts, pred) - centre
        with np.errstate(invalid="ignore", divide="ignore"):  # all tied: nan, as scipy
            out[rows] = np.sum(counts * a * b, axis=1) / np.sqrt(
                np.sum(counts * a * a, axis=1) * np.sum(counts * b * b, axis=1)
            )
    return out


SPEC = TypeSpec(unit="pair", build=build, score=score, score_many=score_many)
