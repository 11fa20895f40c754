"""`neobench finetune`: THE recipe, top to bottom, in numbered steps.

record -> data -> model -> loss -> stock SentenceTransformerTrainer -> save, on one device or
under `torchrun --nproc_per_node N -m neobench finetune ...` / `accelerate launch`: the global
batch, the dataset drawn at each step and the loss's candidate pool do not depend on the number
of devices. Each step is one call, to a function below or to the module that owns it: inputs
(1), data and dev slice (2), packing (3), run_card (4), trainer (5), dev_metric (7).
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neobench.core import cards as record
from neobench.core.cards import FinetuneCard
from neobench.core.errors import NeobenchError, RunFailed, disk_full
from neobench.models.load import load_model, resolve_device
from neobench.protocol import mirror
from neobench.protocol.config import FinetuneConfig
from neobench.protocol.data import BuiltDataset
from neobench.protocol.instructions import mteb_prompts
from neobench.train import output as run_folder
from neobench.train.data import build_data
from neobench.train.dev_slice import DevSlice, slice_record
from neobench.train.devices import bf16, is_main_process
from neobench.train.inputs import Inputs, check_inputs, resolve_recipe
from neobench.train.output import CARD, CHECKPOINTS, CURVE, CURVE_PNG
from neobench.train.packing import Padding, applied, choose
from neobench.train.run_card import complete_card, end_card, record_padding, start_card
from neobench.train.seeds import seed_configs
from neobench.train.trainer import build_trainer

if TYPE_CHECKING:
    from collections.abc import Callable

# resolve_recipe and seed_configs live beside the recipe (inputs, seeds); they stay importable
# from here, the module the CLI and users call.
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
    datasets: dict[str, int]  # dataset key -> rows trained on
    dev: float | None = None  # the dev metric (MRR@10, macro) when the recipe holds a slice out

    def to_pandas(self) -> Any:
        """The loss curve: one row per step (dataset drawn, loss, learning rate, grad norm,
        tokens), from the run's neobench_loss_curve.jsonl."""
        import pandas as pd

        from neobench.train.telemetry import read_curve

        return pd.DataFrame(read_curve(self.output / CURVE))


def finetune(
    cfg: FinetuneConfig,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    extra_callbacks: list[Any] | None = None,
    progress: bool = True,
) -> FinetuneSummary:
    """Run the recipe for one seed (`seed_configs` expands --seeds); every input problem is
    reported before any data or model loads. ``progress=False`` (the Python API's default)
    keeps the bar sentence-transformers draws while the trainer is built off stderr."""
    if cfg.seeds is not None:
        raise NeobenchError(
            "finetune() runs one seed; expand --seeds with seed_configs() and run each config."
        )
    # 1. Inputs: recipe, model id, device, output folder, manifest, instructions, all at once.
    inputs = check_inputs(cfg)
    output = inputs.output

    # 2. Data: present in the mirror (or reachable on the hub), then built, the dev slice held
    #    out (dev_rows > 0), and size-checked.
    data_dir = mirror.resolve_data_dir(cfg.data_dir)
    built, slices = build_data(inputs, data_dir)

    # 3. Model: any encoder + mean pooling, the recipe's length and dropout; its training
    #    forwards packed (real tokens only) where it can, else padded (packing.py).
    device, values = resolve_device(cfg.device), inputs.recipe.values
    loaded = load_model(
        cfg.model,
        max_seq_length=values.max_seq_length,
        trust_remote_code=cfg.trust_remote_code,
        device=device,
        attn_implementation=cfg.attn_implementation,
        half=bf16(values, device),  # the trainer autocasts: flash kernels can run there
        disable_dropout=values.dropout == 0.0,
    )
    padding = choose(cfg.padding, loaded, device, half=bf16(values, device))

    # 4. Run card, before any work.
    if is_main_process() and (not cfg.resume or run_folder.last_checkpoint(output) is None):
        run_folder.clear_failed_start(output)  # nothing to resume from: step 0 again
    card = start_card(cfg, inputs, loaded, built, data_dir, device)
    record_padding(card, padding)
    card.dev = slice_record(slices, values.dev_rows, values.seed) if slices else None
    if is_main_process():
        record.write_finetune_card(output / CARD, card)

    # 5. Loss and trainer: stock sentence-transformers parts, extended by our batch sampler;
    #    --report-to: the trainer's tracker, with the recipe and the card as the run's config.
    trainer = build_trainer(inputs, loaded.model, built, device, on_step, card, progress)
    for callback in extra_callbacks or []:
        trainer.add_callback(callback)

    # 6. Train; a run that stops says so in its card, and how to continue.
    # 7. Dev metric: the trained model on the held-out slice, into the card (main process).
    # 8. Save: a SentenceTransformer folder carrying the evaluation prompts of the recipe.
    # SIGTERM / SIGUSR2 only raise a flag from here on (stop.py). After the last step the save
    # finishes first (a cut save would make a finished run train its last window again), and
    # the dev metric stops at the next dataset, so the save fits in Slurm's notice.
    from neobench.train.stop import GracefulStop

    with GracefulStop() as stop:
        _train(trainer, output, card, cfg.resume, stop, padding)
        steps = trainer.state.global_step
        _score_dev(inputs, loaded.model, built, slices, card, stop)
        final_loss = _save(inputs, loaded.model, card, steps)
    sizes = {k: len(b.dataset) for k, b in built.items()}
    dev = card.dev["value"] if card.dev else None
    return FinetuneSummary(output, inputs.recipe.sha256, steps, final_loss, sizes, dev)


