"""`neobench finetune`: THE recipe, top to bottom.

record -> data -> model -> loss -> stock SentenceTransformerTrainer -> save. Launch as is on one
device, or with `torchrun --nproc_per_node N -m neobench finetune ...` / `accelerate launch` on
many: the global batch, the dataset drawn at each step and the candidate pool of the loss are the
same for any number of devices, so the result does not depend on it.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neobench import attention, mirror, record
from neobench.data import BuiltDataset, build_dataset
from neobench.errors import (
    NeobenchError,
    RunFailed,
    collect,
    disk_full,
    unknown,
    writable_folder_problems,
)
from neobench.instructions import load_profile, load_train_instructions, mteb_prompts
from neobench.manifest import load_manifest, validate_manifest
from neobench.model import check_spec, load_model, resolve_device
from neobench.recipe import Recipe, apply_overrides, load_recipe, parse_overrides

if TYPE_CHECKING:
    from collections.abc import Callable

logger = logging.getLogger(__name__)

CARD = "neobench_run_card.yaml"
CURVE = "neobench_loss_curve.jsonl"
CURVE_PNG = "neobench_loss_curve.png"
CHECKPOINTS = "checkpoints"


@dataclass
class FinetuneConfig:
    """Inputs of one fine-tuning run; the recipe holds every training value."""

    model: str
    output: str
    recipe: str = "neobert-mteb-2k"
    overrides: list[str] = field(default_factory=list)  # key=value
    data_dir: str | None = None
    seed: int | None = None
    resume: bool = False
    device: str = "auto"
    trust_remote_code: bool = False
    model_name: str | None = None  # results name of the output model (default: neobench/<folder>)
    # auto: the fastest the backbone's class supports (flash_attention_2 > sdpa > eager)
    attn_implementation: str = "auto"


@dataclass
class FinetuneSummary:
    output: Path
    recipe_sha256: str
    steps: int
    final_loss: float | None
    datasets: dict[str, int]


def resolve_recipe(cfg: FinetuneConfig) -> Recipe:
    overrides = parse_overrides(cfg.overrides)
    if cfg.seed is not None:
        overrides["seed"] = str(cfg.seed)
    recipe = apply_overrides(load_recipe(cfg.recipe), overrides)
    problems = []
    checks = {
        "max_steps": recipe["max_steps"] > 0,
        "batch_size": recipe["batch_size"] > 0,
        "temperature": recipe["temperature"] > 0,
        "sampling_alpha": recipe["sampling_alpha"] >= 0,
        "max_hard_negatives": recipe["max_hard_negatives"] >= 0,
        "warmup_ratio": 0 <= recipe["warmup_ratio"] < 1,
        "checkpoint_every": recipe["checkpoint_every"] > 0,
        "gradcache_mini_batch": recipe["gradcache_mini_batch"] >= 0,
    }
    problems += [
        f"recipe value {k}={recipe[k]!r} is out of range." for k, ok in checks.items() if not ok
    ]
    fixed = {
        "similarity": "cosine",
        "pooling": "mean",
        "loss_reduction": "mean",
        "loss_direction": "query_to_doc",
        "lr_schedule": "linear",
    }
    problems += [
        f"recipe value {k}={recipe[k]!r}: this neobench version implements {v!r} only."
        for k, v in fixed.items()
        if recipe[k] != v
    ]
    if problems:
        raise NeobenchError(problems)
    return recipe


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def finetune(
    cfg: FinetuneConfig,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    extra_callbacks: list[Any] | None = None,
) -> FinetuneSummary:
    """Run the recipe. Every input problem is reported before any data or model loads."""
    # 1. Recipe, manifest, instructions, output folder: validate everything cheap at once.
    problems: list[str] = []
    recipe = collect(problems, resolve_recipe, cfg)
    collect(problems, check_spec, cfg.model)
    collect(problems, resolve_device, cfg.device)
    collect(problems, attention.check, cfg.attn_implementation)
    output = Path(cfg.output).expanduser().resolve()
    problems += _output_problems(output, cfg.resume)
    if recipe is None:
        raise NeobenchError(problems)
    manifest = collect(problems, load_manifest, recipe.manifest)
    train_profile = collect(problems, load_train_instructions, recipe["instructions"])
    eval_profile = collect(problems, load_profile, recipe["eval_instructions"])
    rows = []
    if manifest and train_profile:
        problems += validate_manifest(manifest, set(train_profile[1]))
        keys = list(manifest.rows) if recipe["datasets"] == "all" else list(recipe["datasets"])
        for key in keys:
            if key not in manifest.rows:
                problems.append(
                    unknown(f"dataset key in manifest {manifest.name!r}", key, manifest.rows)
                )
        rows = [manifest.rows[k] for k in keys if k in manifest.rows]
    world = world_size()
    if recipe["batch_size"] % world:
        problems.append(
            f"batch_size={recipe['batch_size']} is not divisible by the {world} processes."
        )
    if problems:
        raise NeobenchError(problems)

    # 2. Data: present in the mirror (or reachable on the hub), then built and size-checked.
    data_dir = mirror.resolve_data_dir(cfg.data_dir)
    _check_sources(rows, data_dir, recipe)
    built = {row.key: build_dataset(row, data_dir, recipe["max_hard_negatives"]) for row in rows}
    too_small = [
        f"dataset {k} has {len(b.dataset)} usable rows, fewer than one global batch "
        f"({recipe['batch_size']}); lower batch_size or drop it from datasets="
        for k, b in built.items()
        if len(b.dataset) < recipe["batch_size"]
    ]
    if too_small:
        raise NeobenchError(too_small)

    # 3. Model: any encoder + mean pooling, the recipe's length, no dropout.
    device = resolve_device(cfg.device)
    loaded = load_model(
        cfg.model,
        max_seq_length=recipe["max_seq_length"],
        trust_remote_code=cfg.trust_remote_code,
        device=device,
        attn_implementation=cfg.attn_implementation,
        # The trainer autocasts to bf16 on CUDA: flash kernels can run there.
        half=device.startswith("cuda") and recipe["mixed_precision"] == "bf16",
        disable_dropout=recipe["dropout"] == 0.0,
    )
    model = loaded.model

    # 4. Run card, before any work. A folder left by a run that failed before its first
    # checkpoint is started afresh (its loss curve would otherwise be appended to).
    if not cfg.resume and is_main_process() and _unfinished_without_checkpoint(output):
        logger.warning(
            "%s held a run that stopped before any checkpoint; starting it again", output
        )
        for name in (CURVE, CURVE_PNG):
            (output / name).unlink(missing_ok=True)
    sizes = {k: len(b.dataset) for k, b in built.items()}
    card = _card(cfg, recipe, loaded, built, data_dir, train_profile, device, world)
    if is_main_process():
        record.write_card(output / CARD, card)

    # 5. Loss and trainer: stock sentence-transformers parts, extended by our batch sampler.
    trainer, _ = _trainer(recipe, model, built, train_profile[1], output, device, world, on_step)
    for callback in extra_callbacks or []:
        trainer.add_callback(callback)
    from neobench.train_log import NonFiniteLoss

    try:
        trainer.train(resume_from_checkpoint=_last_checkpoint(output) if cfg.resume else None)
    except NonFiniteLoss as error:
        last = _last_checkpoint(output)
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
                f"({_last_checkpoint(output) or 'none yet: run again without --resume'})."
            ) from None
        raise

    # 6. Save: a SentenceTransformer folder carrying the evaluation prompts of the recipe.
    from neobench.train_log import plot_curve, read_curve

    curve = read_curve(output / CURVE)
    if is_main_process():
        v1_v2 = _benchmark_tasks()
        model.prompts = mteb_prompts(eval_profile, v1_v2)[0]
        model.default_prompt_name = None
        model.save(str(output))
        plot_curve(
            output / CURVE,
            output / CURVE_PNG,
            f"{card['output_model']['name']} | {recipe.name} {recipe.sha256[:12]}",
        )
        keep = bool(recipe.values.get("keep_checkpoints", False))  # older recipe files lack it
        card.update(
            status="complete",
            finished=record.now(),
            steps=trainer.state.global_step,
            final_loss=curve[-1]["loss"] if curve else None,
            checkpoints="kept" if keep else "removed (run complete)",
        )
        record.write_card(output / CARD, card)
        # The model is saved and the card says complete: the checkpoints (weights + optimizer
        # state, several times the model's size) are only needed to resume an unfinished run.
        if not keep:
            remove_checkpoints(output)
    return FinetuneSummary(
        output,
        recipe.sha256,
        trainer.state.global_step,
        curve[-1]["loss"] if curve else None,
        sizes,
    )


def _output_problems(output: Path, resume: bool) -> list[str]:
    problems = writable_folder_problems(
        output, "--output", "Pass a new folder you can write, e.g. --output runs/my-model."
    )
    if problems:
        return problems
    if resume:
        if _last_checkpoint(output) is None:
            return [
                f"--resume: {output} holds no checkpoint to resume from (expected "
                f"{output / CHECKPOINTS}/checkpoint-N/). Run again without --resume."
                + (
                    " (It holds an unfinished run that can be started again.)"
                    if _unfinished_without_checkpoint(output)
                    else ""
                )
            ]
        return []
    if output.exists() and any(output.iterdir()):
        if _unfinished_without_checkpoint(output):
            return []  # nothing of value: the new run replaces the card of the failed one
        return [
            f"--output {output} already exists and is not empty: nothing is overwritten. "
            "Choose a new folder, delete it, or pass --resume to continue its run."
        ]
    return []


# What a run leaves before its first checkpoint: nothing a new run would lose by replacing it.
_EARLY_FILES = frozenset({CARD, CURVE, CURVE_PNG, CHECKPOINTS})


def _unfinished_without_checkpoint(output: Path) -> bool:
    """A folder that holds only the card (and loss curve) of a run that stopped before its
    first checkpoint: it failed, or its process is gone. Such a folder can be reused."""
    if not (output / CARD).is_file() or _last_checkpoint(output) is not None:
        return False
    if any(p.name not in _EARLY_FILES for p in output.iterdir()):
        return False
    try:
        card = record.read_card(output / CARD)
    except NeobenchError:
        return False
    status = str(card.get("status", ""))
    return status.startswith(("failed", "stopped", "interrupted")) or record.is_orphaned(card)


def _end_card(output: Path, card: dict[str, Any], status: str) -> None:
    """Say in the card how the run ended; a folder that takes no more writes keeps the old
    card, which the next run reads as orphaned (its process is gone)."""
    if not is_main_process():
        return
    card.update(status=status, finished=record.now())
    try:
        record.write_card(output / CARD, card)
    except OSError as error:
        logger.warning("could not update %s: %s", output / CARD, error.strerror)


def _last_checkpoint(output: Path) -> str | None:
    folder = output / CHECKPOINTS
    steps = (
        [p for p in folder.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()]
        if folder.is_dir()
        else []
    )
    return str(max(steps, key=lambda p: int(p.name.split("-")[-1]))) if steps else None


def _check_sources(rows: list, data_dir: Path | None, recipe: Recipe) -> None:
    hub_rows = [r for r in rows if not r.data_files]
    if data_dir is not None:
        missing = [r for r in hub_rows if not (data_dir / r.hf_id).is_dir()]
        missing_files = [
            f"dataset {r.key}: file {data_dir / f} does not exist."
            for r in rows
            if r.data_files
            for f in ([r.data_files] if isinstance(r.data_files, str) else r.data_files)
            if not (data_dir / f).is_file()
        ]
        lines = [
            f"dataset {r.key} needs repo '{r.hf_id}', which is not in the mirror {data_dir} "
            f"(expected folder {data_dir / r.hf_id})."
            for r in missing
        ] + missing_files
        if missing:
            lines.append(
                f"Fix: on a connected machine run `neobench data prefetch --recipe {recipe.name} "
                f"--out {data_dir}`, or drop them with datasets=KEY,KEY."
            )
        if lines:
            raise NeobenchError(lines)
    elif hub_rows and (mirror.hub_offline() or not mirror.hub_reachable()):
        raise NeobenchError(
            [
                f"dataset {r.key} needs repo '{r.hf_id}' from the Hugging Face hub, which is "
                "offline or unreachable."
                for r in hub_rows
            ]
            + [
                "Fix: pass --data-dir DIR, a mirror made with "
                f"`neobench data prefetch --recipe {recipe.name} --out DIR`."
            ]
        )


def _benchmark_tasks() -> list:
    from neobench.tasks import load_benchmark

    seen, tasks = set(), []
    for name in ("MTEB(eng, v1)", "MTEB(eng, v2)"):
        for task in load_benchmark(name).tasks:
            if task.metadata.name not in seen:
                seen.add(task.metadata.name)
                tasks.append(task)
    return tasks


def _trainer(
    recipe: Recipe,
    model: Any,
    built: dict[str, BuiltDataset],
    instructions: dict[str, str],
    output: Path,
    device: str,
    world: int,
    on_step: Callable | None,
) -> tuple[Any, Any]:
    from datasets import DatasetDict
    from sentence_transformers import (
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import (
        CachedMultipleNegativesRankingLoss,
        MultipleNegativesRankingLoss,
    )

    from neobench.sampling import AlphaBatchSampler, schedule
    from neobench.train_log import LossCurve, TokenCountingCollator

    keys = list(built)
    train = DatasetDict({k: built[k].dataset for k in keys})
    sep = recipe["instruction_separator"]
    prompts = {
        k: {"query": instructions[row_instruction] + sep}
        for k, row_instruction in _instruction_keys(built, recipe).items()
        if row_instruction in instructions
    }
    # Candidates = positives + hard negatives of the whole global batch, gathered across ranks
    # with gradients; cross-entropy averaged over queries; scale = 1 / temperature.
    common = {
        "scale": 1.0 / recipe["temperature"],
        "gather_across_devices": world > 1,
        "directions": ("query_to_doc",),
    }
    if recipe["gradcache_mini_batch"]:
        loss = CachedMultipleNegativesRankingLoss(
            model, mini_batch_size=recipe["gradcache_mini_batch"], **common
        )
    else:
        loss = MultipleNegativesRankingLoss(model, **common)
    sizes = [len(train[k]) for k in keys]

    # A partial of a module-level class: the trainer pickles its arguments into checkpoints.
    sampler = functools.partial(
        AlphaBatchSampler,
        global_batch_size=recipe["batch_size"],
        alpha=recipe["sampling_alpha"],
        max_steps=recipe["max_steps"],
        world_size=world,
    )

    cuda = device.startswith("cuda")
    args = SentenceTransformerTrainingArguments(
        output_dir=str(output / CHECKPOINTS),
        max_steps=recipe["max_steps"],
        per_device_train_batch_size=recipe["batch_size"] // world,
        learning_rate=recipe["learning_rate"],
        adam_beta1=recipe["adam_beta1"],
        adam_beta2=recipe["adam_beta2"],
        adam_epsilon=recipe["adam_epsilon"],
        weight_decay=recipe["weight_decay"],
        max_grad_norm=recipe["max_grad_norm"],
        lr_scheduler_type="linear",
        warmup_steps=math.ceil(recipe["warmup_ratio"] * recipe["max_steps"]),
        bf16=cuda and recipe["mixed_precision"] == "bf16",
        use_cpu=not cuda,
        ddp_backend="gloo" if world > 1 and not cuda else None,
        seed=recipe["seed"],
        data_seed=recipe["seed"],
        logging_steps=1,
        logging_nan_inf_filter=False,  # a NaN must reach our guard, not be averaged away
        save_strategy="steps",
        save_steps=recipe["checkpoint_every"],
        report_to="none",
        disable_tqdm=True,
        prompts=prompts or None,
        multi_dataset_batch_sampler=sampler,
        dataloader_drop_last=False,
    )
    collator = TokenCountingCollator(preprocess_fn=model.preprocess, prompts=args.prompts)
    by_step = [
        keys[i]
        for i in schedule(sizes, recipe["sampling_alpha"], recipe["seed"], recipe["max_steps"])
    ]
    curve = LossCurve(output / CURVE, by_step, collator, world, on_step)
    from transformers.trainer_callback import PrinterCallback

    trainer = SentenceTransformerTrainer(
        model=model,
        args=args,
        train_dataset=train,
        loss=loss,
        data_collator=collator,
        callbacks=[curve],
    )
    trainer.remove_callback(PrinterCallback)  # our LossCurve reports each step
    return trainer, curve


def _instruction_keys(built: dict[str, BuiltDataset], recipe: Recipe) -> dict[str, str]:
    manifest = load_manifest(recipe.manifest)
    return {k: manifest.rows[k].instruction for k in built}


def _card(
    cfg: FinetuneConfig,
    recipe: Recipe,
    loaded: Any,
    built: dict[str, BuiltDataset],
    data_dir: Path | None,
    train_profile: tuple,
    device: str,
    world: int,
) -> dict[str, Any]:
    import torch

    manifest = load_manifest(recipe.manifest)
    lock = mirror.read_lock(data_dir) if data_dir else {}
    data = {}
    for key, b in built.items():
        row = manifest.rows[key]
        data[key] = {
            "repo_id": row.repo_id,
            "config": row.config,
            "split": row.split,
            "pinned_revision": row.revision,
            "mirror_revision": (lock.get(row.hf_id) or {}).get("resolved_revision")
            if row.hf_id
            else None,
            "source": b.source,
            "rows_raw": b.rows_raw,
            "rows": len(b.dataset),
            "negatives_per_query": b.num_negatives,
            "fingerprint": b.dataset._fingerprint,
            "instruction": row.instruction,
            "in_domain": row.in_domain,
        }
    cuda = device.startswith("cuda")
    return {
        "kind": "neobench finetune",
        "started": record.now(),
        "status": "running",
        "owner": record.owner(),
        "config": asdict(cfg),
        "recipe": recipe.record(),
        "manifest": {"name": manifest.name, "file": manifest.path},
        "data": data,
        "sampling_probabilities": _probabilities(built, recipe),
        "instructions": {
            "train_profile": train_profile[0],
            "train_sha256": train_profile[2],
            "eval_profile": recipe["eval_instructions"],
        },
        "output_model": {
            "name": cfg.model_name or f"neobench/{Path(cfg.output).name}",
            "recipe_sha256": recipe.sha256,
        },
        "model": {
            "base": cfg.model,
            "name": loaded.name,
            "revision": loaded.revision,
            "architecture": loaded.architecture,
            "max_seq_length": loaded.max_seq_length,
            # The trainer runs the backbone's own forward (never neobench's packed encoder).
            "attn_implementation": loaded.forward_attn_implementation,
            "attn_implementation_requested": cfg.attn_implementation,
            "tokenizer": loaded.tokenizer,
            "pooling": "mean",
            "recipe_sha256": recipe.sha256,
        },
        "runtime": {
            **record.device_info(device),
            "world_size": world,
            "dtype": "bfloat16 autocast"
            if cuda and recipe["mixed_precision"] == "bf16"
            else "float32",
            "torch_threads": torch.get_num_threads(),
        },
        "seed": recipe["seed"],
        "environment": record.environment(),
    }


def _probabilities(built: dict[str, BuiltDataset], recipe: Recipe) -> dict[str, float]:
    from neobench.sampling import probabilities

    p = probabilities([len(b.dataset) for b in built.values()], recipe["sampling_alpha"])
    return {k: round(float(v), 6) for k, v in zip(built, p, strict=True)}


def remove_checkpoints(output: Path) -> None:
    """Drop intermediate checkpoints once a run is complete (kept by default for --resume)."""
    shutil.rmtree(output / CHECKPOINTS, ignore_errors=True)
