"""Seed replicates: the runs of one fine-tune that differ only in its seed, shown as one row.

`neobench finetune --seeds 0,1,2` writes one model folder per seed under one model name; each
evaluation records the fine-tune's seed, base model and recipe hash in its run card (the model
section). Runs that share the model name, the experiment (evaluation conditions), the base
model (name and revision), the recipe hash and every condition the table compares, and whose
seeds differ, merge into one `Replicates` row:

- its scores are the mean over the seeds, over the tasks every seed holds; a task only some
  seeds hold is left out of the row (a note names it and the seeds that lack it);
- the seed standard deviation of every task and column is computed from the members;
- its intervals and paired tests resample seeds, then items (bootstrap.replicate_draws).

A seed evaluated twice (the same fine-tune in two results roots, or re-trained into another
folder) counts once: the first run found is kept and a warning names the one left out.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from statistics import fmean, stdev
from typing import TYPE_CHECKING

import numpy as np

from neobench.core import cards as record
from neobench.core.runs import Run
from neobench.evaluate import units
from neobench.evaluate.units import TaskUnits
from neobench.report import bootstrap

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

    from neobench.report.table import LeaderTable

AVG = "Avg."  # the table's benchmark column (neobench.report.table imports this module)

logger = logging.getLogger(__name__)


@dataclass
class Replicates(Run):
    """A Run whose scores are means over seed replicates; ``folder`` is the first member's."""

    members: list[Run] = field(default_factory=list)  # one run per seed, in seed order
    seeds: list[int] = field(default_factory=list)
    partial: dict[str, list[int]] = field(default_factory=dict)  # task -> seeds that hold it

    @property
    def draw_key(self) -> str:
        """Names the members: the seeds' draws of two rows differ unless their members do not."""
        pairs = zip(self.seeds, self.members, strict=True)
        return "seeds|" + "|".join(f"{s}:{m.revision}" for s, m in pairs)


def label_suffix(run: Run) -> str:
    """What a replicate row's label adds to the model name (table.labels_for)."""
    return f" ({len(run.seeds)} seeds)" if isinstance(run, Replicates) else ""


def members(run: Run) -> list[Run]:
    return run.members if isinstance(run, Replicates) else [run]


# ---------------------------------------------------------------------------------- merging


def merge(runs: list[Run]) -> tuple[list[Run], list[str]]:
    """``runs`` with each group of seed replicates replaced by one Replicates (where its first
    member was), and the notes that say what was merged, left out or counted once."""
    groups: dict[tuple, list[tuple[int, Run]]] = {}
    for run in runs:
        found = _identity(run)
        if found is not None:
            groups.setdefault(found[1], []).append((found[0], run))
    merged: dict[int, Run] = {}  # id of the first member -> its row
    dropped: set[int] = set()
    notes: list[str] = []
    for group in groups.values():
        kept = _once_per_seed(group, notes)
        if len(kept) < 2:
            continue
        row = _replicates(kept, notes)
        merged[id(kept[0][1])] = row
        dropped |= {id(run) for _, run in group}
    # The merged row takes its first member's place; the other members leave the list.
    out = [merged.get(id(run), run) for run in runs]
    return [r for r in out if id(r) not in dropped], notes


def _identity(run: Run) -> tuple[int, tuple] | None:
    """(seed, what the replicates share) from the run's cards; None for a run that is not a
    neobench fine-tune with a recorded seed, or whose cards disagree on it."""
    found = set()
    for path in sorted((run.folder / "neobench").glob("run-*.yaml")):
        try:
            model = record.read_eval_card(path).model
        except Exception:  # an unreadable card is already reported by results.load_runs
            continue
        found.add((model.finetune_seed, model.base_model, model.base_revision, model.recipe_sha256))
    if len(found) != 1:
        return None
    seed, base, base_revision, recipe = found.pop()
    if seed is None or recipe is None:
        return None
    conditions = tuple(sorted((k, str(v)) for k, v in run.conditions.items()))
    return int(seed), (run.model, run.experiment, base, base_revision, recipe, conditions)


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


