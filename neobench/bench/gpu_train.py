"""`bench gpu`, section train: fine-tuning steps through neobench's recipe and through the stock
sentence-transformers trainer, same model, pairs, loss, batch and optimiser settings.

neobench's side is `finetune()` itself (the recipe's sampler, token-counting collator, loss
curve; bf16 autocast on CUDA), on a one-row manifest over the pairs. The stock side is
`SentenceTransformerTrainer` with `MultipleNegativesRankingLoss` at the recipe's temperature and
optimiser values, its own batch sampler and collator. Both load the model with dropout off (the
recipe's setting), so what differs is the training path, not the network. Each runs one step more
than is timed: tokens/s counts real tokens (queries and positives) from the end of the first step
to the end of the last, so start-up and first-step kernel choices are left out of both.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from neobench.bench.config import GpuScale
from neobench.bench.encode import peak_memory_mb, reset_peak_memory
from neobench.bench.gpu_inputs import BenchModel, Budget, Section, training_pairs
from neobench.core.errors import NeobenchError

MANIFEST = "bench-manifest.yaml"
PAIRS = "bench-pairs.parquet"
# One local row over the pairs file; "none" instructions keep both trainers' inputs identical.
_ROW = """name: bench-gpu
datasets:
  BENCH:
    data_files: {pairs}
    query: query
    positive: positive
    licence: the texts' own (see the JSON's texts.source)
    instruction: STSBENCHMARK
    source: neobench
"""


def train_section(
    models: list[BenchModel], texts: list[str], scale: GpuScale, device: str, budget: Budget
) -> Section:
    """Both trainers on every model, until the budget is spent."""
    import pandas as pd

    section = Section()
    queries, positives = training_pairs(texts)
    with tempfile.TemporaryDirectory(prefix="neobench-bench-gpu-") as tmp:
        folder = Path(tmp)
        pd.DataFrame({"query": queries, "positive": positives}).to_parquet(folder / PAIRS)
        (folder / MANIFEST).write_text(_ROW.format(pairs=PAIRS))
        if models and device.startswith("cuda"):
            # The first trainer in a process pays the device's one-time costs (CUDA context,
            # kernels chosen per shape): on an H200 BERT-base's first timed run was 0.44x a warm
            # one. One untimed pass of each trainer on the first model, so every row runs warm.
            neobench_steps(models[0], folder, scale, device, output="warm-neobench")
            stock_steps(models[0], folder, queries, positives, scale, device, output="warm-stock")
        for model in models:
            if budget.spent(section, f"training {model.name}"):
                break
            for row in (
                neobench_steps(model, folder, scale, device),
                stock_steps(model, folder, queries, positives, scale, device),
            ):
                section.rows.append(row)
                if not row["loss_finite"]:
                    section.mark("failed", f"{model.name}, {row['trainer']}: non-finite loss")
    return section


def neobench_steps(
    model: BenchModel, folder: Path, scale: GpuScale, device: str, output: str | None = None
) -> dict:
    """`finetune()` on the pairs for scale.train_steps + 1 steps, into ``folder / output``; its
    row."""
    from neobench.train.finetune import FinetuneConfig, finetune

    steps: list[tuple[float, float, float]] = []  # (seconds since step 1 began, tokens, loss)

    def on_step(entry: dict[str, Any]) -> None:
        tokens = (entry["tokens_per_s"] or 0.0) * entry["elapsed_s"]
        steps.append((entry["elapsed_s"], tokens, entry["loss"]))

    overrides = [
        f"manifest={folder / MANIFEST}", "datasets=BENCH", "instructions=none",
        f"max_steps={scale.train_steps + 1}", f"batch_size={scale.train_batch}",
        f"max_seq_length={scale.train_length}", f"checkpoint_every={10**9}",
    ]  # fmt: skip
    cfg = FinetuneConfig(
        model=model.path,
        output=str(folder / (output or f"neobench-{model.name}")),
        data_dir=str(folder),
        device=device,
        overrides=overrides,
    )
    reset_peak_memory(device)
    error = None
    try:
        finetune(cfg, on_step=on_step)
    except NeobenchError as stopped:  # the recipe's guard: a non-finite loss stops the run
        error = " ".join(stopped.problems)
    return _row(model.name, "neobench", steps, device, error)


def stock_steps(
    model: BenchModel,
    folder: Path,
    queries: list[str],
    positives: list[str],
    scale: GpuScale,
    device: str,
    output: str | None = None,
) -> dict:
    """The stock trainer on the same pairs and settings, into ``folder / output``; its row."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers.trainer_callback import PrinterCallback

    from neobench.models import register
    from neobench.models.load import dropout_overrides, transformer_folder
    from neobench.protocol.config import STANDARD_RECIPE
    from neobench.protocol.recipe import load_recipe
    from neobench.train.telemetry import TokenCountingCollator

    register()  # model_type "neobert" for the stock loader
    values = load_recipe(STANDARD_RECIPE).values
    config = json.loads((transformer_folder(Path(model.path)) / "config.json").read_text())
    reset_peak_memory(device)
    network = SentenceTransformer(
        model.path, device=device, config_kwargs=dropout_overrides(config) or None
    )
    network.max_seq_length = scale.train_length
    collator = TokenCountingCollator(preprocess_fn=network.preprocess)
    clock = _clock(collator)
    trainer = SentenceTransformerTrainer(
        model=network,
        args=_stock_args(values, folder / (output or f"stock-{model.name}"), scale, device),
        train_dataset=Dataset.from_dict({"query": queries, "positive": positives}),
        loss=MultipleNegativesRankingLoss(network, scale=1.0 / values.temperature),
        data_collator=collator,
        callbacks=[clock],
    )
    trainer.remove_callback(PrinterCallback)  # the figures go to the JSON, not to stdout
    trainer.train()
    return _row(model.name, "stock", clock.steps, device, None)


