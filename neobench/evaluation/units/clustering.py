"""Clustering units: what mteb averages over, in each of its two clustering task families.

- Legacy (AbsTaskClusteringLegacy, MTEB(eng, v1)): unit = clustering set, storing its V-measure
  (``score``) recomputed from the saved assignment and gold labels. With a single set (or a
  non-text task: one flat assignment) unit = item, storing ``gold`` and ``pred`` (cluster id).
- Fast (AbsTaskClustering, the ``.v2`` tasks): unit = k-means run over one of mteb's
  ``n_clusters`` draws, storing one score per level (``score``, (n_runs, n_levels)). The
  predictions hold only the assignments, so the draws are replayed from the seed (`_replay_fast`).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

import numpy as np
from mteb.abstasks.clustering import AbsTaskClustering
from mteb.abstasks.clustering_legacy import AbsTaskClusteringLegacy
from scipy.optimize import linear_sum_assignment
from sklearn import metrics

from neobench.evaluation.units.spec import TypeSpec, data_split

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask


def _cluster_accuracy(gold: np.ndarray, pred: np.ndarray) -> float:
    # As AbsTaskClusteringLegacy._compute_metrics: best one-to-one matching of clusters to labels.
    matrix = metrics.confusion_matrix(gold, pred)
    rows, cols = linear_sum_assignment(matrix, maximize=True)
    return float(matrix[rows, cols].sum() / len(gold))


METRICS = {
    "v_measure": metrics.cluster.v_measure_score,
    "ami": metrics.cluster.adjusted_mutual_info_score,
    "nmi": metrics.cluster.normalized_mutual_info_score,
    "ari": metrics.cluster.adjusted_rand_score,
    "cluster_accuracy": _cluster_accuracy,
}


def _metric(task: AbsTask, gold: Any, pred: Any) -> float:
    return float(METRICS[task.metadata.main_score](gold, pred))


def _legacy_sets(task: AbsTask, sets: Any, predictions: list[list[int]]) -> list[float]:
    """One score per set, in set order; a set with a single label scores 1.0 and has no saved
    assignment (mteb skips its k-means), hence the walk in order."""
    assignments = iter(predictions)
    scores = []
    for cluster_set in sets:
        gold = cluster_set[task.label_column_name]
        scores.append(1.0 if len(set(gold)) <= 1 else _metric(task, gold, next(assignments)))
    if next(assignments, None) is not None:
        raise ValueError(f"{task.metadata.name}: more saved assignments than clustering sets")
    return scores


def _items(gold: list[Any], pred: list[int]) -> tuple[list[str], dict[str, Any]]:
    if len(gold) != len(pred):
        raise ValueError(f"{len(pred)} cluster assignments for {len(gold)} items")
    _, gold_codes = np.unique(np.asarray(gold), return_inverse=True)  # ints, for compact JSON
    return [str(i) for i in range(len(gold))], {"gold": gold_codes, "pred": np.asarray(pred)}


def _build_legacy(
    task: AbsTaskClusteringLegacy, predictions: list[Any], rows: Any
) -> tuple[list[str], dict[str, Any]]:
    label = task.label_column_name
    if task.metadata.modalities != ["text"]:  # mteb clusters the whole split at once
        return _items(rows[label], predictions)
    if len(rows) == 1:
        gold = rows[0][label]
        pred = predictions[0] if predictions else [0] * len(gold)  # skipped: one label
        return _items(gold, pred)
    scores = _legacy_sets(task, rows, predictions)
    return [f"set{i}" for i in range(len(scores))], {"score": scores}


def _downsample(task: AbsTaskClustering, rows: Any, rng: random.Random) -> Any:
    """The documents mteb embeds (AbsTaskClustering._evaluate_subset), drawing from ``rng``."""
    if task.max_document_to_embed is None and task.max_fraction_of_documents_to_embed is None:
        return rows
    if task.max_fraction_of_documents_to_embed is not None:
        k = int(task.max_fraction_of_documents_to_embed * len(rows))
    else:
        k = task.max_document_to_embed
    return rows.select(rng.sample(range(len(rows)), k=min(len(rows), k)))


def _level_labels(task: AbsTaskClustering, documents: Any) -> list[np.ndarray]:
    """Gold labels per hierarchy level, as _evaluate_clustering_bootstrapped builds them
    (including its quirks: -1 marks a missing level; compared elementwise, as mteb does)."""
    labels = [x if isinstance(x, list) else [x] for x in documents[task.label_column_name]]
    depth = max(map(len, labels))
    depth = depth if task.max_depth is None else min(task.max_depth, depth)
    levels = []
    for level in range(depth):
        level_labels = np.array([x[level] if len(x) > level else -1 for x in labels])
        valid = np.array([x != -1 for x in level_labels])
        levels.append(level_labels[valid])
    return levels


def _replay_part(task: AbsTaskClustering, rows: Any, rng: random.Random) -> list[list[Any]]:
    """Gold labels of the documents each run drew: [level][run] -> labels."""
    levels = _level_labels(task, _downsample(task, rows, rng))
    size = task.max_documents_per_cluster
    return [
        [gold[rng.choices(range(len(gold)), k=size)] for _ in range(task.n_clusters)]
        for gold in levels
    ]


def reset_draws(task: AbsTask) -> None:
    """Re-seed the task's draws as at its creation (mteb seeds them once), before mteb.evaluate
    of a task object that may have run before: `build` replays one evaluation's draws."""
    task.rng_state = random.Random(task.seed)


