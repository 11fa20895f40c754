"""`neobench bench gpu`'s config (each field's doc is its flag's help), its sections and models,
and its two scales (full on a GPU, tiny for plumbing on a CPU)."""

from __future__ import annotations

from dataclasses import dataclass

from neobench.protocol.config import DTYPE_CHOICES, EvalConfig, like, opt

# The sections in the order they run, with the seconds each may start new work in: 405 s, so that
# with start-up and one item of each overrunning the whole stays under 9 minutes on one H100.
# "unpadded" compares the encode section's embeddings: no work, and no budget, of its own.
GPU_SECTIONS = {
    "train": 100, "encode": 45, "unpadded": 0, "corpus": 150, "scores": 90, "topk": 20,
}  # fmt: skip
# The packaged all-MiniLM-L6-v2 and the models built from configs (gpu.py, SHAPES).
GPU_MODELS = ["minilm", "bert-base", "modernbert-base", "neobert"]
# The mteb tasks whose main scores are compared (half precision on the device against CPU
# float32), and whose texts are encoded when the mirror holds them.
GPU_SCORE_TASKS = ["BIOSSES", "STS16", "SciFact"]


@dataclass(frozen=True)
class GpuScale:
    """How much `bench gpu` does: model shapes and the amount of work of each section."""

    shapes: str  # "base": the real models' sizes; "tiny": 2 layers x 64, for plumbing
    texts: int  # texts encoded per model (and cut into training pairs)
    max_seq_length: int  # tokens per text, for encoding and training
    train_steps: int  # optimisation steps per trainer (after one untimed warm-up step)
    train_batch: int  # queries per step (the recipe's global batch at full size)
    train_negatives: int  # hard negatives per query (the recipe's most at full size)
    train_length: int  # max tokens per text in training (the recipe's at full size)
    repeats: int  # timed passes of each encode path; the best is kept
    queries: int  # top-k: query vectors
    docs: int  # top-k: document vectors
    k: int  # top-k: list length (mteb's retrieval default is 1,000)
    dim: int  # top-k: vector width (all-MiniLM-L6-v2's)
    corpus_docs: int  # corpus: generated documents searched per model
    corpus_queries: int  # corpus: generated queries
    budgeted: bool  # the budgets apply: a tiny run exercises every path, however slow the CPU


GPU_SCALES = {
    "full": GpuScale(
        shapes="base", texts=8_192, max_seq_length=512, train_steps=6, train_batch=128,
        train_negatives=7, train_length=512, repeats=2, queries=4_096, docs=500_000, k=1_000,
        dim=384, corpus_docs=1_000_000, corpus_queries=8_000, budgeted=True,
    ),
    "tiny": GpuScale(
        shapes="tiny", texts=48, max_seq_length=128, train_steps=2, train_batch=8,
        train_negatives=2, train_length=32, repeats=1, queries=64, docs=4_096, k=100, dim=384,
        corpus_docs=1_000, corpus_queries=40, budgeted=False,
    ),
}  # fmt: skip


@dataclass(kw_only=True)
class BenchGpuCommand:
    """`neobench bench gpu`: everything the GPU path claims, measured in one run."""

    device: str = like(EvalConfig, "device")
    size: str = opt(
        "full",
        "full (the real models' shapes, minutes on a GPU) | tiny (2-layer shapes and a few "
        "texts: the plumbing, on a CPU in seconds)",
        choices=tuple(GPU_SCALES),
    )
    models: list[str] = opt(
        GPU_MODELS, f"comma-separated models of: {', '.join(GPU_MODELS)}", csv=True
    )
    sections: list[str] = opt(
        list(GPU_SECTIONS), f"comma-separated sections of: {', '.join(GPU_SECTIONS)}", csv=True
    )
    data_dir: str | None = opt(
        None,
        "offline mirror holding the score tasks: their texts are encoded and their scores "
        "compared (without it: seeded synthetic texts, and the score section is skipped)",
    )
    score_tasks: list[str] = opt(
        GPU_SCORE_TASKS, "comma-separated mteb tasks whose main scores are compared", csv=True
    )
    dtype: str = opt(
        "auto",
        "half precision of encoding and the scores: auto (float16 on CUDA; on a CPU float32, "
        "and the score section not applicable) | float16 | bfloat16 | float32",
        choices=DTYPE_CHOICES,
    )
    seed: int = opt(0, "seed of the built weights, the synthetic texts and the top-k vectors")
    json: str | None = opt(None, "also write the figures to this JSON file", metavar="FILE")
    markdown: str | None = opt(None, "also write the Markdown table to this file", metavar="FILE")
