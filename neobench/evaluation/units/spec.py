"""What each task type's units module gives the package (TypeSpec), and the helpers they share.
A leaf of the units package: it imports neither the package nor a type module (no cycle)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from datasets import Dataset
    from mteb.abstasks.abstask import AbsTask


@dataclass(frozen=True)
class TypeSpec:
    """How one task type turns into units and back into its main score."""

    unit: str
    # (task, mteb's saved predictions of one part, hf_subset, split) -> (unit ids, data arrays);
    # the task's data is loaded when it is called.
    build: Callable[[AbsTask, Any, str, str], tuple[list[str], dict[str, Any]]]
    # (data arrays, unit indices of a resample, main score name) -> the part's main score.
    score: Callable[[dict[str, np.ndarray], np.ndarray, str], float]
    # Optional: ``score`` of each row of [resamples, n] indices at once -> [resamples], for types
    # whose per-resample Python call is slow (51k-pair PairClassification).
    score_many: Callable[[dict[str, np.ndarray], np.ndarray, str], np.ndarray] | None = None
    # Types where mteb leaves out units per model (SummEval): (task, hf_subset, split) -> the
    # units the part could hold; paired tests use the units both models kept.
    rows: Callable[[AbsTask, str, str], int] | None = None


def data_split(task: AbsTask, hf_subset: str, split: str) -> Dataset:
    """The rows mteb evaluated for (subset, split), picked the way AbsTask.evaluate picks them."""
    if hf_subset not in task.dataset and hf_subset == "default":
        return task.dataset[split]
    return task.dataset[hf_subset][split]


def each_row(score: Callable[..., float], data: Any, idx: np.ndarray, name: str) -> np.ndarray:
    """``score`` of every row of ``idx`` ([resamples, n] unit indices), one call per row."""
    return np.asarray([score(data, row, name) for row in idx], dtype=float)


def blocks(idx: np.ndarray, n: int, block: int) -> Iterator[tuple[slice, np.ndarray]]:
    """The rows of ``idx`` ([resamples, n] unit indices) in blocks of about ``block`` draws, each
    with its counts: [rows, n] how many times each of the n units is drawn in each row."""
    size = max(1, block // max(1, n))
    for start in range(0, len(idx), size):
        part = idx[start : start + size]
        flat = (part + n * np.arange(len(part))[:, None]).ravel()  # row r's units at r * n + i
        counts = np.bincount(flat, minlength=len(part) * n).reshape(len(part), n)
        yield slice(start, start + size), counts
