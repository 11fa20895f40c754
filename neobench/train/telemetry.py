"""Training telemetry: per-step loss curve (JSONL + PNG), token counting, NaN guard."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentence_transformers.sentence_transformer.data_collator import SentenceTransformerDataCollator
from transformers import TrainerCallback

if TYPE_CHECKING:
    from collections.abc import Callable

    from transformers import TrainerControl, TrainerState, TrainingArguments


@dataclass
class TokenCountingCollator(SentenceTransformerDataCollator):
    """sentence-transformers' collator, counting the real tokens it produces (for tokens/s)."""

    tokens: int = 0

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        batch = super().__call__(features)
        self.tokens += real_tokens(batch)
        return batch


def real_tokens(batch: dict[str, Any]) -> int:
    """The real tokens of a collated batch: each column's attention mask, or all its ids where
    sentence-transformers flattened the column (no mask, no padding: cu_seq_lens_q instead)."""
    total = 0
    for key, ids in batch.items():
        if key.endswith("_input_ids"):
            mask = batch.get(key.removesuffix("input_ids") + "attention_mask")
            total += int(mask.sum()) if mask is not None else int(ids.numel())
    return total


class NonFiniteLoss(RuntimeError):
    """The loss (or its gradient norm) stopped being a finite number."""

    def __init__(self, step: int, dataset: str, value: float) -> None:
        self.step, self.dataset, self.loss = step, dataset, value
        super().__init__(
            f"non-finite loss or gradient ({value}) at step {step} (dataset {dataset})"
        )


class LossCurve(TrainerCallback):
    """Writes one JSON line per optimisation step: dataset drawn, loss, learning rate, grad norm.
    A non-finite loss stops the run before the trainer saves that step: the last checkpoint on
    disk is the last good one."""

    def __init__(
        self,
        path: Path,
        datasets_by_step: list[str],
        collator: TokenCountingCollator,
        world_size: int,
        on_step: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.path, self.datasets_by_step, self.collator = path, datasets_by_step, collator
        self.world_size, self.on_step = world_size, on_step
        self.started: float | None = None
        self.tokens_at_start = 0

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        # A resumed run continues the curve from its checkpoint: drop lines past that step.
        if state.is_world_process_zero:
            kept = [r for r in read_curve(self.path) if r["step"] <= state.global_step]
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text("".join(json.dumps(r) + "\n" for r in kept))
        self.started = None
        self.tokens_at_start = self.collator.tokens

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        # The clock starts at the first optimisation step, after model-card and other set-up work.
        if self.started is None:
            self.started = time.perf_counter()

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> None:
        if not logs or "loss" not in logs:
            return
        step = state.global_step
        dataset = self.datasets_by_step[step - 1]
        loss = float(logs["loss"])
        grad_norm = float(logs.get("grad_norm", 0.0))
        if not math.isfinite(loss) or not math.isfinite(grad_norm):
            raise NonFiniteLoss(step, dataset, loss if not math.isfinite(loss) else grad_norm)
        elapsed = time.perf_counter() - (self.started or time.perf_counter())
        tokens = (self.collator.tokens - self.tokens_at_start) * self.world_size  # all ranks
        entry = {
            "step": step,
            "dataset": dataset,
            "loss": loss,
            "learning_rate": float(logs.get("learning_rate", float("nan"))),
            "grad_norm": grad_norm,
            "tokens_per_s": round(tokens / elapsed, 1) if elapsed > 0 else None,
        }
        if state.is_world_process_zero:
            with self.path.open("a") as handle:
                handle.write(json.dumps(entry) + "\n")
            if self.on_step:
                # For progress display only (not in the curve file): the run's length and clock.
                self.on_step({**entry, "max_steps": state.max_steps, "elapsed_s": elapsed})


def read_curve(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def plot_curve(curve_path: Path, png: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_curve(curve_path)
    if not rows:
        return
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True, height_ratios=[3, 1])
    datasets = sorted({r["dataset"] for r in rows})
    for name in datasets:
        points = [(r["step"], r["loss"]) for r in rows if r["dataset"] == name]
        top.scatter(*zip(*points, strict=True), s=8, label=name)
    steps = [r["step"] for r in rows]
    window = max(1, len(rows) // 20)
    losses = [r["loss"] for r in rows]
    windows = [losses[max(0, i - window + 1) : i + 1] for i in range(len(losses))]
    smooth = [sum(w) / len(w) for w in windows]
    top.plot(steps, smooth, color="black", linewidth=1.2, label=f"mean of last {window}")
    top.set_ylabel("InfoNCE loss")
    top.set_title(title)
    top.legend(fontsize=7, ncol=2)
    bottom.plot(steps, [r["learning_rate"] for r in rows])
    bottom.set_ylabel("learning rate")
    bottom.set_xlabel("step")
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)
