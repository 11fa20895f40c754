"""Step 5 of the recipe, within a memory budget: the same global batch and the same loss, never
out of memory by design (docs/recipe.md, "Memory: the budget and GradCache chunks").

Each step's memory is estimated from its shape (models/memory.py: the model's shapes, the texts
per column and their padded lengths) before it runs. Within ``--memory-budget`` (default on
CUDA: MEMORY_SHARE of the device), the plain gathered InfoNCE runs
(MultipleNegativesRankingLoss); above it, the same batch runs through sentence-transformers'
GradCache (CachedMultipleNegativesRankingLoss) in chunks of the most texts that fit. A step that
raises torch.OutOfMemoryError anyway, in its forward or its backward, runs again in smaller
chunks, under a budget lowered for the rest of the run (OOM_BACKOFF, models/memory.py); with
several processes the estimate alone decides (an error on one would leave the others waiting).
GradCache computes the same loss and gradients (up to float rounding: tests/test_memory_budget.py),
so the chunking changes memory, not the method: no recipe value changes, nor the recipe hash.
The run card's ``memory`` records the budget, the steps chunked, their chunks and why.
"""

from __future__ import annotations

import functools
import itertools
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from transformers import TrainerCallback

from neobench.core.cards import FinetuneCard
from neobench.core.errors import NeobenchError
from neobench.models import memory
from neobench.models.memory import GIB, Column, Precision, Step
from neobench.protocol.recipe_values import RecipeValues
from neobench.train.step_plan import Budget, too_small

logger = logging.getLogger(__name__)

# Out-of-memory events the run card lists one by one (later ones are counted).
OOM_EVENTS_KEPT = 10
OOM_WHY = "out of memory (then a lowered budget)"


def resolve_budget(given: float | None, device: str) -> Budget | None:
    """--memory-budget; else on CUDA MEMORY_SHARE of the device's memory; else (the CPU) None:
    without a budget nothing is chunked."""
    if given is not None:
        return Budget(given * GIB, f"--memory-budget {given:g}")
    if not device.startswith("cuda"):
        return None
    total = torch.cuda.get_device_properties(torch.device(device)).total_memory
    share = memory.MEMORY_SHARE
    return Budget(share * total, f"{share:.0%} of the device's {memory.gib(total)}")


# --------------------------------------------------------------------------- the loss, per step


@dataclass
class MemoryLog:
    """What the run card's ``memory`` records."""

    budget: Budget | None
    plain_steps: int = 0
    chunked: Counter = field(default_factory=Counter)  # chunk (texts) -> steps
    why: Counter = field(default_factory=Counter)  # reason -> steps
    out_of_memory: list[dict[str, Any]] = field(default_factory=list)  # the first OOM_EVENTS_KEPT
    out_of_memory_events: int = 0
    largest_estimate: float = 0.0

    def record(self) -> dict[str, Any]:
        budget = self.budget
        found: dict[str, Any] = {
            "budget_gib": round(budget.bytes / GIB, 3) if budget else None,
            "budget": budget.source if budget else "none: on the CPU without --memory-budget",
            "largest_step_estimate_gib": round(self.largest_estimate / GIB, 3),
            "plain_steps": self.plain_steps,
            "chunked_steps": sum(self.chunked.values()),
        }
        if self.chunked:
            found["chunks"] = {f"{texts} texts": n for texts, n in sorted(self.chunked.items())}
            found["why"] = dict(self.why)
        if self.out_of_memory:
            found["out_of_memory"] = self.out_of_memory
            found["out_of_memory_events"] = self.out_of_memory_events
        return found