# 6. Train ------------------------------------------------------------------------------------


def _train(
    trainer: Any, output: Path, card: FinetuneCard, resume: bool, stop: Any, padding: Padding
) -> None:
    """Train under ``stop`` (an entered GracefulStop): a signal ends it at a step end; the
    forwards packed or padded as ``padding`` says (the dev metric and the save after it run
    the model as loaded)."""
    from neobench.train.stop import Stopped, name
    from neobench.train.telemetry import NonFiniteLoss

    if resume and is_main_process():
        for path in run_folder.set_aside_partial(output):
            logger.warning("%s: set aside, the run resumes from the last whole checkpoint", path)
    trainer.add_callback(stop.callback())
    try:
        start = run_folder.last_checkpoint(output) if resume else None
        with applied(trainer.model, padding):
            trainer.train(resume_from_checkpoint=start)
    except NonFiniteLoss as error:
        last = run_folder.last_checkpoint(output)
        end_card(output, card, f"stopped: non-finite loss at step {error.step}")
        raise NeobenchError(
            f"training stopped: the loss or its gradient became {error.loss} at step {error.step} "
            "on dataset "
            f"{error.dataset}. The last good checkpoint is {last or 'none (no checkpoint yet)'}; "
            "lower learning_rate or check that dataset, then re-run with --resume."
        ) from None
    except KeyboardInterrupt:
        end_card(output, card, "interrupted")
        raise
    except Exception as error:
        end_card(output, card, f"failed: {type(error).__name__}: {error}".splitlines()[0])
        if disk_full(error):
            raise RunFailed(
                f"--output {output}: the disk is full (while writing a checkpoint). Free space, "
                "then re-run with --resume to continue from the last whole checkpoint "
                f"({run_folder.last_checkpoint(output) or 'none yet: run again without --resume'})."
            ) from None
        raise
    step, signum = trainer.state.global_step, stop.signum
    if signum is not None and step < trainer.state.max_steps:
        last = run_folder.last_checkpoint(output)
        end_card(output, card, f"interrupted: {name(signum)} at step {step}")
        raise Stopped(
            f"stopped by {name(signum)} at step {step} of {trainer.state.max_steps}; the last "
            f"whole checkpoint is {last or 'none'}. Run the same command with --resume to "
            "continue from it (a Slurm job of a study does so by itself when requeued).",
            signum,
            step,
        )


# 7. Dev metric -------------------------------------------------------------------------------


def _score_dev(
    inputs: Inputs,
    model: Any,
    built: dict[str, BuiltDataset],
    slices: dict[str, DevSlice],
    card: FinetuneCard,
    stop: Any,
) -> None:
    """Score the trained model on the dev slices into the card (written by the save), on the
    main process only. A signal (``stop``) ends the scoring at the next dataset, and the card
    says the value is missing and why."""
    if not slices or not is_main_process() or card.dev is None:
        return
    from neobench.train.dev_metric import dev_scores
    from neobench.train.trainer import query_prompts

    prompts = query_prompts(built, inputs.recipe.values, inputs.train_profile)
    queries = {k: p["query"] for k, p in prompts.items()}
    scores = dev_scores(model, slices, queries, stopped=lambda: stop.signum is not None)
    if scores["value"] is None and stop.signum is not None:
        card.dev["not_scored"] = "a stop signal came before the dev metric was complete"
    card.dev["value"] = scores["value"]
    for key, entry in scores["per_dataset"].items():
        card.dev["datasets"][key].update(entry)
    logger.info("dev %s: %s", card.dev["metric"], scores["value"])


# 8. Save -------------------------------------------------------------------------------------


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
    complete_card(output, card, steps, final_loss, keep)
    if not keep:  # checkpoints (several times the model's size) only serve to resume
        shutil.rmtree(output / CHECKPOINTS, ignore_errors=True)
    return final_loss


def _benchmark_tasks() -> list:
    from neobench.protocol.tasks import load_benchmark

    tasks: dict[str, Any] = {}
    for name in PROMPT_BENCHMARKS:
        for task in load_benchmark(name).tasks:
            tasks.setdefault(task.metadata.name, task)
    return list(tasks.values())
