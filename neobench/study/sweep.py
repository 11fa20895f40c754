"""Sweeps: a study's fine-tunes at several values of recipe keys, one point chosen per backbone on
the dev slice before anything of it is evaluated (the rule, the record OUTPUT/sweeps/<model>.json
and why: docs/studies.md, "Sweeps").
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path

from neobench.core.card_io import now
from neobench.core.errors import NeobenchError, collect
from neobench.core.selection import RULE, VERSION, Selection

SENSITIVITY = "sensitivity"  # OUTPUT/sensitivity/: results of the points not selected (all)


@dataclass(frozen=True)
class Point:
    """One combination of the swept values (key -> value as the command line gives it)."""

    values: tuple[tuple[str, str], ...]

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.values)

    @property
    def slug(self) -> str:
        """The point as part of a folder name and a job key."""
        return "_".join(f"{k}-{v}" for k, v in self.values).replace("/", "-").replace(" ", "")

    @property
    def overrides(self) -> dict[str, str]:
        return dict(self.values)


def points(grid: dict[str, list[str]]) -> list[Point]:
    """Every combination, in the file's order (the first key varies slowest)."""
    keys = list(grid)
    return [
        Point(tuple(zip(keys, combo, strict=True))) for combo in itertools.product(*grid.values())
    ]


def sweep_problems(recipe: str, overrides: dict[str, str], grid: dict[str, list[str]]) -> list[str]:
    """Each point's overrides as `neobench finetune` would apply them, and a dev slice to select
    on (the recipe's dev_rows > 0)."""
    from neobench.protocol.recipe import apply_overrides, load_recipe

    found: list[str] = []
    base = collect(found, load_recipe, recipe)
    if base is None:
        return []  # the recipe's own problem is reported by the study's recipe check
    for point in points(grid):
        collect(found, apply_overrides, base, {**overrides, **point.overrides})
    given = collect([], apply_overrides, base, overrides)
    if given is not None and not given.values.dev_rows:
        found.append(
            "a sweep selects on the dev slice: set finetune.overrides.dev_rows (e.g. 256 "
            "queries held out of each training dataset)."
        )
    return [f"finetune.sweep: {p}" for p in dict.fromkeys(found)]


def sweep_sha256(recipe: str, overrides: dict[str, str], grid: dict[str, list[str]]) -> str:
    """What "selected by this sweep" means, as one hash: the recipe with the fixed overrides (its
    own hash), the grid and the rule."""
    from neobench.protocol.recipe import apply_overrides, load_recipe

    base = apply_overrides(load_recipe(recipe), overrides)
    canonical = json.dumps(
        {"recipe": base.sha256, "grid": grid, "rule": RULE, "version": VERSION}, sort_keys=True
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def select(
    model: str, sha256: str, grid: dict[str, list[str]], folders: dict[Point, dict[int, Path]]
) -> Selection:
    """The point with the highest mean dev metric over its seeds, from the fine-tunes' cards
    only (``folders``: point -> seed -> its finished fine-tune). A card without the metric, or
    seeds whose slices differ between points, is a NeobenchError: no silent choice."""
    from neobench.core.cards import finetune_dev

    rows, metric, digests = [], None, {}
    for point, seeds in folders.items():
        values: dict[str, float] = {}
        for seed, folder in sorted(seeds.items()):
            dev = finetune_dev(folder)
            if dev is None or dev.value is None or not math.isfinite(float(dev.value)):
                raise NeobenchError(
                    f"{folder}: a finished fine-tune of the sweep without a dev metric in its "
                    "card (stopped while it scored the dev slice?); remove that folder and run "
                    "the study again to fine-tune that point anew."
                )
            if digests.setdefault(seed, dev.digest) != dev.digest:
                raise NeobenchError(
                    f"{folder}: its dev slice differs from the other points' of seed {seed} "
                    "(another dev_rows or training data?); the points cannot be compared."
                )
            metric = dev.metric
            values[str(seed)] = float(dev.value)
        mean = sum(values.values()) / len(values)
        folder_text = {str(s): str(f) for s, f in sorted(seeds.items())}
        row = {"label": point.label, "values": dict(point.values), "mean": mean, "seeds": values}
        rows.append(row | {"folders": folder_text})
    best = max(range(len(rows)), key=lambda i: (rows[i]["mean"], -i))
    return Selection(model, sha256, grid, str(metric), RULE, rows[best]["label"], rows, now())
