"""NeoBERT forward throughput, by default under the paper's Table 10 protocol.

The protocol: synthetic inputs at the full length (every token real), sequence lengths 512 to
8,192, for each length the batch size doubled from 1 up to 512 or until out of memory, each batch
size timed over 100 forward steps (after one warm-up step), tokens/s of the best batch size
reported. Random weights of the chosen size: throughput does not depend on the values.

`--quick` is not the protocol: 3 steps per batch size, and the scan of a length stops once a batch
size is 10% slower than the best so far (a CPU smoke test, or a first look).

    python benchmarks/neobert_throughput.py --size tiny --quick --lengths 512,1024   # CPU smoke
    python benchmarks/neobert_throughput.py --size base --device cuda --dtype bfloat16  # Table 10
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from neobench.models import register
from neobench.models.neobert import NeoBERT, NeoBERTConfig

register()  # model_type "neobert" for transformers' Auto classes

SIZES = {
    "tiny": {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 192,
    },
    # chandar-lab/NeoBERT: 28 layers x 768, 12 heads, SwiGLU 3072 -> 2048, 4096 context.
    "base": {
        "hidden_size": 768,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
    },
}


def tokens_per_second(
    model: NeoBERT, batch: int, length: int, device: str, dtype: torch.dtype, iters: int
) -> float:
    ids = torch.randint(1000, 30000, (batch, length), device=device)
    mask = torch.ones_like(ids)
    autocast = torch.autocast(
        device_type=device.split(":")[0], dtype=dtype, enabled=dtype != torch.float32
    )
    with torch.inference_mode(), autocast:
        model(ids, attention_mask=mask)  # warm-up
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(iters):
            model(ids, attention_mask=mask)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    return batch * length * iters / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", choices=sorted(SIZES), default="tiny")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default=None)
    parser.add_argument("--lengths", default="512,1024,2048,4096,8192")
    parser.add_argument("--max-batch", type=int, default=512)
    parser.add_argument("--iters", type=int, default=None, help="steps timed (100; --quick: 3)")
    parser.add_argument("--quick", action="store_true", help="not the protocol: see above")
    parser.add_argument("--unpadded", choices=["auto", "on", "off"], default="auto")
    args = parser.parse_args()
    iters = args.iters or (3 if args.quick else 100)
    lengths = [int(n) for n in args.lengths.split(",")]
    dtype = getattr(
        torch, args.dtype or ("bfloat16" if args.device.startswith("cuda") else "float32")
    )
    config = NeoBERTConfig(
        **SIZES[args.size], max_length=max(lengths), unpadded_attention=args.unpadded
    )
    model = NeoBERT(config).to(args.device).eval()
    where = (
        torch.cuda.get_device_name()
        if args.device.startswith("cuda")
        else f"CPU, {torch.get_num_threads()} threads"
    )
    print(
        f"NeoBERT {args.size} ({sum(p.numel() for p in model.parameters()) / 1e6:.1f}M params), "
        f"{where}, "
        f"{dtype}, attention: {model.attention_kernel(args.device)}, "
        f"{'quick scan (not the protocol)' if args.quick else 'Table 10 protocol'}, "
        f"{iters} steps per batch size"
    )
    print(f"{'length':>7} {'best batch':>10} {'tokens/s':>12}   (batch: tokens/s)")
    for length in lengths:
        rates: dict[int, float] = {}
        batch = 1
        while batch <= args.max_batch:
            try:
                rates[batch] = tokens_per_second(model, batch, length, args.device, dtype, iters)
            except torch.OutOfMemoryError:
                torch.cuda.empty_cache()
                break
            if args.quick and len(rates) >= 2 and rates[batch] < 0.9 * max(rates.values()):
                break  # past the knee: larger batches only get slower
            batch *= 2
        best = max(rates, key=rates.get)
        scan = ", ".join(f"{b}: {r:,.0f}" for b, r in rates.items())
        print(f"{length:>7} {best:>10} {rates[best]:>12,.0f}   ({scan})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
