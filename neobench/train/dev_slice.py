"""Held-out selection data: a seeded slice of each training dataset that is never trained on.
The draw, what the card records and why: docs/recipe.md, "The dev slice". DEV_STREAM is a
stream tag no other draw uses (the sampler's are 0x6E62, 0x7065).
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from neobench.protocol.data import BuiltDataset
from neobench.protocol.manifest import Row

if TYPE_CHECKING:
    from datasets import Dataset

# The slice takes at most this share of a dataset's distinct queries: a small dataset keeps
# most of its rows for training whatever dev_rows says.
DEV_SHARE = 0.1
DEV_STREAM = 0x646576  # "dev"
# Bump when the draw or the metric changes: dev numbers of two versions are not comparable.
DEV_VERSION = 1
ID_HEX = 16


@dataclass
class DevSlice:
    """The held-out part of one dataset: its rows (same columns as training) and their ids."""

    key: str
    dataset: Dataset
    ids: list[str]  # sorted ids of the held-out queries

    @property
    def digest(self) -> str:
        """sha256 of the sorted ids, one per line."""
        return hashlib.sha256("\n".join(sorted(self.ids)).encode()).hexdigest()


def row_id(query: str) -> str:
    """The id of a row: a hash of its query text (rows of one query share it)."""
    return hashlib.sha256(query.encode("utf-8")).hexdigest()[:ID_HEX]


def held_out(distinct_queries: int, dev_rows: int) -> int:
    """How many queries a dataset gives to its slice."""
    return min(dev_rows, int(distinct_queries * DEV_SHARE))


def draw_ids(ids: list[str], n: int, seed: int, key: str) -> list[str]:
    """``n`` of the distinct ``ids``, drawn as the module docstring says; sorted."""
    distinct = sorted(set(ids))
    key_hash = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
    rng = np.random.default_rng([seed, DEV_STREAM, key_hash])
    picked = rng.choice(len(distinct), size=n, replace=False)
    return sorted(distinct[int(i)] for i in picked)


def split_dev(built: BuiltDataset, dev_rows: int, seed: int) -> tuple[BuiltDataset, DevSlice]:
    """(the dataset left for training, its dev slice). Rows keep their order in both."""
    ids = [row_id(q) for q in built.dataset["query"]]
    chosen = set(draw_ids(ids, held_out(len(set(ids)), dev_rows), seed, built.key))
    dev_at = [i for i, r in enumerate(ids) if r in chosen]
    train_at = [i for i, r in enumerate(ids) if r not in chosen]
    train = dataclasses.replace(built, dataset=built.dataset.select(train_at))
    dev = DevSlice(built.key, built.dataset.select(dev_at), sorted(chosen))
    return train, dev


def split_problems(rows: list[Row], dev_rows: int) -> list[str]:
    """A slice is selection data only if it comes from training data: a hub row that declares
    mteb tasks in_domain must read a train split, never the split an evaluation reads."""
    if dev_rows == 0:
        return []
    return [
        f"dataset {r.key} reads split {r.split!r} of {r.repo_id}, the data of mteb task(s) "
        f"{', '.join(r.in_domain)}; its dev slice would come from it. Point the manifest row at "
        "the train split, or drop the dataset with datasets=KEY,KEY."
        for r in rows
        if r.in_domain and not r.data_files and r.split != "train"
    ]


def split_all(
    built: dict[str, BuiltDataset], dev_rows: int, seed: int
) -> tuple[dict[str, BuiltDataset], dict[str, DevSlice]]:
    """Every dataset split; with dev_rows = 0 (off) the data is left as it is, no slice."""
    if dev_rows == 0:
        return built, {}
    pairs = {key: split_dev(b, dev_rows, seed) for key, b in built.items()}
    return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}


def slice_record(slices: dict[str, DevSlice], dev_rows: int, seed: int) -> dict[str, object]:
    """The card's `dev` section when the run starts: what was held out, and how (no value yet).
    Two runs' dev values are comparable when their `definition` and `digest` are equal."""
    datasets = {
        key: {"queries": len(s.ids), "rows": len(s.dataset), "digest": s.digest}
        for key, s in slices.items()
    }
    overall = hashlib.sha256(
        "\n".join(f"{k} {d['digest']}" for k, d in sorted(datasets.items())).encode()
    ).hexdigest()
    return {
        "metric": "mrr@10",
        "value": None,
        "definition": {
            "version": DEV_VERSION,
            "dev_rows": dev_rows,
            "max_share": DEV_SHARE,
            "seed": seed,
            "id": f"sha256(query)[:{ID_HEX}]",
            "metrics": ["mrr@10", "accuracy@1"],
            "mean": "macro over datasets",
        },
        "digest": overall,
        "datasets": datasets,
    }
