"""`neobench finetune`: THE recipe, top to bottom.

record -> data -> model -> loss -> stock SentenceTransformerTrainer -> save. Launch as is on one
device, or with `torchrun --nproc_per_node N -m neobench finetune ...` / `accelerate launch` on
many: the global batch, the dataset drawn at each step and the candidate pool of the loss are the
same for any number of devices, so the result does not depend on it.

`finetune()` reads as numbered steps; each step is one small function below it, in order.
"""

from __future__ import annotations

import functools
import logging
import math
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neobench.core import cards as record
from neobench.core.cards import FinetuneCard
from neobench.core.errors import (
    NeobenchError,
    RunFailed,
    collect,
    disk_full,
    unknown,
)
from neobench.models import attention
from neobench.models.load import LoadedModel, check_spec, load_model, resolve_device
from neobench.protocol import mirror
from neobench.protocol.config import FinetuneConfig
from neobench.protocol.data import BuiltDataset, build_dataset
from neobench.protocol.instructions import (
    InstructionProfile,
    TrainProfile,
    load_profile,
    load_train_instructions,
    mteb_prompts,
)
from neobench.protocol.manifest import Manifest, Row, load_manifest, validate_manifest
from neobench.protocol.overlap import finetune_declaration
from neobench.protocol.recipe import Recipe, apply_overrides, load_recipe, parse_overrides
from neobench.protocol.recipe_values import RecipeValues
from neobench.train import output as run_folder
from neobench.train.output import CARD, CHECKPOINTS, CURVE, CURVE_PNG

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["FinetuneConfig", "FinetuneSummary", "finetune", "resolve_recipe", "seed_configs"]

logger = logging.getLogger(__name__)

# The saved model carries evaluation prompts for every task of both English MTEB benchmarks.
PROMPT_BENCHMARKS = ("MTEB(eng, v1)", "MTEB(eng, v2)")


@dataclass
class FinetuneSummary:
    output: Path
    recipe_sha256: str
    steps: int
    final_loss: float | None
    datasets: dict[str, int]  # dataset key -> usable rows


@dataclass
class Inputs:
    """Everything step 1 resolves and checks before any data or model loads."""

    recipe: Recipe
    output: Path
    manifest: Manifest
    rows: list[Row]  # the manifest rows the recipe trains on
    train_profile: TrainProfile
    eval_profile: InstructionProfile
    world: int  # processes


def resolve_recipe(cfg: FinetuneConfig) -> Recipe:
    """The recipe with the overrides and --seed applied; every value is checked on the way."""
    overrides = parse_overrides(cfg.overrides)
    if cfg.seed is not None:
        overrides["seed"] = str(cfg.seed)
    return apply_overrides(load_recipe(cfg.recipe), overrides)


def default_name(output: str) -> str:
    """The name results are filed under when --model-name is not given: neobench/<folder>.
    The runs of `--seeds` share it (their folder without the -seed<N> suffix), so their
    evaluations land side by side, told apart by revision (neobench/report/replicates.py)."""
    return f"neobench/{Path(output).expanduser().name}"


SEED_SUFFIX = "-seed"


def seed_configs(cfg: FinetuneConfig) -> list[FinetuneConfig]:
    """One config per run: ``[cfg]`` without --seeds; with --seeds 0,1,2 one per seed, into
    sibling folders <output>-seed<N> under one model name, the seed the only difference.

    Every seed folder is checked before the first run starts, with the rules of one run; with
    --resume a complete seed is skipped, an unfinished one resumed, a missing one started."""
    if cfg.seeds is None:
        return [cfg]
    seeds = _parse_seeds(cfg)
    base = Path(cfg.output).expanduser().resolve()
    runs, problems = [], []
    for seed in seeds:
        output = base.with_name(f"{base.name}{SEED_SUFFIX}{seed}")
        resume = cfg.resume and not _fresh(output)
        if cfg.resume and _complete(output):
            logger.warning("%s: seed %d is complete; skipped", output, seed)
            continue
        problems += run_folder.output_problems(output, resume)
        runs.append(
            replace(
                cfg,
                output=str(output),
                seed=seed,
                seeds=None,
                resume=resume,
                model_name=cfg.model_name or default_name(str(base)),
            )
        )
    if problems:
        raise NeobenchError(problems)
    return runs


