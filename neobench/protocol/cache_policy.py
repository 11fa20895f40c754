"""Which tasks' embeddings the cache stores (``--cache-policy``), decided task by task from the
run's plan; every policy but ``off`` reads whatever is there, and none changes a score. The
policies and what they cost: docs/performance.md, "What it stores: a cache that costs what it
saves". Small tasks are stored whole because their texts repeat (clustering, reranking
candidates, STS) and a re-run asks for all of them again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neobench.core.errors import NeobenchError, read_yaml

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

CACHE_POLICIES = ("reusable", "all", "off")
DEFAULT_POLICY = "reusable"
# A task of at most this many distinct texts is stored whole under `reusable`.
SMALL_TASK_TEXTS = 200_000
SHARED_FILE = Path(__file__).with_name("shared_texts.yaml")
# Classification trains on samples_per_label texts of each label, in n_experiments draws.
CLASSIFICATION_DEFAULTS = {"samples_per_label": 8, "n_experiments": 10}


@dataclass(frozen=True)
class SharedTexts:
    """Tasks that ask for the same texts on one side (document: the corpus)."""

    tasks: tuple[str, ...]
    side: str
    source: str


@dataclass(frozen=True)
class StoreDecision:
    """Whether a task's new embeddings are stored, and why (recorded in the run card)."""

    store: bool
    why: str


@functools.cache
def shared_texts() -> tuple[SharedTexts, ...]:
    """The entries of shared_texts.yaml."""
    entries = read_yaml(SHARED_FILE, "shared texts") or []
    out = []
    for entry in entries:
        if not isinstance(entry, dict) or not {"tasks", "side", "source"} <= set(entry):
            raise NeobenchError(f"{SHARED_FILE}: each entry needs tasks, side and source.")
        out.append(SharedTexts(tuple(entry["tasks"]), str(entry["side"]), str(entry["source"])))
    return tuple(out)


def task_texts(task: AbsTask) -> int | None:
    """Distinct texts the task asks for by mteb's descriptive statistics (its eval splits and
    subsets; the training texts a classifier draws, at most); None without statistics."""
    subtasks = getattr(task, "tasks", None)
    if subtasks:  # an aggregate (CQADupstackRetrieval): the sum of its parts
        parts = [task_texts(t) for t in subtasks]
        return None if None in parts else sum(parts)
    stats = task.metadata.descriptive_stats
    if not stats:
        return None
    total = 0
    for split in task.eval_splits:
        split_stats = stats.get(split)
        if not split_stats:
            return None
        by_subset = split_stats.get("hf_subset_descriptive_stats") or {}
        subsets = [s for s in getattr(task, "hf_subsets", None) or [] if s in by_subset]
        parts = [by_subset[s] for s in subsets] if subsets else [split_stats]
        total += sum(_split_texts(part, task.metadata.type, task) for part in parts)
    return total


def _split_texts(stats: dict[str, Any], task_type: str, task: AbsTask) -> int:
    """Distinct texts of one split (or subset): the unique texts of each text column."""
    unique = [
        value["unique_texts"]
        for key, value in stats.items()
        if key.endswith("statistics") and isinstance(value, dict) and "unique_texts" in value
    ]
    texts = sum(unique) if unique else int(stats.get("num_samples") or 0)
    if task_type == "Classification":
        labels = (stats.get("label_statistics") or {}).get("unique_labels") or 0
        draws = {k: getattr(task, k, v) for k, v in CLASSIFICATION_DEFAULTS.items()}
        texts += draws["samples_per_label"] * draws["n_experiments"] * int(labels)
    return texts


def decide(
    policy: str,
    task: AbsTask,
    later: Iterable[str],
    prompt_of: Callable[[str, str], str | None],
) -> StoreDecision:
    """Whether ``task``'s new embeddings are stored under ``policy``. ``later``: the run's tasks
    still to run after it; ``prompt_of(task, side)``: the prompt of a task's texts of that side."""
    if policy == "off":
        return StoreDecision(False, "cache off")
    if policy == "all":
        return StoreDecision(True, "policy all")
    name = task.metadata.name
    waiting = set(later) - {name}
    for entry in shared_texts():
        if name not in entry.tasks:
            continue
        for partner in entry.tasks:
            if partner in waiting and prompt_of(partner, entry.side) == prompt_of(name, entry.side):
                return StoreDecision(True, f"shared: {partner} reads its {entry.side}s later")
    texts = task_texts(task)
    if texts is not None and texts <= SMALL_TASK_TEXTS:
        return StoreDecision(True, f"small: {texts:,} texts")
    size = "unknown size" if texts is None else f"{texts:,} texts"
    return StoreDecision(False, f"large ({size}), read by no later task of the run")
