"""Seed replicates: the runs of one fine-tune that differ only in its seed (model name,
experiment, base model and revision, recipe hash and conditions shared), as one Run whose
``members`` are the single runs in seed order. What the row shows: docs/uncertainty.md, "Seed
replicates: a two-level bootstrap". A seed evaluated twice counts once (the first found).
"""

from __future__ import annotations

import logging
from statistics import fmean

import numpy as np

from neobench.core.conditions import Conditions
from neobench.core.runs import Run

logger = logging.getLogger(__name__)


def merge(runs: list[Run]) -> tuple[list[Run], list[str]]:
    """``runs`` with each group of seed replicates replaced by one Run (where its first member
    was), and the notes on what was merged, left out or counted once."""
    groups: dict[tuple, list[tuple[int, Run]]] = {}
    for run in runs:
        key = _shared(run)
        if key is not None and run.finetune is not None:
            groups.setdefault(key, []).append((run.finetune.seed, run))
    merged: dict[int, Run] = {}  # id of the first member -> its row
    dropped: set[int] = set()
    notes: list[str] = []
    for group in groups.values():
        kept = _once_per_seed(group, notes)
        if len(kept) < 2:
            continue
        merged[id(kept[0][1])] = _replicates(kept, notes)
        dropped |= {id(run) for _, run in group}
    out = [merged.get(id(run), run) for run in runs]
    return [r for r in out if id(r) not in dropped], notes


def seed_sd(per_seed: list[list[float]]) -> float:
    """Standard deviation (n - 1) over seeds of each seed's mean over ``per_seed[seed]``, its
    scores of the same tasks."""
    return float(np.std(np.mean(np.asarray(per_seed, dtype=float), axis=1), ddof=1))


def _shared(run: Run) -> tuple | None:
    """What the replicates of one fine-tune share; None for a run that is not one."""
    tune = run.finetune
    if tune is None:
        return None
    conditions = tuple(sorted((k, str(v)) for k, v in run.conditions.items()))
    base = (tune.base_model, tune.base_revision, tune.recipe_sha256)
    return (run.model, run.experiment, *base, conditions)


def _once_per_seed(group: list[tuple[int, Run]], notes: list[str]) -> list[tuple[int, Run]]:
    """The group's runs by seed, the first of each seed kept; a repeated seed is named."""
    kept: dict[int, Run] = {}
    for seed, run in group:
        if seed not in kept:
            kept[seed] = run
            continue
        message = (
            f"{run.model}: seed {seed} was evaluated twice ({kept[seed].folder} and "
            f"{run.folder}); the first is kept as that seed's replicate, the second left out."
        )
        logger.warning(message)
        notes.append(message)
    return sorted(kept.items())


def _replicates(kept: list[tuple[int, Run]], notes: list[str]) -> Run:
    seeds = [s for s, _ in kept]
    runs = [r for _, r in kept]
    first = runs[0]
    shared = sorted(set.intersection(*(set(r.scores) for r in runs)))
    # A task some seed holds only as a changed file is not partial: it is mismatched.
    changed = set().union(*(set(r.mismatched) for r in runs))
    partial = {
        task: [s for s, r in kept if task in r.scores]
        for task in sorted(set.union(*(set(r.scores) for r in runs)) - set(shared) - changed)
    }
    row = Run(
        model=first.model,
        # where two rows share a label, its first 12 characters tell them apart (runs.labels)
        revision="+".join(r.revision for r in runs),
        experiment=first.experiment,
        folder=first.folder,
        scores={t: fmean(r.scores[t] for r in runs) for t in shared},
        conditions=Conditions(first.conditions),
        training_datasets=first.training_datasets,
        cards={f"seed {s}: {n}": h for s, r in kept for n, h in r.cards.items()},
        finetune=first.finetune,
        sweep=first.sweep,  # the seeds of a selected point share the sweep's record
        measured_overlap=first.measured_overlap,  # one manifest for every seed
        members=runs,
        seeds=seeds,
        partial=partial,
        # a seed's result that differs from its card is not averaged in: the row names it
        mismatched={t: why for r in runs for t, why in r.mismatched.items()},
        unreadable={t: why for r in runs for t, why in r.unreadable.items()},
    )
    if partial:
        lacking = "; ".join(
            f"{task} (seeds {', '.join(map(str, held))} only)" for task, held in partial.items()
        )
        notes.append(
            f"{row.model}{row.suffix}: tasks not evaluated for every seed are left out of the "
            f"row: {lacking}. Evaluate them for the other seeds to include them."
        )
    return row
