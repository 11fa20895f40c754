"""Under which conditions a run was made, and the one rule for which runs may be compared.

Evaluation conditions must always match: the ones that change a task's score (instruction
profile and its hash, max length, dtype, mteb version). The benchmark a run was evaluated for is
recorded but not compared: a task result serves every benchmark that holds the task (each reads
the splits and subsets it asks for), so one results folder may hold several benchmarks' runs.
The training recipe must match among the runs neobench fine-tuned; a run neobench did not
fine-tune (a released model evaluated as it is) is compared with them as "not fine-tuned". A
value a card does not record reads "unknown", the same for every reader.
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
# What one results folder holds fixed: `neobench eval` refuses to add to a folder whose earlier
# runs differ on one of these (a folder may hold several benchmarks and mteb versions).
FOLDER = ("instructions", "instructions_sha256", "max_seq_length", "dtype")
# The `neobench eval` flags that set the conditions: a study gives them once for every eval job
# and refuses a finished eval made with other values.
FLAGS = ("benchmark", "instructions", "max_seq_length", "dtype")
NOT_FINETUNED = "none (not fine-tuned by neobench)"
SWEEP = "sweep:"  # the recipe condition of a row a sweep selected: sweep:<hash of the sweep>
# The keys of Conditions.record, the conditions of every JSON and CSV row.
RECORD = ("finetuned", "recipe_sha256", *EVAL)
UNKNOWN = "unknown"


class Conditions(dict[str, Any]):
    """A run's conditions, field -> value (None where no card records it), read from its cards
    (neobench/core/reader.py); a field on which a run's cards disagree holds "mixed: a, b"."""

    @classmethod
    def from_card(cls, card: EvalCard) -> Conditions:
        """The fields of one eval run card, read from its typed sections (a renamed key fails
        here, at type-check and test time, instead of turning into None)."""
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
        """The fields as a program reads them (the RECORD keys): whether neobench fine-tuned the
        model and its recipe hash (first 12 hex; None when not fine-tuned), then each evaluation
        field as the cards hold it (None where no card records it: what `value` reads as
        "unknown")."""
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
        """The field as text; no card and a card too old to record it both read "unknown"."""
        found = self.get(key)
        return UNKNOWN if found is None else str(found)

    def compared(self, other: Conditions) -> tuple[str, ...]:
        """The fields that must match between ``self`` and ``other``."""
        return (*SCORING, *([RECIPE] if self.finetuned and other.finetuned else []))

    def differences(
        self, other: Conditions, fields: Iterable[str] | None = None, *, known: bool = False
    ) -> dict[str, tuple[str, str]]:
        """The fields on which the two differ: field -> (self's, other's). ``fields`` default to
        the ones two rows must share (`compared`); ``known``: a field ``self`` does not record
        (an older card) is not held against it."""
        keys = self.compared(other) if fields is None else tuple(fields)
        return {
            key: (self.value(key), other.value(key))
            for key in keys
            if self.value(key) != other.value(key) and not (known and self.get(key) is None)
        }


def _recipe(card: EvalCard) -> str:
    """The recipe condition: the fine-tune's recipe hash; for a model a sweep selected, the
    sweep's hash (recipe, grid and rule): its rows differ from each other in the value chosen,
    and are compared with each other, never with fixed-recipe rows."""
    sweep = card.model.sweep
    if isinstance(sweep, dict) and sweep.get("sha256"):
        return f"{SWEEP}{str(sweep['sha256'])[:12]}"
    return (card.model.recipe_sha256 or "")[:12] or NOT_FINETUNED


def groups(labelled: list[tuple[str, Conditions]]) -> dict[str, dict[str, list[str]]]:
    """Where several runs may not be compared, by the same rule as `Conditions.differences`:
    each evaluation field whose value differs between them, and the recipe where the fine-tuned
    ones differ. Field -> value -> the labels holding it."""
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
