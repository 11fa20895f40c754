"""Per-item units: what a task's main score is a function of, one file per task beside its result
(``<results>/predictions/<Task>.units.json``), for bootstrap intervals and paired tests. Per type,
what a unit is and stores: docs/uncertainty.md, "What each evaluation keeps: per-item units".

The file format (one module per type below, each a `TypeSpec`)::

    {"format": 1, "task": "STSBenchmark", "type": "STS", "main_score": "cosine_spearman",
     "unit": "pair", "parts": [{"subset": "default", "split": "test", "n": 1379,
                                "ids": [...], "data": {"pred": [...], "gold": [...]}}]}

A part is one (hf_subset, split); the main score is the mean of the parts' scores. ``ids`` name
the units, so two models' files can be checked to cover the same items; ``data`` holds arrays with
one entry (or row) per unit, which the type's ``score`` turns, on a resample of unit indices, into
the main score. Only where they apply: ``subtask`` (a part of an aggregate task; its score is the
mean over subtasks) and ``rows`` (the units a part could hold, where the evaluation drops units
per model: SummEval).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from neobench.core import results
from neobench.evaluation.units.spec import TypeSpec, each_row

__all__ = ["TypeSpec"]  # the type modules take it from .spec; callers may take it from here

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

FORMAT = 1
FOLDER = results.UNITS


@dataclass
class Part:
    subset: str
    split: str
    ids: list[str]
    data: dict[str, np.ndarray]  # name -> array whose first axis is the unit
    subtask: str | None = None  # the part's task inside an aggregate (None: the task itself)
    # `TypeSpec.rows`: the units the part could have held; None when absent.
    rows: int | None = None

    @property
    def n(self) -> int:
        return len(self.ids)


@dataclass
class TaskUnits:
    task: str
    type: str
    main_score: str  # mteb's name of the task's main score
    unit: str  # what one unit is: pair, text, item, query, set
    parts: list[Part] = field(default_factory=list)


def drops_units(task_type: str) -> bool:
    """Whether two models may hold different units of one part of this type's tasks."""
    return task_type in registry() and registry()[task_type].rows is not None


@functools.cache
def registry() -> dict[str, TypeSpec]:
    """Task type (mteb's metadata.type) -> its spec. A type missing here has no intervals."""
    from neobench.evaluation.units import (
        classification,
        clustering,
        pair_classification,
        retrieval,
        sts,
        summarization,
    )

    return {
        "STS": sts.SPEC,
        "Summarization": summarization.SPEC,
        "PairClassification": pair_classification.SPEC,
        "Classification": classification.SPEC,
        "Clustering": clustering.SPEC,
        "Retrieval": retrieval.SPEC,
        "Reranking": retrieval.RERANKING_SPEC,
    }


def supported(task_type: str) -> bool:
    return task_type in registry()


def build(task: AbsTask, predictions: dict[str, dict[str, Any]], main_score: str) -> TaskUnits:
    """Units of a whole task from mteb's predictions file content ({subset: {split: ...}}; for an
    aggregate, {subtask name: that subtask's file content})."""
    if getattr(task, "is_aggregate", False):
        return _build_aggregate(task, predictions, main_score)
    spec = registry()[task.metadata.type]
    units = TaskUnits(task.metadata.name, task.metadata.type, main_score, spec.unit)
    for subset in task.hf_subsets:
        for split in task.eval_splits:
            ids, data = spec.build(task, predictions[subset][split], subset, split)
            arrays = {k: np.asarray(v) for k, v in data.items()}
            rows = spec.rows(task, subset, split) if spec.rows else None
            units.parts.append(Part(subset, split, [str(i) for i in ids], arrays, rows=rows))
    return units


def _build_aggregate(task: AbsTask, predictions: dict[str, Any], main_score: str) -> TaskUnits:
    """The subtasks' parts in mteb's order, each marked with its subtask. mteb averages the
    subtasks' own main scores under the aggregate's name, so they must be one metric."""
    unit = registry()[task.metadata.type].unit
    units = TaskUnits(task.metadata.name, task.metadata.type, main_score, unit)
    for sub in task.tasks:
        name, meta = sub.metadata.name, sub.metadata
        if (meta.type, meta.main_score) != (task.metadata.type, main_score):
            raise ValueError(
                f"subtask {name} is {meta.type} scored by {meta.main_score}, the aggregate "
                f"{task.metadata.type} scored by {main_score}: their mean has no units"
            )
        built = build(sub, predictions[name], main_score)
        units.parts += [replace(part, subtask=name) for part in built.parts]
    return units


def combine(units: TaskUnits, per_part: Sequence[Any]) -> Any:
    """The task's score from its parts' scores (floats, or arrays of draws), as mteb combines
    them: the mean over parts; for an aggregate, the mean over subtasks of their parts' mean."""
    groups: dict[str | None, list[Any]] = {}
    for part, value in zip(units.parts, per_part, strict=True):
        groups.setdefault(part.subtask, []).append(value)
    return np.mean([np.mean(values, axis=0) for values in groups.values()], axis=0)


def part_score(units: TaskUnits, part: Part, idx: np.ndarray | None = None) -> float:
    """One part's main score on the units ``idx`` (all of them when None)."""
    idx = np.arange(part.n) if idx is None else idx
    return float(registry()[units.type].score(part.data, idx, units.main_score))


def part_scores(units: TaskUnits, part: Part, idx: np.ndarray) -> np.ndarray:
    """One part's main score on each row of ``idx`` ([resamples, n] unit indices)."""
    spec = registry()[units.type]
    if spec.score_many is not None:
        return np.asarray(spec.score_many(part.data, idx, units.main_score), dtype=float)
    return each_row(spec.score, part.data, idx, units.main_score)


def main_score(units: TaskUnits) -> float:
    """The task's main score recomputed from its units (equals mteb's)."""
    return float(combine(units, [part_score(units, p) for p in units.parts]))


def path_for(results_dir: Path, task: str) -> Path:
    """Where a run folder keeps the task's units (the results layout: core/results.py)."""
    return results.units_path(results_dir, task)


def to_json(units: TaskUnits) -> str:
    # TaskUnits' fields in their order, after the format; the parts as _part_json writes them
    content = {"format": FORMAT, **vars(units), "parts": [_part_json(p) for p in units.parts]}
    return json.dumps(content, separators=(",", ":"))


def _part_json(part: Part) -> dict[str, Any]:
    # "subtask" and "rows" only where they apply
    named = {"subtask": part.subtask} if part.subtask is not None else {}
    rows = {"rows": part.rows} if part.rows is not None else {}
    return named | {
        "subset": part.subset,
        "split": part.split,
        "n": part.n,
        **rows,
        "ids": part.ids,
        "data": {k: v.tolist() for k, v in part.data.items()},
    }


def read(path: Path) -> TaskUnits:
    raw = json.loads(Path(path).read_text())
    parts = []
    for p in raw["parts"]:
        data = {k: np.asarray(v) for k, v in p["data"].items()}
        parts.append(Part(p["subset"], p["split"], p["ids"], data, p.get("subtask"), p.get("rows")))
    return TaskUnits(raw["task"], raw["type"], raw["main_score"], raw["unit"], parts)