def _parse_seeds(cfg: FinetuneConfig) -> list[int]:
    if cfg.seed is not None:
        raise NeobenchError(
            f"--seed {cfg.seed} and --seeds {','.join(cfg.seeds or [])}: give one of them "
            "(--seeds 0,1,2 runs the recipe once per seed; --seed N runs it once)."
        )
    if any(item.split("=", 1)[0].strip() == "seed" for item in cfg.overrides):
        raise NeobenchError(
            f"--seeds {','.join(cfg.seeds or [])} and the override seed=...: give the seeds "
            "once, with --seeds."
        )
    bad = [s for s in cfg.seeds or [] if not s.isdigit()]
    if bad or not cfg.seeds:
        raise NeobenchError(
            f"--seeds {','.join(cfg.seeds or []) or repr('')}: expected comma-separated "
            "non-negative whole numbers, e.g. --seeds 0,1,2."
        )
    seeds = [int(s) for s in cfg.seeds]
    if len(set(seeds)) != len(seeds):
        raise NeobenchError(
            f"--seeds {','.join(cfg.seeds)}: a seed is repeated; each seed runs once."
        )
    return seeds


def _complete(output: Path) -> bool:
    path = output / CARD
    return path.is_file() and record.read_finetune_card(path).status == "complete"


def _fresh(output: Path) -> bool:
    """Nothing to resume: no folder, an empty one, or a run that stopped before a checkpoint."""
    if not output.is_dir() or not any(output.iterdir()):
        return True
    return run_folder.unfinished_without_checkpoint(output)


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def finetune(
    cfg: FinetuneConfig,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    extra_callbacks: list[Any] | None = None,
) -> FinetuneSummary:
    """Run the recipe. Every input problem is reported before any data or model loads.
    One seed per call: --seeds is expanded into one config per seed by `seed_configs`."""
    if cfg.seeds is not None:
        raise NeobenchError(
            "finetune() runs one seed; expand --seeds with seed_configs() and run each config."
        )
    # 1. Inputs: recipe, model id, device, output folder, manifest, instructions, all at once.
    inputs = _check_inputs(cfg)
    output = inputs.output

    # 2. Data: present in the mirror (or reachable on the hub), then built and size-checked.
    data_dir = mirror.resolve_data_dir(cfg.data_dir)
    built = _build_data(inputs, data_dir)

    # 3. Model: any encoder + mean pooling, the recipe's length and dropout.
    device = resolve_device(cfg.device)
    loaded = _load_model(cfg, inputs.recipe.values, device)

    # 4. Run card, before any work.
    if not cfg.resume and is_main_process():
        run_folder.clear_failed_start(output)
    card = _card(cfg, inputs, loaded, built, data_dir, device)
    if is_main_process():
        record.write_finetune_card(output / CARD, card)

    # 5. Loss and trainer: stock sentence-transformers parts, extended by our batch sampler.
    trainer = _trainer(inputs, loaded.model, built, device, on_step)
    for callback in extra_callbacks or []:
        trainer.add_callback(callback)

    # 6. Train; a run that stops says so in its card, and how to continue.
    _train(trainer, output, card, cfg.resume)

    # 7. Save: a SentenceTransformer folder carrying the evaluation prompts of the recipe.
    steps = trainer.state.global_step
    final_loss = _save(inputs, loaded.model, card, steps)
    sizes = {k: len(b.dataset) for k, b in built.items()}
    return FinetuneSummary(output, inputs.recipe.sha256, steps, final_loss, sizes)


# ---------------------------------------------------------------------------------------------
# 1. Inputs


def _check_inputs(cfg: FinetuneConfig) -> Inputs:
    problems: list[str] = []
    recipe = collect(problems, resolve_recipe, cfg)
    collect(problems, check_spec, cfg.model)
    collect(problems, resolve_device, cfg.device)
    collect(problems, attention.check, cfg.attn_implementation)
    output = Path(cfg.output).expanduser().resolve()
    problems += run_folder.output_problems(output, cfg.resume)
    if recipe is None:
        raise NeobenchError(problems)
    values = recipe.values
    manifest = collect(problems, load_manifest, recipe.manifest)
    train_profile = collect(problems, load_train_instructions, values.instructions)
    eval_profile = collect(problems, load_profile, values.eval_instructions)
    rows: list[Row] = []
    if manifest and train_profile:
        if train_profile.instructions:  # an empty profile ('none') turns instructions off
            problems += validate_manifest(manifest, set(train_profile.instructions))
        keys = _dataset_keys(manifest, values.datasets)
        problems += [
            unknown(f"dataset key in manifest {manifest.name!r}", key, manifest.rows)
            for key in keys
            if key not in manifest.rows
        ]
        rows = [manifest.rows[k] for k in keys if k in manifest.rows]
    world = world_size()
    if values.batch_size % world:
        problems.append(
            f"batch_size={values.batch_size} is not divisible by the {world} processes."
        )
    if problems:
        raise NeobenchError(problems)
    return Inputs(recipe, output, manifest, rows, train_profile, eval_profile, world)


