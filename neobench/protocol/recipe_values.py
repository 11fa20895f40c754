"""The shape of a recipe: which keys exist, their types, and what range each accepts. The values,
each with its source, live in recipes/*.yaml; recipe.py reads them into this dataclass."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Literal

# Seeds: numpy's and Python's generators take 0 <= seed < 2**32 (transformers' set_seed seeds both).
SEED_RANGE = (0, 2**32)


@dataclass(frozen=True)
class Range:
    """The values a numeric recipe key accepts; callable as the check, printed in messages."""

    low: float
    high: float | None = None  # excluded
    low_excluded: bool = False

    def __call__(self, v: float) -> bool:
        if v < self.low or (self.low_excluded and v == self.low):
            return False
        return self.high is None or v < self.high

    def __str__(self) -> str:
        if self.high is None:
            return f"{'>' if self.low_excluded else '>='} {_number(self.low)}"
        return f"in [{_number(self.low)}, {_number(self.high)})"


def _number(value: float) -> str:
    return f"{value:d}" if isinstance(value, int) else f"{value:g}"


_positive = Range(0, low_excluded=True)
_non_negative = Range(0)
_fraction = Range(0, 1)  # 0 <= v < 1


def value(
    help: str,
    valid: Any = None,
    *,
    hashed: bool = True,
    default: Any = MISSING,
    off: Any = MISSING,
) -> Any:
    """A recipe key: its doc, an optional range check, and whether it enters the recipe hash.
    ``off``: an opt-in key added after recipes had hashes; at this value it is left out of the hash
    and the run card's recipe record, so a recipe without it keeps its hash and card."""
    meta = {"help": help, "valid": valid, "hashed": hashed}
    if off is not MISSING:
        meta["off"] = off
    return field(default=default, metadata=meta)


@dataclass(frozen=True, kw_only=True)
class RecipeValues:
    """Every value of a fine-tuning recipe. A YAML recipe must give each key without a default;
    `Literal` types are the values this neobench version implements (one, for some keys)."""

    datasets: str | list[str] = value(
        "manifest keys to train on, or 'all' (every row of the manifest)"
    )
    max_steps: int = value("optimisation steps", _positive)
    batch_size: int = value(
        "global batch: queries per step, split evenly across devices", _positive
    )
    max_hard_negatives: int = value("hard negatives per query, at most", _non_negative)
    sampling_alpha: float = value("dataset drawn with probability size^alpha", _non_negative)
    temperature: float = value("InfoNCE temperature (loss scale = 1 / temperature)", _positive)
    similarity: Literal["cosine"] = value("similarity of query and candidate embeddings")
    loss_direction: Literal["query_to_doc"] = value("which side's candidates the loss ranks")
    loss_reduction: Literal["mean"] = value("how per-query losses are combined")
    pooling: Literal["mean"] = value("token embeddings -> text embedding")
    learning_rate: float = value("peak learning rate (AdamW)", _positive)
    adam_beta1: float = value("AdamW beta1", _fraction)
    adam_beta2: float = value("AdamW beta2", _fraction)
    adam_epsilon: float = value("AdamW epsilon", _positive)
    weight_decay: float = value("AdamW weight decay", _non_negative)
    max_grad_norm: float = value("gradient clipping threshold", _positive)
    lr_schedule: Literal["linear"] = value("learning-rate schedule after warm-up")
    warmup_ratio: float = value("share of max_steps spent warming up", _fraction)
    max_seq_length: int = value("tokens per text, training and evaluation", Range(8))
    instructions: str = value("training instruction profile (instructions/train/), or none")
    eval_instructions: str = value("evaluation profile whose prompts the output model carries")
    instruction_separator: str = value("text between an instruction and the query")
    dropout: float = value("dropout during fine-tuning (0 turns it off)", _fraction)
    mixed_precision: str = value("bf16 = bfloat16 autocast on CUDA; anything else runs fp32")
    gradcache_mini_batch: int = value(
        "0 = plain loss; N > 0 = GradCache chunks of N texts", _non_negative
    )
    seed: int = value(
        "seed of the sampler, the data order and initialisation", Range(*SEED_RANGE), hashed=False
    )
    checkpoint_every: int = value("steps between checkpoints", _positive, hashed=False)
    # Recipe files written before this key existed: a completed run drops its checkpoints.
    keep_checkpoints: bool = value(
        "keep the checkpoints of a completed run", hashed=False, default=False
    )
    # Hashed when on: the held-out rows are not trained on, so the training data changes.
    dev_rows: int = value(
        "queries held out of each dataset as the dev slice (0 = none; at most a tenth of a "
        "dataset); the dev metric is computed on them after training",
        _non_negative,
        default=0,
        off=0,
    )


NOT_HASHED = frozenset(f.name for f in fields(RecipeValues) if not f.metadata["hashed"])
# Opt-in keys -> their "off" value (see `value`).
OFF = {f.name: f.metadata["off"] for f in fields(RecipeValues) if "off" in f.metadata}


def is_off(key: str, value: Any) -> bool:
    """An opt-in key at its off value: outside the hash and the card's recipe record."""
    return key in OFF and value == OFF[key]
