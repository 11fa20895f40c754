"""One GLUE run: a task, a grid point and a seed, trained with the stock transformers Trainer.

Selection and reporting are kept apart by construction: the Trainer evaluates every n steps on the
selection split only (a held-out slice of the training split, or validation with select_on:
validation) and keeps the best checkpoint by it; the validation split is loaded after training
ends and predicted once. A run folder holds ``point.yaml`` (its card, written complete last) and
``predictions.json``; a run killed midway resumes from its last checkpoint.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neobench.compat.transformers import attn_implementation
from neobench.core.card_io import now, read_card, write_card, write_text_atomic
from neobench.core.provenance import device_info, environment
from neobench.protocol.glue import POINT_CARD, PREDICTIONS, GlueSource, GlueTask, metrics
from neobench.protocol.glue_recipe import GlueValues

TRAINER = "trainer"  # the Trainer's checkpoints while the run is in progress


@dataclass(frozen=True)
class RunSpec:
    """What one run trains: ``values`` are the recipe's at the grid point."""

    task: GlueTask
    point: dict[str, Any]
    key: str
    seed: int
    values: GlueValues
    recipe_sha256: str
    model: str
    folder: Path
    device: str = "cpu"
    trust_remote_code: bool = False  # the backbone's own code from its repository


def complete(folder: Path) -> bool:
    card = folder / POINT_CARD
    return card.is_file() and read_card(card).get("status") == "complete"


def heldout_size(train_rows: int, values: GlueValues) -> int:
    """Rows of the held-out slice of a training split of ``train_rows`` rows."""
    return min(values.heldout_max_rows, max(1, round(values.heldout_fraction * train_rows)))


def fit_rows(train_rows: int, values: GlueValues) -> int:
    """Rows a run trains on: the training split less its held-out slice, cut at train_rows."""
    held = heldout_size(train_rows, values) if values.select_on == "heldout" else 0
    rest = train_rows - held
    return min(rest, values.train_rows) if values.train_rows else rest


def heldout_rows(task: GlueTask, labels: np.ndarray, values: GlueValues) -> np.ndarray:
    """Row positions of the held-out slice: the same for every grid point and seed (drawn by
    split_seed alone), stratified by label for classification."""
    rng = np.random.default_rng(values.split_seed)
    n = len(labels)
    size = heldout_size(n, values)
    if task.regression:
        return np.sort(rng.permutation(n)[:size])
    chosen = []
    for label in np.unique(labels):
        rows = np.flatnonzero(labels == label)
        chosen.append(rng.permutation(rows)[: round(size * len(rows) / n)])
    return np.sort(np.concatenate(chosen))


def split_train(task: GlueTask, train: Any, values: GlueValues) -> tuple[Any, Any | None]:
    """(rows trained on, held-out selection rows or None when validation selects)."""
    labels = np.asarray(train["label"])
    held = (
        heldout_rows(task, labels, values) if values.select_on == "heldout" else np.array([], int)
    )
    rest = np.setdiff1d(np.arange(len(labels)), held)
    if values.train_rows:
        rng = np.random.default_rng(values.split_seed)
        rest = np.sort(rng.permutation(rest)[: values.train_rows])
    fit = train.select(rest.tolist())
    return fit, (train.select(held.tolist()) if len(held) else None)