def _dataset_keys(manifest: Manifest, datasets: str | list[str]) -> list[str]:
    if datasets == "all":
        return list(manifest.rows)
    return [datasets] if isinstance(datasets, str) else list(datasets)


# ---------------------------------------------------------------------------------------------
# 2. Data


def _build_data(inputs: Inputs, data_dir: Path | None) -> dict[str, BuiltDataset]:
    values = inputs.recipe.values
    _check_sources(inputs.rows, data_dir, inputs.recipe.name)
    built = {
        row.key: build_dataset(row, data_dir, values.max_hard_negatives) for row in inputs.rows
    }
    too_small = [
        f"dataset {k} has {len(b.dataset)} usable rows, fewer than one global batch "
        f"({values.batch_size}); lower batch_size or drop it from datasets="
        for k, b in built.items()
        if len(b.dataset) < values.batch_size
    ]
    if too_small:
        raise NeobenchError(too_small)
    return built


def _check_sources(rows: list[Row], data_dir: Path | None, recipe_name: str) -> None:
    """Every dataset can be read: from the mirror when there is one, else from the hub."""
    hub_rows = [r for r in rows if not r.data_files]
    prefetch = f"neobench data prefetch --recipe {recipe_name}"
    if data_dir is None:
        if hub_rows and (mirror.hub_offline() or not mirror.hub_reachable()):
            raise NeobenchError(
                [
                    f"dataset {r.key} needs repo '{r.hf_id}' from the Hugging Face hub, which "
                    "is offline or unreachable."
                    for r in hub_rows
                ]
                + [f"Fix: pass --data-dir DIR, a mirror made with `{prefetch} --out DIR`."]
            )
        return
    missing = [r for r in hub_rows if not (data_dir / r.hf_id).is_dir()]
    lines = [
        f"dataset {r.key} needs repo '{r.hf_id}', which is not in the mirror {data_dir} "
        f"(expected folder {data_dir / r.hf_id})."
        for r in missing
    ] + [
        f"dataset {r.key}: file {data_dir / f} does not exist."
        for r in rows
        if r.data_files
        for f in ([r.data_files] if isinstance(r.data_files, str) else r.data_files)
        if not (data_dir / f).is_file()
    ]
    if missing:
        lines.append(
            f"Fix: on a connected machine run `{prefetch} --out {data_dir}`, or drop them "
            "with datasets=KEY,KEY."
        )
    if lines:
        raise NeobenchError(lines)


# ---------------------------------------------------------------------------------------------
# 3. Model


def _bf16(values: RecipeValues, device: str) -> bool:
    """bfloat16 autocast: on CUDA when the recipe asks for it; the CPU always runs float32."""
    return device.startswith("cuda") and values.mixed_precision == "bf16"


def _load_model(cfg: FinetuneConfig, values: RecipeValues, device: str) -> LoadedModel:
    return load_model(
        cfg.model,
        max_seq_length=values.max_seq_length,
        trust_remote_code=cfg.trust_remote_code,
        device=device,
        attn_implementation=cfg.attn_implementation,
        half=_bf16(values, device),  # the trainer autocasts: flash kernels can run there
        disable_dropout=values.dropout == 0.0,
    )


# ---------------------------------------------------------------------------------------------
# 4. Run card


def _card(
    cfg: FinetuneConfig,
    inputs: Inputs,
    loaded: LoadedModel,
    built: dict[str, BuiltDataset],
    data_dir: Path | None,
    device: str,
) -> FinetuneCard:
    import torch

    recipe, values = inputs.recipe, inputs.recipe.values
    data = _data_records(built, data_dir)
    # What the model will declare it trained on (mteb's ModelMeta vocabulary; protocol/overlap).
    trained, adapted_from = finetune_declaration(data, loaded.name, loaded.source, loaded.path)
    return FinetuneCard(
        started=record.now(),
        status="running",
        owner=record.owner(),
        config=asdict(cfg),
        recipe=recipe.record(),
        manifest=record.ManifestRecord(inputs.manifest.name, inputs.manifest.path),
        data=data,
        sampling_probabilities=_probabilities(built, values.sampling_alpha),
        instructions=record.InstructionsRecord(
            inputs.train_profile.name, inputs.train_profile.sha256, values.eval_instructions
        ),
        output_model=record.OutputModel(
            cfg.model_name or default_name(cfg.output),
            recipe.sha256,
            training_datasets=trained,
            adapted_from=adapted_from,
            seed=values.seed,
            base_model=loaded.name,
            base_revision=loaded.revision,
        ),
        model=record.BaseModelRecord(
            base=cfg.model,
            name=loaded.name,
            revision=loaded.revision,
            architecture=loaded.architecture,
            max_seq_length=loaded.max_seq_length,
            attn_implementation=loaded.forward_attn_implementation,
            attn_implementation_requested=cfg.attn_implementation,
            tokenizer=loaded.tokenizer,
            pooling=values.pooling,
            recipe_sha256=recipe.sha256,
        ),
        runtime={
            **record.device_info(device),
            "world_size": inputs.world,
            "dtype": "bfloat16 autocast" if _bf16(values, device) else "float32",
            "torch_threads": torch.get_num_threads(),
        },
        seed=values.seed,
        environment=record.environment(),
    )


