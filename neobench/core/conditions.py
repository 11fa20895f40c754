"""Under which conditions a run was made, and the one rule for which runs may be compared.

Evaluation conditions must always match: how the model was evaluated (benchmark, instruction
profile and its hash, max length, dtype, mteb version). The training recipe must match among
the runs neobench fine-tuned; a run neobench did not fine-tune (a released model evaluated as it
is) is compared with them as "not fine-tuned". A value a card does not record reads "unknown",
the same for every reader.
"""

from __future__ import annotations

from typing import Any

EVAL = ("instructions", "instructions_sha256", "max_seq_length", "dtype", "benchmark", "mteb")
RECIPE = "recipe"
FIELDS = (RECIPE, *EVAL)
NOT_FINETUNED = "none (not fine-tuned by neobench)"
UNKNOWN = "unknown"


class Conditions(dict[str, Any]):
    """A run's conditions, field -> value (None where no card records it), read from its cards
    (neobench/core/reader.py); a field on which a run's cards disagree holds "mixed: a, b"."""

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
        return (*EVAL, *([RECIPE] if self.finetuned and other.finetuned else []))

    def differences(self, other: Conditions) -> dict[str, tuple[str, str]]:
        """The fields under which the two runs cannot be compared: field -> (self's, other's)."""
        return {
            key: (self.value(key), other.value(key))
            for key in self.compared(other)
            if self.value(key) != other.value(key)
        }


def groups(labelled: list[tuple[str, Conditions]]) -> dict[str, dict[str, list[str]]]:
    """Where several runs may not be compared, by the same rule as `Conditions.differences`:
    each evaluation field whose value differs between them, and the recipe where the fine-tuned
    ones differ. Field -> value -> the labels holding it."""
    out: dict[str, dict[str, list[str]]] = {}
    checks = [(key, labelled) for key in EVAL]
    checks.append((RECIPE, [(label, c) for label, c in labelled if c.finetuned]))
    for key, group in checks:
        values: dict[str, list[str]] = {}
        for label, conditions in group:
            values.setdefault(conditions.value(key), []).append(label)
        if len(values) > 1:
            out[key] = values
    return out
