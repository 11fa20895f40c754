"""Encoding throughput: stock SentenceTransformer.encode vs neobench's encoder, same real texts.

The texts are the SciFact corpus and queries and the STSBenchmark sentences (unique), read through
the offline mirror; both encoders run in one process on the same texts under the same autocast,
alternating, best of N each, the embedding cache off (every text is really encoded).

    python benchmarks/encode_throughput.py --data-dir ../shared/data/hub
    python benchmarks/encode_throughput.py --device cuda --dtypes float16,bfloat16 --max-texts 20000

Each dtype is one comparison. On CUDA the rows also give the fraction of the GPU's dense peak
FLOP/s (neobench/models/flops.py, PEAK_FLOPS).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from neobench.bench.gpu import (
    Rate,
    autocast_to,
    default_model,
    measure,
    task_texts,
    token_lengths,
)
from neobench.encoder.encode import DTYPES, FastEncoder, auto_unpadded, resolve_dtype
from neobench.models.load import load_model, resolve_device
from neobench.protocol import config


def compare(
    model_spec: str,
    texts: list[str],
    device: str = "auto",
    repeats: int = 2,
    dtype: str = "auto",
    unpadded: str = "auto",
    max_seq_length: int | None = None,  # None: the standard length
) -> tuple[list[Rate], bool]:
    """(stock's best rate, neobench's best rate), and whether neobench's encoder ran unpadded;
    best of ``repeats`` alternating runs each."""
    device = resolve_device(device)
    dtype = resolve_dtype(dtype, device)
    loaded = load_model(
        model_spec,
        device=device,
        max_seq_length=max_seq_length,
        unpadded=auto_unpadded(unpadded, dtype),
    )
    model = loaded.model
    lengths = token_lengths(model.tokenizer, texts, model.max_seq_length)
    fast = FastEncoder(
        model,
        "bench",
        cache=None,
        autocast=DTYPES[dtype] or False,
        token_budget=config.default_token_budget(device),
        packed=loaded.packed,
    )

    def stock(some: list[str] = texts) -> object:
        # Under the same autocast: the comparison is of the encoding path only. (A native
        # NeoBERT unpads inside its forward for both; that is the model, not the path.)
        with autocast_to(device, DTYPES[dtype]):
            return model.encode(some, batch_size=config.BATCH_SIZE)

    stock(texts[:256])  # warm-up (kernels, allocator) for both paths
    fast.embed(texts[:256], None)
    best: dict[str, Rate] = {}
    for _ in range(repeats):  # alternate, so machine noise hits both alike
        for label, run in (
            ("stock SentenceTransformer.encode", stock),
            ("neobench encoder", lambda: fast.embed(texts, None)),
        ):
            rate = measure(label, run, texts, lengths, model, device)
            if label not in best or rate.seconds < best[label].seconds:
                best[label] = rate
    fast.close()
    return list(best.values()), loaded.packed


def report(rates: list[Rate], device: str, dtype: str, packed: bool) -> str:
    """One line per encoder (tokens/s, texts/s, peak memory, % of peak) and their ratio."""
    device = resolve_device(device)
    dtype = resolve_dtype(dtype, device)
    precision = "fp32" if dtype == "float32" else f"{dtype} autocast"
    attention = "unpadded varlen attention" if packed else "padded SDPA"
    where = (
        torch.cuda.get_device_name()
        if device.startswith("cuda")
        else f"CPU, {torch.get_num_threads()} threads"
    )
    lines = [
        f"{rates[0].texts} texts, {rates[0].tokens} tokens, {where}, {precision}, "
        f"neobench: {attention}"
    ]
    for r in rates:
        flop = "" if r.flop_fraction is None else f"  {100 * r.flop_fraction:.1f}% of peak FLOP/s"
        lines.append(
            f"{r.label:<34} {r.tokens_per_s:>10,.0f} tokens/s {r.texts / r.seconds:>9,.1f} texts/s "
            f"peak memory {r.peak_memory_mb:,.0f} MB{flop}"
        )
    lines.append(f"ratio neobench / stock: {rates[1].tokens_per_s / rates[0].tokens_per_s:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", help="default: the packaged all-MiniLM-L6-v2")
    parser.add_argument(
        "--data-dir", default=str(Path(__file__).resolve().parents[2] / "shared/data/hub")
    )
    parser.add_argument("--tasks", default="SciFact,STSBenchmark")
    parser.add_argument("--max-texts", type=int, default=4000)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--dtypes", default="auto", help="comma list: auto,float32,float16,bfloat16"
    )
    parser.add_argument("--unpadded", default="auto", help="auto (CUDA) | on | off")
    parser.add_argument("--max-seq-length", type=int, default=config.standard().max_seq_length)
    args = parser.parse_args(argv)
    tasks = args.tasks.split(",")
    texts = task_texts(tasks, config.DEFAULT_BENCHMARK, args.data_dir, args.max_texts)
    for dtype in args.dtypes.split(","):
        rates, packed = compare(
            args.model or default_model(),
            texts,
            device=args.device,
            repeats=args.repeats,
            dtype=dtype,
            unpadded=args.unpadded,
            max_seq_length=args.max_seq_length,
        )
        print(report(rates, args.device, dtype, packed))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