def _data_records(built: dict[str, BuiltDataset], data_dir: Path | None) -> dict[str, dict]:
    """Where each dataset came from (pinned and mirrored revision) and what was kept of it."""
    lock = mirror.read_lock(data_dir) if data_dir else {}
    return {
        key: {
            "repo_id": b.row.repo_id,
            "config": b.row.config,
            "split": b.row.split,
            "pinned_revision": b.row.revision,
            "mirror_revision": (lock.get(b.row.hf_id) or {}).get("resolved_revision")
            if b.row.hf_id
            else None,
            "source": b.source,
            "rows_raw": b.rows_raw,
            "rows": len(b.dataset),
            "negatives_per_query": b.num_negatives,
            "fingerprint": b.dataset._fingerprint,
            "instruction": b.row.instruction,
            "in_domain": b.row.in_domain,
        }
        for key, b in built.items()
    }


def _probabilities(built: dict[str, BuiltDataset], alpha: float) -> dict[str, float]:
    from neobench.train.sampling import probabilities

    p = probabilities([len(b.dataset) for b in built.values()], alpha)
    return {k: round(float(v), 6) for k, v in zip(built, p, strict=True)}


def _end_card(output: Path, card: FinetuneCard, status: str) -> None:
    """Say in the card how the run ended; a folder that takes no more writes keeps the old
    card, which the next run reads as orphaned (its process is gone)."""
    if not is_main_process():
        return
    card.status, card.finished = status, record.now()
    try:
        record.write_finetune_card(output / CARD, card)
    except OSError as error:
        logger.warning("could not update %s: %s", output / CARD, error.strerror)


# ---------------------------------------------------------------------------------------------
# 5. Loss and trainer


def _trainer(
    inputs: Inputs,
    model: Any,
    built: dict[str, BuiltDataset],
    device: str,
    on_step: Callable | None,
) -> Any:
    """A stock SentenceTransformerTrainer; our parts are the batch sampler (in the arguments),
    the collator that counts tokens and the callback that writes the loss curve."""
    from datasets import DatasetDict
    from sentence_transformers import SentenceTransformerTrainer
    from transformers.trainer_callback import PrinterCallback

    from neobench.train.sampling import schedule
    from neobench.train.telemetry import LossCurve, TokenCountingCollator

    values, world = inputs.recipe.values, inputs.world
    loss = _loss(model, values, world)
    prompts = _prompts(built, values, inputs.train_profile)
    args = _training_args(values, inputs.output, device, world, prompts)
    collator = TokenCountingCollator(preprocess_fn=model.preprocess, prompts=args.prompts)
    keys = list(built)
    sizes = [len(b.dataset) for b in built.values()]
    drawn = schedule(sizes, values.sampling_alpha, values.seed, values.max_steps)
    curve = LossCurve(inputs.output / CURVE, [keys[i] for i in drawn], collator, world, on_step)
    trainer = SentenceTransformerTrainer(
        model=model,
        args=args,
        train_dataset=DatasetDict({k: b.dataset for k, b in built.items()}),
        loss=loss,
        data_collator=collator,
        callbacks=[curve],
    )
    trainer.remove_callback(PrinterCallback)  # our LossCurve reports each step
    return trainer


