"""One record of an evaluated run (one run folder, or the seed replicates of one fine-tune with
their ``members``), and the one way to find runs by name (`find` / `find_one`), so a name that
works for one command works for all (docs/architecture.md, "The records built on it").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neobench.core.conditions import Conditions
from neobench.core.errors import NeobenchError, unknown

# Where a user sees which names exist.
HINT = "Models found under --results are listed by `neobench table`."


@dataclass(frozen=True)
class Finetune:
    """The fine-tune a run evaluates, as its cards say; runs sharing all but ``seed`` are seed
    replicates."""

    seed: int
    base_model: str | None
    base_revision: str | None
    recipe_sha256: str


@dataclass
class Run:
    model: str
    revision: str
    experiment: str | None
    folder: Path
    scores: dict[str, float] = field(default_factory=dict)  # task -> main score in [0, 1]
    # task -> why its stored score is not shown (its file differs from its run card); not missing
    mismatched: dict[str, str] = field(default_factory=dict)
    # task -> why its conditions are unknown (no run card names it): shown, refused by compare
    card_missing: dict[str, str] = field(default_factory=dict)
    # task -> why its result file could not be read (path and error): skipped by the table with a
    # note, named by compare as the reason the task is missing
    unreadable: dict[str, str] = field(default_factory=dict)
    conditions: Conditions = field(default_factory=Conditions)
    cards: dict[str, str] = field(default_factory=dict)  # run card file -> sha256[:12]
    # The mteb tasks the model trained on (protocol/overlap.py); None = not declared, unknown
    training_datasets: frozenset[str] | None = None
    finetune: Finetune | None = None
    # task -> (sha256[:16] of its units file, the card that recorded it)
    units_digests: dict[str, tuple[str, str]] = field(default_factory=dict)
    # task -> when the eval that wrote its result started (ISO time), shown by the page
    evaluated: dict[str, str] = field(default_factory=dict)
    sweep: dict[str, Any] | None = None  # the sweep that selected the model (its cards' record)
    # task -> the shares of its units and texts found in the model's training data, as its
    # fine-tune card records them (`neobench overlap`); empty where none was measured or read
    measured_overlap: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Seed replicates: one run per seed, in seed order (empty for a single run), and the tasks
    # only some seeds hold, left out of ``scores``: task -> the seeds that hold it.
    members: list[Run] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    partial: dict[str, list[int]] = field(default_factory=dict)

    @property
    def finetuned(self) -> bool:
        return self.conditions.finetuned

    @property
    def replicated(self) -> bool:
        return bool(self.members)

    def each(self) -> list[Run]:
        """The single runs behind this one: its members, or itself."""
        return self.members or [self]

    @property
    def draw_key(self) -> str:
        """Names the members: the seeds' draws of two rows differ unless their members do not."""
        pairs = zip(self.seeds, self.members, strict=True)
        return "seeds|" + "|".join(f"{s}:{m.revision}" for s, m in pairs)

    @property
    def suffix(self) -> str:
        return f" ({len(self.seeds)} seeds)" if self.replicated else ""


def labels(runs: list[Run]) -> list[str]:
    """Model name, plus the experiment, plus "(N seeds)" for seed replicates, plus the
    revision where names would collide."""
    base = [r.model + (f" [{r.experiment}]" if r.experiment else "") + r.suffix for r in runs]
    return [
        b + (f" @{r.revision[:12]}" if base.count(b) > 1 else "")
        for b, r in zip(base, runs, strict=True)
    ]


# A JSON or CSV row names its run in these fields, so that no program parses the label (revision
# "+"-joined for seed replicates; experiment and seeds None where there are none).
NAMES = ("label", "model", "revision", "experiment", "seeds")


def identity(label: str, run: Run) -> dict[str, Any]:
    """The fields of NAMES for ``run`` shown as ``label``."""
    seeds = list(run.seeds) if run.replicated else None
    return dict(zip(NAMES, (label, run.model, run.revision, run.experiment, seeds), strict=True))


def labelled(runs: list[Run]) -> dict[str, Run]:
    return dict(zip(labels(runs), runs, strict=True))


def _matches(name: str, label: str, run: Run) -> bool:
    return name in (label, run.model)


def _unknown(what: str, name: str, found: list[tuple[str, Run]]) -> str:
    known = sorted({r.model for _, r in found} | {label for label, _ in found})
    return unknown(what, name, known, HINT)


def find(runs: list[Run], names: list[str] | None) -> list[tuple[str, Run]]:
    """The runs each of ``names`` matches (a row label, or a model name: every run of it), in
    the order found, each once; all when ``names`` is empty. Every name matching nothing is
    refused at once."""
    found = list(labelled(runs).items())
    if not names:
        return found
    problems, chosen = [], []
    for name in names:
        hits = [(label, run) for label, run in found if _matches(name, label, run)]
        if not hits:
            problems.append(_unknown("model", name, found))
        chosen += [h for h in hits if h not in chosen]
    if problems:
        raise NeobenchError(problems)
    return chosen


def find_one(found: list[tuple[str, Run]], name: str, what: str = "model") -> tuple[str, Run]:
    """The one run of ``found`` (as `find` returns them) that ``name`` matches, by `find`'s
    rule; a name matching several is refused with their labels."""
    hits = [(label, run) for label, run in found if _matches(name, label, run)]
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise NeobenchError(
            f"{what} {name!r} names {len(hits)} result folders "
            f"({', '.join(label for label, _ in hits)}); pass one of these labels."
        )
    raise NeobenchError(_unknown(what, name, found))
