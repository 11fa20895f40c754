"""Under which conditions a run was made, and the one rule for which runs may be compared:
SCORING always, the recipe among fine-tuned runs; the benchmark is recorded, not compared
(docs/architecture.md, "The records built on it"). An unrecorded value reads "unknown".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from neobench.core.cards import EvalCard

# How a model was evaluated, as every row records it.
EVAL = ("instructions", "instructions_sha256", "max_seq_length", "dtype", "benchmark", "mteb")
# What changes a task's score: must match for two rows to be compared at all.
SCORING = ("instructions", "instructions_sha256", "max_seq_length", "dtype", "mteb")
RECIPE = "recipe"
FIELDS = (RECIPE, *EVAL)
# What `neobench eval` requires of the earlier runs of a results folder it adds to.
FOLDER = ("instructions", "instructions_sha256", "max_seq_length", "dtype")
# The `neobench eval` flags that set the conditions (a study gives them to every eval job).
FLAGS = ("benchmark", "instructions", "max_seq_length", "dtype")
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
            if self.value(key) != other.value(key) and not (known and self.get(key) is None)
        }


def _recipe(card: EvalCard) -> str:
    """The recipe hash; for a model a sweep selected, the sweep's hash (recipe, grid, rule), so
    its rows compare with each other, never with fixed-recipe rows."""
    sweep = card.model.sweep
    if isinstance(sweep, dict) and sweep.get("sha256"):
        return f"{SWEEP}{str(sweep['sha256'])[:12]}"
    return (card.model.recipe_sha256 or "")[:12] or NOT_FINETUNED


def groups(labelled: list[tuple[str, Conditions]]) -> dict[str, dict[str, list[str]]]:
    """Where several runs may not be compared (the rule of `Conditions.differences`): field ->
    value -> the labels holding it, for each scoring field and, among fine-tuned runs, recipe."""
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