class BudgetedLoss(nn.Module):
    """The recipe's InfoNCE, plain or in GradCache chunks, chosen per step from its estimate
    (the module's doc). Both stock losses share the model and the recipe's arguments."""

    def __init__(
        self,
        model: Any,
        common: dict[str, Any],
        fields: dict[str, Any],
        precision: Precision,
        budget: Budget,
        world: int,
        unpads: bool,
    ) -> None:
        from sentence_transformers.sentence_transformer.losses import (
            CachedMultipleNegativesRankingLoss,
            MultipleNegativesRankingLoss,
        )

        super().__init__()
        self.model = model
        self.plain = MultipleNegativesRankingLoss(model, **common)
        self.cached = CachedMultipleNegativesRankingLoss(model, mini_batch_size=1, **common)
        self.fields, self.precision, self.world, self.unpads = fields, precision, world, unpads
        self.budget = budget
        self.log = MemoryLog(budget)
        self.step = 0  # the step being run (MemoryRecord sets it)

    def forward(self, sentence_features: list[dict[str, Any]], labels: Any) -> torch.Tensor:
        features = list(sentence_features)
        step = self.shape(features)
        estimate = memory.estimate(self.fields, step, self.precision)
        self.log.largest_estimate = max(self.log.largest_estimate, estimate.peak)
        chunk = self._chunk(step, estimate)
        why = f"estimate over the budget ({self.budget.source})" if chunk else None
        if self.world > 1 or not torch.is_grad_enabled():
            # Several processes: an error on one would leave the others waiting in the gather.
            self._count(chunk, why)
            return self._loss(chunk)(features, labels)
        return self._guarded(features, labels, step, chunk, why)

    def shape(self, features: list[dict[str, Any]]) -> Step:
        """This device's step: per column its texts and positions, padded (the collator's
        batches) or packed (flattened by sentence-transformers, or unpadded by the backbone)."""
        columns = []
        for column in features:
            if "cu_seq_lens_q" in column:
                bounds = column["cu_seq_lens_q"].tolist()
                lengths = [b - a for a, b in itertools.pairwise(bounds)]
                columns.append(Column.of_lengths(lengths, flattened=True))
            elif self.unpads:
                columns.append(Column.of_lengths(column["attention_mask"].sum(1).tolist()))
            else:
                texts, longest = column["input_ids"].shape[:2]
                columns.append(Column.padded(int(texts), int(longest)))
        return Step(tuple(columns), world=self.world)

    def _chunk(self, step: Step, estimate: memory.Memory) -> int | None:
        """The chunk a step over the budget runs in (agreed by every process), else None."""
        chunk = None
        if estimate.peak > self.budget.bytes:
            chunk = memory.largest_chunk(self.fields, step, self.precision, self.budget.bytes)
            if chunk is None:
                raise NeobenchError(too_small(self.fields, step, self.precision, self.budget))
        if self.world > 1 and torch.distributed.is_initialized():
            # The smallest chunk of any process (plain = more texts than any column holds).
            device = next(self.model.parameters()).device
            agreed = torch.tensor([chunk or step.texts + 1], device=device)
            torch.distributed.all_reduce(agreed, op=torch.distributed.ReduceOp.MIN)
            chunk = None if int(agreed) > step.texts else int(agreed)
        return chunk

    def _loss(self, chunk: int | None) -> nn.Module:
        if chunk is None:
            return self.plain
        self.cached.mini_batch_size = chunk
        return self.cached

    def _count(self, chunk: int | None, why: str | None) -> None:
        if chunk is None:
            self.log.plain_steps += 1
        else:
            self.log.chunked[chunk] += 1
            self.log.why[str(why)] += 1

    def _guarded(
        self, features: list, labels: Any, step: Step, chunk: int | None, why: str | None
    ) -> torch.Tensor:
        """The step's loss, its backward run inside the returned tensor's hook, so that an
        out-of-memory error there, as in the forward, runs the step again in smaller chunks."""
        state = _rng_state()
        while True:
            try:
                loss = self._loss(chunk)(features, labels)
                break
            except torch.OutOfMemoryError:
                pass  # the failed forward's tensors went with the exception
            chunk, why = self._after_oom("forward", step, chunk), OOM_WHY
            _set_rng_state(state)  # the step again from the random state it started from
        held = [loss]  # dropped once its backward ran (or failed): the graph's saved tensors
        surrogate = loss.detach().requires_grad_()
        surrogate.register_hook(
            functools.partial(self._backward, held, features, labels, step, chunk, why, state)
        )
        return surrogate

    def _backward(
        self,
        held: list,
        features: list,
        labels: Any,
        step: Step,
        chunk: int | None,
        why: str | None,
        state: Any,
        grad: Any,
    ) -> None:
        loss: torch.Tensor | None = held.pop()
        while True:
            try:
                if loss is None:  # the step again, in the chunks _after_oom chose
                    with torch.enable_grad():
                        loss = self._loss(chunk)(features, labels)
                torch.autograd.backward(loss, grad)
                self._count(chunk, why)
                return
            except torch.OutOfMemoryError:
                loss = None  # the graph of the failed attempt
            # The recipe accumulates no gradients across steps (they are None when a step
            # starts): the failed attempt's partial sums go, the step makes them again.
            for parameter in self.model.parameters():
                parameter.grad = None
            chunk, why = self._after_oom("backward", step, chunk), OOM_WHY
            _set_rng_state(state)

    def _after_oom(self, where: str, step: Step, chunk: int | None) -> int:
        """The chunk to run the step again in after an out-of-memory error: under a budget
        lowered to the failed attempt's estimate less (1 - OOM_BACKOFF) of its activations, and
        smaller than the chunk that failed; none left: one clear error."""
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # what the failed attempt held goes back to the device
        failed = memory.estimate(self.fields, step.chunked(chunk), self.precision)
        flexible = (1 - memory.OOM_BACKOFF) * (failed.activations + failed.working)
        lowered = min(self.budget.bytes, failed.peak - flexible)
        tried = f"chunks of {chunk} texts" if chunk else "the plain loss"
        self.budget = Budget(
            lowered, f"lowered after step {self.step} ran out of memory in {tried}"
        )
        found = memory.largest_chunk(self.fields, step, self.precision, lowered)
        if found is not None and chunk is not None:
            found = min(found, chunk - 1) or None
        if found is None:
            raise NeobenchError(
                f"step {self.step} ran out of memory in its {where} with {tried}, and no smaller "
                f"chunk fits the budget it leaves ({memory.gib(lowered)}). Give this device less "
                "to do (a --memory-budget below what other processes leave free), or a device "
                "with more memory."
            )
        event = {"step": self.step, "in": where, "tried": tried, "then": f"chunks of {found} texts"}
        event["budget_after_gib"] = round(lowered / GIB, 3)
        self.log.out_of_memory_events += 1
        if len(self.log.out_of_memory) < OOM_EVENTS_KEPT:
            self.log.out_of_memory.append(event)
        logger.warning(
            "step %d ran out of memory in its %s (%s): run again in GradCache chunks of %d "
            "texts; the budget is %s from now on",
            self.step, where, tried, found, memory.gib(lowered),
        )  # fmt: skip
        return found


