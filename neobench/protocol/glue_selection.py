"""The GLUE protocol's selection rule: per task, the grid point whose mean selection score over
its seeds is highest (ties: the first point in key order). It reads each run card's ``selection``
section only, never ``validation``: with select_on: heldout that is a slice of the training split.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import fmean
from typing import Any


@dataclass
class Selected:
    task: str
    key: str | None  # None: no point has a complete run yet
    score: float | None  # the chosen point's mean selection score
    seeds: list[int] = field(default_factory=list)
    candidates: dict[str, float] = field(default_factory=dict)  # point key -> mean score
    missing: int = 0  # runs of the grid not complete (the choice may still change)


def select(task: str, cards: list[dict[str, Any]], expected: int) -> Selected:
    """``cards``: the task's complete run cards; ``expected``: the runs its grid x seeds has."""
    by_point: dict[str, list[dict[str, Any]]] = {}
    for card in cards:
        by_point.setdefault(card["key"], []).append(card)
    means = {k: fmean(c["selection"]["score"] for c in v) for k, v in sorted(by_point.items())}
    if not means:
        return Selected(task, None, None, missing=expected)
    best = max(means, key=lambda k: (means[k], -sorted(means).index(k)))
    seeds = sorted(c["seed"] for c in by_point[best])
    return Selected(task, best, means[best], seeds, means, max(0, expected - len(cards)))
