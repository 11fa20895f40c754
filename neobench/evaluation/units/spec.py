"""What each task type's units module gives the package: how to build its units from mteb's
predictions and how to score them (TypeSpec), and the draw counts several types share.

A leaf of the units package: the type modules and the package itself import it, it imports
neither, so the package has no import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
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
    # Optional: the same for many resamples at once ([resamples, n] indices -> [resamples]
    # scores), for types whose per-resample Python call is slow (51k-pair PairClassification);
    # it must give what ``score`` gives on each row.
    score_many: Callable[[dict[str, np.ndarray], np.ndarray, str], np.ndarray] | None = None
    # Only for types where mteb leaves out, per model, units it cannot score (SummEval's texts
    # whose summaries all get one score): (task, hf_subset, split) -> the units the part could
    # hold. Two models' files then list different units, and paired tests use those both kept.
    rows: Callable[[AbsTask, str, str], int] | None = None


def draw_counts(idx: np.ndarray, n: int) -> np.ndarray:
    """[rows, n] how many times each of n units is drawn in each row of ``idx``: the form of a
    block of resamples that `TypeSpec.score_many` functions compute on."""
    rows = len(idx)
    flat = (idx + n * np.arange(rows)[:, None]).ravel()
    return np.bincount(flat, minlength=rows * n).reshape(rows, n)
