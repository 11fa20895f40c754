"""The recipe's steps before a run: each dataset's heaviest step at the recipe's shape, its peak
memory per device (models/memory.py) and, over a budget, the GradCache chunk the fine-tune will
run it in (train/memory_budget.py decides the same way, step by step). Torch-free: the dry runs
plan with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from neobench.models import memory
from neobench.models.memory import Column, Precision, Step
from neobench.protocol.recipe_values import RecipeValues
from neobench.protocol.tasks import CHARS_PER_TOKEN

# A packed step's texts, planned at this percentile of their column's measured lengths: a heavy
# step (the fine-tune decides each step from its real lengths).
PACKED_PERCENTILE = "p90"


@dataclass(frozen=True)
class Budget:
    """Bytes a step may use on one device, and how that figure was set."""

    bytes: float
    source: str

    @property
    def text(self) -> str:
        return f"{memory.gib(self.bytes)} ({self.source})"


@dataclass(frozen=True)
class Plan:
    """What a step of one dataset will do under a budget: its plain peak and, over the budget,
    the GradCache chunk (texts) and the chunked peak; ``chunk`` None and ``fits`` False: not
    even one text at a time fits."""

    step: Step
    plain: float  # bytes
    chunk: int | None = None
    chunked: float | None = None
    one_text: float = 0.0  # bytes: the step in chunks of one text, the least it can take

    @property
    def fits(self) -> bool:
        return self.chunk is not None or self.chunked is None


def recipe_step(
    values: RecipeValues,
    world: int,
    lengths: dict[str, Any] | None,
    negatives: int,
    instruction: str,
    packed: bool = False,
) -> Step:
    """The heaviest step of one dataset at the recipe's shape: batch_size / world queries per
    device, each with its positive and ``negatives`` hard negatives, cut at max_seq_length.
    Padded, each column padded to its longest text (its measured ``lengths``' longest, the
    query's with its instruction); ``packed``, each column's texts at their PACKED_PERCENTILE
    length (a heavy step: real tokens only). Every text at max_seq_length where none were
    measured, the worst case either way."""
    cap, texts = values.max_seq_length, values.batch_size // world
    columns = lengths["columns"] if lengths else {}
    prompt = math.ceil(len(instruction) / CHARS_PER_TOKEN) if instruction else 0

    def column(kind: str, extra: int = 0) -> Column:
        found = columns.get(kind)
        longest = cap if found is None else min(cap, int(found["max"]) + extra)
        if not packed:
            return Column.padded(texts, longest)
        typical = cap if found is None else min(cap, int(found[PACKED_PERCENTILE]) + extra)
        return Column(texts, texts * typical, texts * typical**2, longest, packed=True)

    kinds = [("query", prompt), ("positive", 0)] + [("negative", 0)] * negatives
    return Step(tuple(column(kind, extra) for kind, extra in kinds), world=world)


def plan_step(
    fields: dict[str, Any],
    step: Step,
    precision: Precision,
    budget: Budget | None,
    fit: float = 1.0,
) -> Plan:
    """The plain peak of ``step`` and, over ``budget``, the chunk the fine-tune will take (from
    the formula, as the fine-tune decides) with its peak; ``fit`` scales the peaks shown."""
    plain = memory.fitted_peak(memory.estimate(fields, step, precision), fit)
    one = memory.fitted_peak(memory.estimate(fields, step.chunked(1), precision), fit)
    if budget is None or memory.estimate(fields, step, precision).peak <= budget.bytes:
        return Plan(step, plain, one_text=one)
    chunk = memory.largest_chunk(fields, step, precision, budget.bytes)
    if chunk is None:
        return Plan(step, plain, None, one, one_text=one)
    chunked = memory.estimate(fields, step.chunked(chunk), precision)
    return Plan(step, plain, chunk, memory.fitted_peak(chunked, fit), one_text=one)


def too_small(fields: dict[str, Any], step: Step, precision: Precision, budget: Budget) -> str:
    one = memory.estimate(fields, step.chunked(1), precision)
    return (
        f"the memory budget {budget.text} holds less than one text at a time: the model's "
        f"weights, gradients and AdamW moments alone take {memory.gib(one.weights + one.gradients)}"
        f", one text at a time {memory.gib(one.peak)}. Give a larger --memory-budget, or a "
        "device with more memory."
    )