def _loss(model: Any, values: RecipeValues, world: int) -> Any:
    """InfoNCE: candidates = positives + hard negatives of the whole global batch, gathered
    across ranks with gradients; cross-entropy averaged over queries; scale = 1 / temperature.
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
    return MultipleNegativesRankingLoss(model, **common)


def _prompts(
    built: dict[str, BuiltDataset], values: RecipeValues, profile: TrainProfile
) -> dict[str, dict[str, str]]:
    """Dataset key -> the training instruction of its manifest row, on the query side only."""
    return {
        key: {"query": profile.instructions[b.row.instruction] + values.instruction_separator}
        for key, b in built.items()
        if b.row.instruction in profile.instructions
    }


def _training_args(
    values: RecipeValues, output: Path, device: str, world: int, prompts: dict
) -> Any:
    from sentence_transformers import SentenceTransformerTrainingArguments

    from neobench.train.sampling import AlphaBatchSampler

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
        output_dir=str(output / CHECKPOINTS),
        max_steps=values.max_steps,
        per_device_train_batch_size=values.batch_size // world,
        learning_rate=values.learning_rate,
        adam_beta1=values.adam_beta1,
        adam_beta2=values.adam_beta2,
        adam_epsilon=values.adam_epsilon,
        weight_decay=values.weight_decay,
        max_grad_norm=values.max_grad_norm,
        lr_scheduler_type=values.lr_schedule,
        warmup_steps=math.ceil(values.warmup_ratio * values.max_steps),
        bf16=_bf16(values, device),
        use_cpu=not cuda,
        ddp_backend="gloo" if world > 1 and not cuda else None,
        seed=values.seed,
        data_seed=values.seed,
        logging_steps=1,
        logging_nan_inf_filter=False,  # a NaN must reach our guard, not be averaged away
        save_strategy="steps",
        save_steps=values.checkpoint_every,
        report_to="none",
        disable_tqdm=True,
        prompts=prompts or None,
        multi_dataset_batch_sampler=sampler,
        dataloader_drop_last=False,
    )


# ---------------------------------------------------------------------------------------------
# 6. Train


def _train(trainer: Any, output: Path, card: FinetuneCard, resume: bool) -> None:
    from neobench.train.telemetry import NonFiniteLoss

    try:
        trainer.train(resume_from_checkpoint=run_folder.last_checkpoint(output) if resume else None)
    except NonFiniteLoss as error:
        last = run_folder.last_checkpoint(output)
        _end_card(output, card, f"stopped: non-finite loss at step {error.step}")
        raise NeobenchError(
            f"training stopped: the loss or its gradient became {error.loss} at step {error.step} "
            "on dataset "
            f"{error.dataset}. The last good checkpoint is {last or 'none (no checkpoint yet)'}; "
            "lower learning_rate or check that dataset, then re-run with --resume."
        ) from None
    except KeyboardInterrupt:
        _end_card(output, card, "interrupted")
        raise
    except Exception as error:
        _end_card(output, card, f"failed: {type(error).__name__}: {error}".splitlines()[0])
        if disk_full(error):
            raise RunFailed(
                f"--output {output}: the disk is full (while writing a checkpoint). Free space, "
                "then re-run with --resume to continue from the last whole checkpoint "
                f"({run_folder.last_checkpoint(output) or 'none yet: run again without --resume'})."
            ) from None
        raise


# ---------------------------------------------------------------------------------------------
# 7. Save


def _save(inputs: Inputs, model: Any, card: FinetuneCard, steps: int) -> float | None:
    """Save the model with its evaluation prompts, complete the card, drop the checkpoints
    (unless the recipe keeps them). Returns the final loss."""
    from neobench.train.telemetry import plot_curve, read_curve

    output, recipe = inputs.output, inputs.recipe
    curve = read_curve(output / CURVE)
    final_loss = curve[-1]["loss"] if curve else None
    if not is_main_process():
        return final_loss
    model.prompts = mteb_prompts(inputs.eval_profile, _benchmark_tasks())[0]
    model.default_prompt_name = None
    model.save(str(output))
    title = f"{card.output_model.name} | {recipe.name} {recipe.sha256[:12]}"
    plot_curve(output / CURVE, output / CURVE_PNG, title)
    keep = recipe.values.keep_checkpoints
    card.status, card.finished = "complete", record.now()
    card.steps, card.final_loss = steps, final_loss
    card.checkpoints = "kept" if keep else "removed (run complete)"
    record.write_finetune_card(output / CARD, card)
    # The model is saved and the card says complete: the checkpoints (weights + optimizer
    # state, several times the model's size) are only needed to resume an unfinished run.
    if not keep:
        run_folder.remove_checkpoints(output)
    return final_loss


def _benchmark_tasks() -> list:
    from neobench.protocol.tasks import load_benchmark

    seen, tasks = set(), []
    for name in PROMPT_BENCHMARKS:
        for task in load_benchmark(name).tasks:
            if task.metadata.name not in seen:
                seen.add(task.metadata.name)
                tasks.append(task)
    return tasks
