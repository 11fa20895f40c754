"""`neobench bench gpu`'s inputs: the models and the texts every section works on, and the
record every section fills (its status, rows and time budget).

Models: BERT-base, ModernBERT-base and NeoBERT built from their configs (random weights, seeded,
with all-MiniLM-L6-v2's WordPiece tokenizer), so nothing comes from the hub, and the packaged
all-MiniLM-L6-v2 itself. Throughput does not depend on the weights' values; the scores (the
score section) use MiniLM's real ones.

Texts: the score tasks' own texts when the mirror holds them (corpus, queries, sentences), else
seeded synthetic texts: words of the tokenizer's vocabulary, in lengths drawn from a log-normal
that spans a query's few words to a passage that fills 512 tokens.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neobench.bench.encode import default_model, task_texts
from neobench.protocol.config import DEFAULT_BENCHMARK

# all-MiniLM-L6-v2's WordPiece ids ([PAD], [CLS], [SEP]): ModernBERT's own config names its BPE
# tokenizer's, which the built model would never see.
_MINILM_IDS = {"pad_token_id": 0, "bos_token_id": 101, "cls_token_id": 101}
_MINILM_IDS |= {"eos_token_id": 102, "sep_token_id": 102}

# The shapes of the released base models (hidden x layers, heads, feed-forward, vocabulary,
# positions), and a 2-layer x 64 version of each for plumbing runs on a CPU.
SHAPES: dict[str, dict[str, dict]] = {
    "base": {
        "bert-base": {
            "model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12,
            "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 30522,
            "max_position_embeddings": 512,
        },
        "modernbert-base": {
            "model_type": "modernbert", "hidden_size": 768, "num_hidden_layers": 22,
            "num_attention_heads": 12, "intermediate_size": 1152, "vocab_size": 50368,
            "max_position_embeddings": 8192, "global_attn_every_n_layers": 3,
            "local_attention": 128, **_MINILM_IDS,
        },
        "neobert": {
            "model_type": "neobert", "hidden_size": 768, "num_hidden_layers": 28,
            "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 30522,
            "max_length": 4096,
        },
    },
}  # fmt: skip
_TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}
SHAPES["tiny"] = {
    name: {**shape, **_TINY, "intermediate_size": 128} for name, shape in SHAPES["base"].items()
}
PACKAGED = "minilm"  # the one model that is not built: the packaged all-MiniLM-L6-v2


@dataclass(frozen=True)
class BenchModel:
    name: str  # as --models names it
    path: str  # its folder
    built: bool  # random weights from a config (False: the packaged model's real weights)


def model_names(shapes: str) -> list[str]:
    """Every name --models takes."""
    return [PACKAGED, *SHAPES[shapes]]


def prepare_models(names: list[str], shapes: str, folder: Path, seed: int) -> list[BenchModel]:
    """The models named, those from configs built into ``folder`` (each with the same seed)."""
    from neobench.models.build import build_from_config

    models = []
    for name in names:
        if name == PACKAGED:
            models.append(BenchModel(name, default_model(), built=False))
            continue
        target = folder / name
        build_from_config(SHAPES[shapes][name], default_model(), target, seed)
        models.append(BenchModel(name, str(target), built=True))
    return models


@dataclass
class BenchTexts:
    texts: list[str]
    source: str  # "mirror" | "synthetic"
    tasks: list[str]  # the mirror's tasks they come from (none when synthetic)

    def summary(self, tokenizer: object, max_length: int) -> dict[str, object]:
        """Count, tokens and mean tokens per text, under the tokenizer at ``max_length``."""
        ids = tokenizer(self.texts, truncation=True, max_length=max_length)["input_ids"]
        tokens = sum(len(x) for x in ids)
        return {
            "source": self.source,
            "tasks": self.tasks,
            "count": len(self.texts),
            "tokens": tokens,
            "mean_tokens": round(tokens / max(1, len(self.texts)), 1),
            "max_seq_length": max_length,
        }


def bench_texts(data_dir: Path | None, tasks: list[str], count: int, seed: int) -> BenchTexts:
    """The mirror's texts of ``tasks`` (an equal share of ``count`` from each), or synthetic."""
    if data_dir is not None:
        return BenchTexts(
            task_texts(tasks, DEFAULT_BENCHMARK, str(data_dir), count), "mirror", tasks
        )
    return BenchTexts(synthetic_texts(count, seed), "synthetic", [])


def synthetic_texts(count: int, seed: int) -> list[str]:
    """``count`` texts of whole words from MiniLM's vocabulary; words per text log-normal with
    median 40 (a short passage), from 3 (a query) to 400 (beyond 512 tokens: truncated)."""
    vocab = (Path(default_model()) / "vocab.txt").read_text(encoding="utf-8").split("\n")
    words = np.array([w for w in vocab if w.isalpha() and w.isascii() and len(w) > 2])
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(np.log(40), 0.9, count).astype(int), 3, 400)
    return [" ".join(rng.choice(words, n)) for n in lengths]


def training_pairs(texts: list[str]) -> tuple[list[str], list[str]]:
    """(queries, positives): each text's first third of words as the query of the whole text,
    a title-to-document task whose in-batch negatives are the other texts."""
    queries = []
    for text in texts:
        words = text.split()
        queries.append(" ".join(words[: max(1, len(words) // 3)]))
    return queries, list(texts)


# A section's outcome, worst last: a check that fails or an error outranks a budget cut short.
STATUSES = ("ok", "skipped", "not applicable", "partial", "failed", "error")


@dataclass
class Section:
    """What one section found: its status, why (when not ok), and one row per measurement."""

    status: str = "ok"
    reason: str | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)

    def mark(self, status: str, reason: str) -> None:
        """Worsen the status (never improve it); reasons add up."""
        if STATUSES.index(status) >= STATUSES.index(self.status):
            self.status = status
        self.reason = f"{self.reason}; {reason}" if self.reason else reason


class Budget:
    """The seconds a section may start new work in; work already started runs to its end."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.start = time.perf_counter()

    def spent(self, section: Section, what: str) -> bool:
        """True (and the section marked partial) when the budget is spent before ``what``."""
        if time.perf_counter() - self.start < self.seconds:
            return False
        section.mark(
            "partial", f"{what}: not started, the section's {self.seconds:.0f} s were spent"
        )
        return True
