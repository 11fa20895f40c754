"""`neobench table --ranks`: each row's rank on a column with a 95% interval, and compact letter
groups, from the paired tests of report/stats.py between every two rows (one family per column,
Holm-adjusted). The method and its calibration: docs/uncertainty.md, "Ranks and groups".

A row's interval runs from 1 + the rows significantly above it to N - the rows significantly
below it: where no test of the family is a false positive (at least 95% of the time, by Holm's
control of the family-wise error), every row's interval holds its true rank, all at once. Rows
sharing a letter are not significantly different; two rows without a common letter are.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from neobench.core.errors import NeobenchError
from neobench.report import bootstrap, stats

LETTERS = string.ascii_lowercase + string.ascii_uppercase


@dataclass(frozen=True)
class Rank:
    point: int  # 1 + the rows whose score is higher (ties share the better rank)
    low: int  # the 95% interval of the rank
    high: int
    group: str  # compact letters: rows sharing one are not significantly different

    def text(self) -> str:
        interval = str(self.low) if self.low == self.high else f"{self.low}–{self.high}"
        return f"{self.point} [{interval}]"


FIELDS = ("rank", "rank_ci_low", "rank_ci_high", "group")


def fields(found: Rank | None, prefix: str = "") -> dict[str, int | str | None]:
    """A rank as the fields of a CSV, JSON or DataFrame row (None where the row is unranked):
    ``rank``, ``rank_ci_low``, ``rank_ci_high``, ``group``, each after ``prefix``."""
    values = (found.point, found.low, found.high, found.group) if found else (None,) * 4
    return {prefix + name: value for name, value in zip(FIELDS, values, strict=True)}


def least_resamples(rows: int, alpha: float) -> int:
    """The fewest resamples under which Holm's correction over ``rows``' pairs can reject at
    all: the smallest bootstrap p, 1 / (resamples + 1), must fall below alpha / pairs."""
    pairs = rows * (rows - 1) // 2
    return math.floor(pairs / alpha + 1e-9)


def check(rows: int, settings: stats.Settings) -> None:
    """Refuse resamples too few for the family of ``rows``' pairs: no pair could ever differ."""
    needed = least_resamples(rows, settings.alpha)
    if rows > 1 and settings.resamples < needed:
        pairs = rows * (rows - 1) // 2
        raise NeobenchError(
            f"--ranks: {rows} ranked rows make {pairs} pairs; Holm's correction asks the "
            f"smallest p to fall below {settings.alpha:g}/{pairs}, and {settings.resamples:,} "
            f"resamples give no p below 1/{settings.resamples + 1:,}. Pass --resamples "
            f"{needed:,} or more (the time grows with it), or rank fewer rows with --models."
        )


def rank_column(
    sides: dict[str, stats.Side], names: list[str], column: str, settings: stats.Settings
) -> dict[str, Rank]:
    """The ranks of the rows of ``sides`` on the tasks of ``names`` (the column's) that they
    all hold, by their mean score on those: the rows that can be resampled there are ranked,
    the others get none."""
    names = [n for n in names if all(n in side.scores for side in sides.values())]
    if not names:
        return {}
    ranked = {
        label: side
        for label, side in sides.items()
        if stats.column_draws(side, names, column, settings) is not None
    }
    points = {label: float(np.mean([s.scores[n] for n in names])) for label, s in ranked.items()}
    labels = sorted(ranked, key=lambda label: -points[label])  # stable: the table's order on ties
    pairs = list(combinations(labels, 2))
    found = [stats.test(ranked[a], ranked[b], names, column, settings) for a, b in pairs]
    tested = [(pair, test) for pair, test in zip(pairs, found, strict=True) if test is not None]
    adjusted = bootstrap.holm([test.paired.p for _, test in tested]) if tested else []
    different = {
        frozenset(pair)
        for (pair, test), p in zip(tested, adjusted, strict=True)
        if p < settings.alpha and test.delta != 0
    }
    return ranks_of(points, different)


def ranks_of(points: dict[str, float], different: set[frozenset[str]]) -> dict[str, Rank]:
    """Each row's rank by its score in ``points`` (ties: the table's order), its interval and
    letters, given the pairs found significantly ``different`` (Holm over every pair)."""
    labels = sorted(points, key=lambda label: -points[label])
    letters = compact_letters(labels, different)
    out = {}
    for label in labels:
        differs = [o for o in labels if frozenset((label, o)) in different]
        above = sum(points[o] > points[label] for o in differs)
        below = sum(points[o] < points[label] for o in differs)
        point = 1 + sum(points[o] > points[label] for o in labels)
        out[label] = Rank(point, 1 + above, len(labels) - below, letters[label])
    return out


def compact_letters(order: list[str], different: set[frozenset[str]]) -> dict[str, str]:
    """Letters for ``order`` (best first) such that two rows share a letter exactly when they
    are not in ``different`` (Piepho's insert-and-absorb: start from one group of all, split
    every group holding a different pair into the group without each of the two, drop the
    groups another holds). Groups are lettered by their best row, "a" the best."""
    groups: list[frozenset[str]] = [frozenset(order)] if order else []
    position = {label: i for i, label in enumerate(order)}
    for pair in sorted(different, key=lambda p: sorted(position[x] for x in p)):
        a, b = sorted(pair, key=position.__getitem__)
        split: list[frozenset[str]] = []
        for group in groups:
            split += [group - {a}, group - {b}] if pair <= group else [group]
        groups = _absorbed(split)
    groups.sort(key=lambda g: sorted(position[x] for x in g))
    letters: dict[str, list[str]] = {label: [] for label in order}
    for k, group in enumerate(groups):
        for label in group:
            letters[label].append(_letter(k))
    return {label: "".join(found) for label, found in letters.items()}


def _absorbed(groups: list[frozenset[str]]) -> list[frozenset[str]]:
    """The groups no other group holds (duplicates once)."""
    unique = list(dict.fromkeys(g for g in groups if g))
    return [g for g in unique if not any(g < other for other in unique)]


def _letter(k: int) -> str:
    return LETTERS[k] if k < len(LETTERS) else f"({k + 1})"
