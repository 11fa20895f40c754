"""Under which conditions a run was made, and the one rule for which runs may be compared:
SCORING always, the recipe among fine-tuned runs; the benchmark is recorded, not compared
(docs/architecture.md, "The records built on it"). An unrecorded value reads "unknown".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from neobench.core.cards import EvalCard


@dataclass(frozen=True)
class Condition:
    """One condition, and the rules it takes part in."""

    name: str
    # How a model was evaluated, as every row records it (the recipe: how it was fine-tuned).
    evaluation: bool
    # Changes a task's score: must match for two rows to be compared at all (the recipe: among
    # fine-tuned rows only, `Conditions.compared`).
    scoring: bool
    # `neobench eval` requires it of the earlier runs of a results folder it adds to.
    folder: bool
    # Set by a `neobench eval` flag: a study gives it to every eval job and pins it (the
    # benchmark is given, not pinned: a result serves every benchmark holding its task).
    flag: bool = False


# The one declaration of the conditions; the tuples below are views of it.
DECLARED = (
    Condition("recipe", evaluation=False, scoring=False, folder=False),
    Condition("instructions", evaluation=True, scoring=True, folder=True, flag=True),
    Condition("instructions_sha256", evaluation=True, scoring=True, folder=True),
    Condition("max_seq_length", evaluation=True, scoring=True, folder=True, flag=True),
    Condition("dtype", evaluation=True, scoring=True, folder=True, flag=True),
    Condition("benchmark", evaluation=True, scoring=False, folder=False, flag=True),
    Condition("mteb", evaluation=True, scoring=True, folder=False),
)
RECIPE = "recipe"
EVAL = tuple(c.name for c in DECLARED if c.evaluation)
SCORING = tuple(c.name for c in DECLARED if c.scoring)
FIELDS = tuple(c.name for c in DECLARED)
FOLDER = tuple(c.name for c in DECLARED if c.folder)
# The flags in the order a study's eval jobs give them (the benchmark first: commands already
# planned keep their text), and those it pins.
FLAGS = ("benchmark", *(c.name for c in DECLARED if c.flag and c.name != "benchmark"))
PINNED = FLAGS[1:]
NOT_FINETUNED = "none (not fine-tuned by neobench)"
SWEEP = "sweep:"  # the recipe condition of a row a sweep selected: sweep:<hash of the sweep>
# The keys of Conditions.record, the conditions of every JSON and CSV row.
RECORD = ("finetuned", "recipe_sha256", *EVAL)
UNKNOWN = "unknown"


class Conditions(dict[str, Any]):
    """A run's conditions, field -> value (None where no card records it; "mixed: a, b" where
    its cards disagree)."""

    @classmethod
    def from_card(cls, card: EvalCard) -> Conditions:
        """The fields of one eval card, from its typed sections (a renamed key fails here)."""
        conditions = card.conditions
        return cls(
            {
                RECIPE: _recipe(card),
                "instructions": conditions.instructions,
                "instructions_sha256": (conditions.instructions_sha256 or "")[:12] or None,
                "max_seq_length": conditions.max_seq_length,
                "dtype": conditions.dtype,
                "benchmark": card.benchmark,
                "mteb": card.mteb_version,
            }
        )

    @classmethod
    def asked(cls, flags: Mapping[str, Any]) -> Conditions:
        """The conditions a command was asked for: its flag values (a card's ``config``, a
        study's eval section), before the model resolves them (``max_seq_length: model``)."""
        return cls({name: flags.get(name) for name in FLAGS})

    def record(self) -> dict[str, Any]:
        """The RECORD fields for a program: finetuned, its recipe hash (None when not
        fine-tuned), each evaluation field (None where `value` reads "unknown")."""
        recipe = self.get(RECIPE) if self.finetuned else None
        return {
            "finetuned": self.finetuned,
            "recipe_sha256": recipe,
            **{k: None if self.value(k) == UNKNOWN else self.get(k) for k in EVAL},
        }

    @property
    def finetuned(self) -> bool:
        """Fine-tuned by `neobench finetune` (its cards name a recipe)."""
        return self.get(RECIPE) not in (None, NOT_FINETUNED)

    def value(self, key: str) -> str:
        """The field as text; "unknown" where no card records it."""
        found = self.get(key)
        return UNKNOWN if found is None else str(found)

    def compared(self, other: Conditions) -> tuple[str, ...]:
        """The fields that must match between ``self`` and ``other``."""
        return (*SCORING, *([RECIPE] if self.finetuned and other.finetuned else []))

    def differences(
        self, other: Conditions, fields: Iterable[str] | None = None, *, known: bool = False
    ) -> dict[str, tuple[str, str]]:
        """Field -> (self's, other's) where they differ, over ``fields`` (default: `compared`);
        ``known``: a field ``self`` does not record is not held against it."""
        keys = self.compared(other) if fields is None else tuple(fields)
        return {
            key: (self.value(key), other.value(key))
            for key in keys
            if not self.same(other, key) and not (known and self.get(key) is None)
        }

    def same(self, other: Conditions, key: str) -> bool:
        """The one rule two values of a condition are compared by: as text, an unrecorded one
        reading "unknown" (a length of 512 in one card and "512" in a flag are the same)."""
        return self.value(key) == other.value(key)


def _recipe(card: EvalCard) -> str:
    """The recipe hash; for a model a sweep selected, the sweep's hash (recipe, grid, rule), so
    its rows compare with each other, never with fixed-recipe rows."""
    sweep = card.model.sweep
    if isinstance(sweep, dict) and sweep.get("sha256"):
        return f"{SWEEP}{str(sweep['sha256'])[:12]}"
    return (card.model.recipe_sha256 or "")[:12] or NOT_FINETUNED


def groups(labelled: list[tuple[str, Conditions]]) -> dict[str, dict[str, list[str]]]:
    """Where several runs may not be compared (the rule of `Conditions.same`, over the fields
    `Conditions.compared` names): field -> value -> the labels holding it, for each scoring
    field and, among fine-tuned runs, recipe."""
    out: dict[str, dict[str, list[str]]] = {}
    checks = [(key, labelled) for key in SCORING]
    checks.append((RECIPE, [(label, c) for label, c in labelled if c.finetuned]))
    for key, group in checks:
        values: dict[str, list[str]] = {}
        for label, conditions in group:
            values.setdefault(conditions.value(key), []).append(label)
        if len(values) > 1:
            out[key] = values
    return out