def _replay_fast(task: AbsTaskClustering, hf_subset: str, split: str) -> list[list[Any]]:
    """Replay mteb's draws for this part: a fresh Random(task.seed) walked through every part in
    mteb's order (split, then subset); ending in the task's own rng_state proves the replay."""
    rng = random.Random(task.seed)
    parts = {}
    for s in task.eval_splits:
        for subset in task.hf_subsets:
            parts[subset, s] = _replay_part(task, data_split(task, subset, s), rng)
    if rng.getstate() != task.rng_state.getstate():
        raise ValueError(
            f"{task.metadata.name}: the task's random draws are not those of one evaluation of "
            "all its parts from its seed (evaluated twice, or only some parts?); call "
            "neobench.evaluation.units.clustering.reset_draws(task) before mteb.evaluate and "
            "build the units right after it"
        )
    return parts[hf_subset, split]


def _build_fast(
    task: AbsTaskClustering, predictions: dict[str, list[list[int]]], hf_subset: str, split: str
) -> tuple[list[str], dict[str, Any]]:
    draws = _replay_fast(task, hf_subset, split)
    levels = [f"Level {i}" for i in range(len(draws))]
    if sorted(predictions) != sorted(levels):
        raise ValueError(f"{task.metadata.name}: saved levels {sorted(predictions)} != {levels}")
    scores = np.empty((task.n_clusters, len(levels)))  # (run, level)
    for j, level in enumerate(levels):
        for run, (gold, pred) in enumerate(zip(draws[j], predictions[level], strict=True)):
            scores[run, j] = _metric(task, gold, pred)
    return [f"run{i}" for i in range(task.n_clusters)], {"score": scores}


def build(
    task: AbsTask, predictions: Any, hf_subset: str, split: str
) -> tuple[list[str], dict[str, Any]]:
    if isinstance(task, AbsTaskClusteringLegacy):
        return _build_legacy(task, predictions, data_split(task, hf_subset, split))
    if isinstance(task, AbsTaskClustering):
        return _build_fast(task, predictions, hf_subset, split)
    raise TypeError(f"{task.metadata.name}: unknown clustering task class {type(task).__name__}")


def score(data: dict[str, np.ndarray], idx: np.ndarray, main_score: str) -> float:
    """Items: the metric on the resampled items. Sets or runs: the mean of their scores (over
    runs and levels for fast tasks, as mteb's flat mean)."""
    if "gold" in data:
        return float(METRICS[main_score](data["gold"][idx], data["pred"][idx]))
    return float(np.mean(data["score"][idx]))


SPEC = TypeSpec(unit="set", build=build, score=score)