def _stock_args(values: Any, output: Path, scale: GpuScale, device: str) -> Any:
    """The stock arguments with the recipe's optimiser values and precision."""
    from sentence_transformers import SentenceTransformerTrainingArguments

    from neobench.train.trainer import optimiser_arguments

    steps = scale.train_steps + 1
    return SentenceTransformerTrainingArguments(
        output_dir=str(output),
        max_steps=steps,
        per_device_train_batch_size=scale.train_batch,
        **optimiser_arguments(values, steps, device),
        seed=values.seed,
        logging_steps=1,  # the loss of every step (and a device sync per step, as neobench's)
        logging_nan_inf_filter=False,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
    )


def _clock(collator: Any) -> Any:
    """A callback that records (seconds since the first step began, tokens collated, loss) at
    every logged step: the convention of neobench's loss curve (neobench/train/telemetry.py)."""
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        def __init__(self) -> None:
            self.steps: list[tuple[float, float, float]] = []
            self.start: float | None = None
            self.tokens_at_start = collator.tokens

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.start = self.start or time.perf_counter()

        def on_log(
            self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any
        ) -> None:
            if logs and "loss" in logs and self.start is not None:
                tokens = collator.tokens - self.tokens_at_start
                self.steps.append((time.perf_counter() - self.start, tokens, float(logs["loss"])))

    return StepClock()


def _row(
    name: str, trainer: str, steps: list[tuple[float, float, float]], device: str, error: str | None
) -> dict:
    """One trainer's figures: tokens/s over steps 2..N, peak memory, the loss and its finiteness."""
    timed = len(steps) >= 2 and steps[-1][0] > steps[0][0]
    tokens = steps[-1][1] - steps[0][1] if timed else 0.0
    seconds = steps[-1][0] - steps[0][0] if timed else 0.0
    losses = [loss for _, _, loss in steps]
    return {
        "model": name,
        "trainer": trainer,
        "steps_timed": max(0, len(steps) - 1),
        "tokens": round(tokens),
        "seconds": round(seconds, 4),
        "tokens_per_s": round(tokens / seconds, 1) if timed else None,
        "peak_memory_mb": round(peak_memory_mb(device), 1),
        "first_loss": losses[0] if losses else None,
        "final_loss": losses[-1] if losses else None,
        "loss_finite": bool(losses) and error is None and all(map(math.isfinite, losses)),
        "precision": "bf16 autocast" if device.startswith("cuda") else "float32",
        "error": error,
    }