def _rng_state() -> tuple[Any, Any]:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    return torch.get_rng_state(), cuda


def _set_rng_state(state: tuple[Any, Any]) -> None:
    cpu, cuda = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


class MemoryRecord(TrainerCallback):
    """Tells the loss which step runs, and keeps the run card's ``memory`` current (the card is
    written at the run's end, or when it stops)."""

    def __init__(self, loss: BudgetedLoss, card: Any) -> None:
        self.loss, self.card = loss, card
        card.memory = loss.log.record()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.loss.step = state.global_step + 1

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.card.memory = self.loss.log.record()


def settings(
    card: FinetuneCard, model: Any, values: RecipeValues, device: str
) -> dict[str, Any] | None:
    """The budgeted loss's settings (config fields, precision, Budget, unpads), or None: no budget
    (on the CPU without --memory-budget) or the recipe's own GradCache chunks."""
    from neobench.models.memory import attention_kind
    from neobench.train.devices import bf16

    budget = resolve_budget(card.config.get("memory_budget"), device)
    if budget is None or values.gradcache_mini_batch:
        return None
    backbone = model[0].auto_model
    fields = backbone.config.to_dict()
    attention = attention_kind(fields, card.model.attn_implementation or "sdpa")
    # Packed forwards (--padding, the card's padding) run real tokens only, whatever the batch.
    unpadded = (card.padding or {}).get("mode") == "packed"
    if card.padding is None and callable(getattr(backbone, "use_unpadded", None)):
        unpadded = bool(backbone.use_unpadded(device))  # native NeoBERT on CUDA
    precision = Precision(bf16(values, device), attention)
    return {"fields": fields, "precision": precision, "budget": budget, "unpads": unpadded}


def callbacks(loss: Any, card: FinetuneCard) -> list[Any]:
    """The callback that keeps the card's ``memory`` (a budgeted loss only)."""
    return [MemoryRecord(loss, card)] if isinstance(loss, BudgetedLoss) else []