def eval_every(steps_per_epoch: int, values: GlueValues) -> int:
    """The paper's n = min(500, len(dataloader) // 10), at least 1."""
    return max(1, min(values.eval_steps_max, steps_per_epoch // values.evals_per_epoch))


def lr_factor(step: int, total: int, values: GlueValues) -> float:
    """The authors' schedule: linear warm-up, linear decay to lr_floor at lr_decay_fraction of
    the steps, then constant."""
    warmup = math.ceil(values.warmup_ratio * total)
    if step < warmup:
        return (step + 1) / warmup
    end = max(warmup + 1, math.ceil(values.lr_decay_fraction * total))
    if step >= end:
        return values.lr_floor
    return 1.0 - (1.0 - values.lr_floor) * (step - warmup) / (end - warmup)


def run(spec: RunSpec, source: GlueSource, say: Any = print) -> dict[str, Any]:
    """Train, select, predict; returns the card. A complete run is left as it is."""
    if complete(spec.folder):
        return read_card(spec.folder / POINT_CARD)
    import torch
    from transformers import (
        DataCollatorWithPadding,
        EarlyStoppingCallback,
        PrinterCallback,
        Trainer,
        TrainerCallback,
        TrainingArguments,
        set_seed,
    )
    from transformers.trainer_utils import get_last_checkpoint

    from neobench.models.classifier import load_classifier

    values, task, started = spec.values, spec.task, time.monotonic()
    train = source.load(task, "train")
    fit, held = split_train(task, train, values)
    set_seed(spec.seed)  # the head's initial weights
    loaded = load_classifier(
        spec.model, task.num_labels,
        max_seq_length=values.max_seq_length, classifier_dropout=values.classifier_dropout,
        trust_remote_code=spec.trust_remote_code,
    )  # fmt: skip
    tokenizer = loaded.tokenizer

    def encode(rows: Any) -> Any:
        texts = [rows[c] for c in task.texts]
        out = tokenizer(*texts, truncation=True, max_length=loaded.max_seq_length)
        return out | {"labels": rows["label"]}

    def prepared(rows: Any) -> Any:
        return rows.map(encode, batched=True, remove_columns=rows.column_names)

    selection = held if held is not None else source.load(task, task.validation[0])
    steps_per_epoch = math.ceil(len(fit) / values.batch_size)
    total = steps_per_epoch * values.epochs
    every = eval_every(steps_per_epoch, values)
    cuda = spec.device.startswith("cuda")
    bf16 = cuda and values.mixed_precision == "bf16"  # the recipe's rule: CPU runs in fp32
    args = TrainingArguments(
        output_dir=str(spec.folder / TRAINER),
        per_device_train_batch_size=values.batch_size,
        per_device_eval_batch_size=max(32, values.batch_size),
        learning_rate=values.learning_rate,
        weight_decay=values.weight_decay,
        num_train_epochs=values.epochs,
        adam_beta1=values.adam_beta1,
        adam_beta2=values.adam_beta2,
        adam_epsilon=values.adam_epsilon,
        max_grad_norm=values.max_grad_norm,
        eval_strategy="steps",
        eval_steps=every,
        save_strategy="steps",
        save_steps=every,
        save_total_limit=1,
        load_best_model_at_end=True,
        metric_for_best_model="score",
        greater_is_better=True,
        seed=spec.seed,
        data_seed=spec.seed,
        bf16=bf16,
        use_cpu=not cuda,
        report_to=[],
        disable_tqdm=True,
        logging_strategy="no",
        dataloader_num_workers=0,
    )

    def score(prediction: Any) -> dict[str, float]:
        return metrics(task, _labels_of(task, prediction.predictions), prediction.label_ids)

    class Progress(TrainerCallback):
        def on_evaluate(self, a: Any, state: Any, c: Any, metrics: Any = None, **kw: Any) -> None:
            found = (metrics or {}).get("eval_score")
            if found is not None:
                say(f"{task.name} {spec.key} seed {spec.seed}: step {state.global_step}/{total} "
                    f"{values.select_on} {100 * found:.1f}")  # fmt: skip

        def on_save(self, a: Any, state: Any, c: Any, **kw: Any) -> None:
            say(f"{task.name} {spec.key} seed {spec.seed}: checkpoint at step {state.global_step}")

    class GlueTrainer(Trainer):
        def create_scheduler(self, num_training_steps: int, optimizer: Any = None) -> Any:
            if self.lr_scheduler is None:
                opt = optimizer if optimizer is not None else self.optimizer
                self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
                    opt, lambda step: lr_factor(step, num_training_steps, values)
                )
            return self.lr_scheduler

    callbacks = [Progress()]
    if values.early_stopping_patience:
        callbacks.append(EarlyStoppingCallback(values.early_stopping_patience))
    trainer = GlueTrainer(
        model=loaded.model,
        args=args,
        train_dataset=prepared(fit),
        eval_dataset=prepared(selection),
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=score,
        callbacks=callbacks,
    )
    # The Progress lines say what a log needs; the Trainer's own dicts would interleave them.
    trainer.remove_callback(PrinterCallback)
    last = (
        get_last_checkpoint(str(spec.folder / TRAINER))
        if (spec.folder / TRAINER).is_dir()
        else None
    )
    card: dict[str, Any] = {
        "status": "running",
        "started": now(),
        "task": task.name,
        "point": spec.point,
        "key": spec.key,
        "seed": spec.seed,
        "recipe_sha256": spec.recipe_sha256,
        "values": asdict(values),
        "model": loaded.record(),
        "rows": {"train": len(train), "fit": len(fit), "selection": len(selection)},
        "selection": {"split": values.select_on},
        "eval_every": every,
        "steps_planned": total,
        "resumed_from": Path(last).name if last else None,
        "device": device_info(spec.device),
        "precision": "bf16" if bf16 else "fp32",  # what ran, not only the recipe's value
        "attention": attn_implementation(getattr(loaded.model, "config", None), "unknown"),
        "environment": environment(),
    }
    write_card(spec.folder / POINT_CARD, card)
    trainer.train(resume_from_checkpoint=last)
    history = [
        [entry["step"], entry["eval_score"]]
        for entry in trainer.state.log_history
        if "eval_score" in entry
    ]
    best = max(history, key=lambda h: h[1])  # the checkpoint load_best_model_at_end restored
    # Validation is read only now, after the checkpoint was chosen.
    reported: dict[str, Any] = {}
    predictions: dict[str, Any] = {}
    for split in task.validation:
        rows = source.load(task, split)
        out = trainer.predict(prepared(rows))
        guess = _labels_of(task, out.predictions)
        reported[split] = metrics(task, guess, out.label_ids)
        predictions[split] = {
            "idx": [int(i) for i in rows["idx"]],
            "label": np.asarray(out.label_ids).tolist(),
            "prediction": guess.tolist(),
        }
    write_text_atomic(spec.folder / PREDICTIONS, json.dumps(predictions))
    card |= {
        "status": "complete",
        "finished": now(),
        "seconds": round(time.monotonic() - started, 1),
        "steps_done": trainer.state.global_step,
        "selection": {
            "split": values.select_on,
            "score": best[1],
            "step": best[0],
            "history": history,
        },
        "validation": reported,
    }
    write_card(spec.folder / POINT_CARD, card)
    shutil.rmtree(spec.folder / TRAINER, ignore_errors=True)  # the checkpoints: not results
    return card


def _labels_of(task: GlueTask, logits: Any) -> np.ndarray:
    """Class predictions (argmax), or the regression output as it is."""
    array = np.asarray(logits[0] if isinstance(logits, tuple) else logits)
    return array.reshape(-1) if task.regression else array.argmax(-1)
