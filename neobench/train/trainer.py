"""Step 5 of the recipe: the loss and the stock SentenceTransformerTrainer, not subclassed. Our
parts plug in: the batch sampler (training arguments), a token-counting collator, a loss-curve
callback, the training instructions as per-dataset prompts, `--report-to` as report_to.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
from typing import TYPE_CHECKING, Any

from neobench.core.card_io import card_to_dict
from neobench.core.cards import FinetuneCard
from neobench.protocol.data import BuiltDataset
from neobench.protocol.instructions import TrainProfile
from neobench.protocol.recipe_values import RecipeValues
from neobench.train.devices import bf16
from neobench.train.inputs import Inputs
from neobench.train.output import CHECKPOINTS, CURVE

if TYPE_CHECKING:
    from collections.abc import Callable


def build_trainer(
    inputs: Inputs,
    model: Any,
    built: dict[str, BuiltDataset],
    device: str,
    on_step: Callable | None,
    card: FinetuneCard,
    progress: bool = True,
) -> Any:
    """A stock SentenceTransformerTrainer with our parts; with --report-to the run (named as the
    card names the model) is logged to that tracker, the recipe and ``card`` as its config.
    ``progress=False``: stderr is set aside while the trainer is built (below)."""
    from datasets import DatasetDict
    from sentence_transformers import SentenceTransformerTrainer
    from transformers.trainer_callback import PrinterCallback

    from neobench.train import memory_budget, tracking
    from neobench.train.checkpoints import marker
    from neobench.train.sampling import schedule
    from neobench.train.telemetry import LossCurve, TokenCountingCollator

    values, world = inputs.recipe.values, inputs.world
    loss = _loss(model, values, world, memory_budget.settings(card, model, values, device))
    prompts = query_prompts(built, values, inputs.train_profile)
    tracking.prepare(inputs.report_to)
    args = _training_args(inputs, device, prompts, card.output_model.name)
    collator = TokenCountingCollator(preprocess_fn=model.preprocess, prompts=args.prompts)
    keys = list(built)
    sizes = [len(b.dataset) for b in built.values()]
    drawn = schedule(sizes, values.sampling_alpha, values.seed, values.max_steps)
    curve = LossCurve(inputs.output / CURVE, [keys[i] for i in drawn], collator, world, on_step)
    # The trainer's model card callback samples the README's widget examples under a tqdm bar
    # that nothing turns off once tqdm is imported (the CLI sets TQDM_DISABLE, read on import):
    # without progress, stderr goes nowhere for that moment (nothing else is written then).
    aside = contextlib.nullcontext() if progress else contextlib.redirect_stderr(io.StringIO())
    with aside:
        trainer = SentenceTransformerTrainer(
            model=model,
            args=args,
            train_dataset=DatasetDict({k: b.dataset for k, b in built.items()}),
            loss=loss,
            data_collator=collator,
            callbacks=[curve, marker(), *memory_budget.callbacks(loss, card)],
        )
    trainer.remove_callback(PrinterCallback)  # our LossCurve reports each step
    # The tracker's config: the recipe (name, hash, values) and the run card as started.
    recipe = {"name": inputs.recipe.name, "sha256": inputs.recipe.sha256, **inputs.recipe.as_dict()}
    config = {"neobench_recipe": recipe, "neobench_run_card": card_to_dict(card)}
    tracking.attach(trainer, inputs.report_to, inputs.output, config)
    return trainer


def _loss(
    model: Any, values: RecipeValues, world: int, budget: dict[str, Any] | None = None
) -> Any:
    """InfoNCE: candidates = positives + hard negatives of the whole global batch, gathered
    across ranks with gradients; cross-entropy averaged over queries; scale = 1 / temperature.
    The recipe's gradcache_mini_batch N > 0: GradCache chunks of N texts at every step; else,
    with a memory budget (memory_budget.BudgetedLoss and its ``budget``: fields, precision,
    Budget, unpadding), plain or chunked as each step's estimate fits; else plain.
    """
    from sentence_transformers.sentence_transformer.losses import (
        CachedMultipleNegativesRankingLoss,
        MultipleNegativesRankingLoss,
    )
    from sentence_transformers.util import cos_sim

    common = {
        "scale": 1.0 / values.temperature,
        "similarity_fct": {"cosine": cos_sim}[values.similarity],
        "gather_across_devices": world > 1,
        "directions": (values.loss_direction,),
    }
    if values.gradcache_mini_batch:
        return CachedMultipleNegativesRankingLoss(
            model, mini_batch_size=values.gradcache_mini_batch, **common
        )
    if budget is not None:
        from neobench.train.memory_budget import BudgetedLoss

        return BudgetedLoss(model, common, world=world, **budget)
    return MultipleNegativesRankingLoss(model, **common)


def query_prompts(
    built: dict[str, BuiltDataset], values: RecipeValues, profile: TrainProfile
) -> dict[str, dict[str, str]]:
    """Dataset key -> its row's training instruction, query side only (also the dev metric's)."""
    return {
        key: {"query": profile.instructions[b.row.instruction] + values.instruction_separator}
        for key, b in built.items()
        if b.row.instruction in profile.instructions
    }


def optimiser_arguments(values: Any, steps: int, device: str) -> dict[str, Any]:
    """The recipe's optimiser, schedule and precision as stock training arguments for ``steps``
    steps (the recipe's trainer, and `bench gpu`'s stock arm)."""
    return {
        "learning_rate": values.learning_rate,
        "adam_beta1": values.adam_beta1,
        "adam_beta2": values.adam_beta2,
        "adam_epsilon": values.adam_epsilon,
        "weight_decay": values.weight_decay,
        "max_grad_norm": values.max_grad_norm,
        "lr_scheduler_type": values.lr_schedule,
        "warmup_steps": math.ceil(values.warmup_ratio * steps),
        "bf16": bf16(values, device),
        "use_cpu": not device.startswith("cuda"),
    }


def _training_args(inputs: Inputs, device: str, prompts: dict, run_name: str) -> Any:
    """The stock arguments from the recipe; the run is ``run_name`` in the --report-to tracker."""
    from sentence_transformers import SentenceTransformerTrainingArguments

    from neobench.train.sampling import AlphaBatchSampler

    values, world = inputs.recipe.values, inputs.world
    # A partial of a module-level class: the trainer pickles its arguments into checkpoints.
    sampler = functools.partial(
        AlphaBatchSampler,
        global_batch_size=values.batch_size,
        alpha=values.sampling_alpha,
        max_steps=values.max_steps,
        world_size=world,
    )
    cuda = device.startswith("cuda")
    return SentenceTransformerTrainingArguments(
        output_dir=str(inputs.output / CHECKPOINTS),
        max_steps=values.max_steps,
        per_device_train_batch_size=values.batch_size // world,
        **optimiser_arguments(values, values.max_steps, device),
        ddp_backend="gloo" if world > 1 and not cuda else None,
        seed=values.seed,
        data_seed=values.seed,
        logging_steps=1,
        logging_nan_inf_filter=False,  # a NaN must reach our guard, not be averaged away
        save_strategy="steps",
        save_steps=values.checkpoint_every,
        report_to=inputs.report_to,
        run_name=run_name or None,
        disable_tqdm=True,
        prompts=prompts or None,
        multi_dataset_batch_sampler=sampler,
        dataloader_drop_last=False,
    )