def _replicates(kept: list[tuple[int, Run]], notes: list[str]) -> Replicates:
    seeds = [s for s, _ in kept]
    runs = [r for _, r in kept]
    first = runs[0]
    shared = sorted(set.intersection(*(set(r.scores) for r in runs)))
    partial = {
        task: [s for s, r in kept if task in r.scores]
        for task in sorted(set.union(*(set(r.scores) for r in runs)) - set(shared))
    }
    row = Replicates(
        model=first.model,
        # The members' revisions: where two rows share a label, its first 12 characters (the
        # first member's) tell them apart (table.labels_for).
        revision="+".join(r.revision for r in runs),
        experiment=first.experiment,
        folder=first.folder,
        scores={t: fmean(r.scores[t] for r in runs) for t in shared},
        conditions=dict(first.conditions),
        # Every seed trained on the same data (same recipe): the first member's declaration.
        training_datasets=first.training_datasets,
        cards={f"seed {s}: {n}": h for s, r in kept for n, h in r.cards.items()},
        members=runs,
        seeds=seeds,
        partial=partial,
    )
    name = row.model + label_suffix(row)
    if partial:
        lacking = "; ".join(
            f"{task} (seeds {', '.join(map(str, held))} only)" for task, held in partial.items()
        )
        notes.append(
            f"{name}: tasks not evaluated for every seed are left out of the row: {lacking}. "
            "Evaluate them for the other seeds to include them."
        )
    return row


# ---------------------------------------------------------------------------------- numbers


def seed_sd(run: Replicates, tasks: list[str]) -> float | None:
    """Standard deviation over the seeds (n - 1 denominator) of each seed's mean over ``tasks``
    (scores in [0, 1]); None unless every task is in the row."""
    if not tasks or any(t not in run.scores for t in tasks):
        return None
    return stdev(fmean(m.scores[t] for t in tasks) for m in run.members)


def member_units(run: Run, task: str) -> list[TaskUnits] | None:
    """The task's units of every member, in the first member's unit order (so that index b
    names the same item for every seed); None when a member has no units file. Where mteb
    leaves units out per model (SummEval), every member is cut to the units all of them kept."""
    paths = [units.path_for(m.folder, task) for m in members(run)]
    if not all(p.is_file() for p in paths):
        return None
    found = [units.read(p) for p in paths]
    return found if len(found) == 1 else bootstrap.on_units(bootstrap.common(found), found)


def combine(run: Run, per_seed: list[np.ndarray], resamples: int, seed: int) -> np.ndarray:
    """A row's draws from its members' draws: the members' own for a single run, the
    two-level draws (seeds, then items) for replicates."""
    if len(per_seed) == 1:
        return per_seed[0]
    return bootstrap.replicate_draws(np.stack(per_seed), resamples, seed, run.draw_key)


def task_draws(run: Run, resamples: int, seed: int) -> dict[str, np.ndarray]:
    """Task -> the row's B resampled main scores, for the tasks every member saved units of."""
    out = {}
    for task in sorted(run.scores):
        found = member_units(run, task)
        if found is not None:
            per_seed = [bootstrap.task_draws(u, resamples, seed) for u in found]
            out[task] = combine(run, per_seed, resamples, seed)
    return out


# ---------------------------------------------------------------------------------- table


def annotate(table: LeaderTable, runs: dict[str, Run], tasks: list[AbsTask], *, ci: bool) -> None:
    """Each replicate row's seed sd in its cells, its member folders in the sources, and the
    note that says what the numbers of such a row are."""
    replicate_rows = [r for r in table.rows if isinstance(runs.get(r.label), Replicates)]
    for row in replicate_rows:
        run = runs[row.label]
        for column, names in table.columns(tasks).items():
            sd = seed_sd(run, [n for n in names if n in run.scores])
            if sd is not None and (column != AVG or row.avg is not None):
                row.sd[column] = 100 * sd
        pairs = zip(run.seeds, run.members, strict=True)
        row.source = "; ".join(f"seed {s}: {m.folder}" for s, m in pairs)
        table.sources = [
            f"{row.label}: {row.source}" if line.startswith(f"{row.label}: ") else line
            for line in table.sources
        ]
    if replicate_rows:
        table.notes.append(_legend(ci))


def _legend(ci: bool) -> str:
    text = (
        "Rows '(N seeds)': one fine-tune (same base model, recipe and evaluation conditions) "
        "run with N seeds; each cell is the mean over the seeds of that cell's score, and "
        "'sd' is the standard deviation over the seeds of the same cell (each seed's own "
        "average of the cell's tasks; n - 1 denominator), x100."
    )
    if ci:
        text += (
            " Their ± comes from a two-level bootstrap: on each resample the seeds are drawn "
            "with replacement, then each drawn seed's items; so it includes the seed-to-seed "
            "variance."
        )
    return text
