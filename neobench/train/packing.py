"""`finetune --padding`: the training forwards on each column's real tokens only, or padded.

sentence-transformers' collator pads each column of a batch to its longest text, and its losses
send the queries through the encoder in one forward and the candidates (positives and hard
negatives) in another, merged and padded to the longest candidate (its merge_feature_batches):
a step of 128 queries with 7 negatives runs 128 x L_query + 1,024 x L_candidate positions, up to
1,152 x 512, whatever its texts' real lengths. Packed, each forward runs its real tokens as one
row, attention kept within each text by variable-length kernels:

- transformers' own encoders (unpad.POSITIONS): the registry's "unpadded-attention" patch, the
  packing evaluation uses (models/unpad.py), only where the patch gate is on;
- native NeoBERT: its own unpadded path (config.unpadded_attention, models/neobert.py);
- a backbone that sentence-transformers already flattens (flash_attention_2 with flash-attn's
  varlen functions, its Transformer module's ``unpad_inputs``): as it does.

Packing changes neither the losses nor the gradients beyond float rounding (tests/test_packing.py,
per architecture), only memory and speed: it is a flag, not a recipe value, outside the recipe
hash. It needs the backbone's dropout off, as the recipe has it: packed rows would draw other
dropout masks than padded ones, and the varlen kernels apply no attention dropout. What ran, by
what, and why a run asked to pack runs padded: the run card's ``padding``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from neobench.compat import patches
from neobench.models import unpad
from neobench.models.load import LoadedModel
from neobench.models.neobert import varlen_kernel_name

# What packs the training forwards (the card's padding.packer).
PATCH = "neobench's unpadded-attention patch (models/unpad.py)"
NATIVE = "NeoBERT's own unpadded path (models/neobert.py)"
FLATTENED = "sentence-transformers' flattened batches (flash_attention_2)"


@dataclass(frozen=True)
class Padding:
    """How the training forwards run, as the run card's ``padding`` records it."""

    requested: str  # --padding
    mode: str  # what runs: packed | padded
    attention: str  # the attention kernel the training forwards run (the card's model record)
    packer: str | None = None  # packed: what packs (PATCH, NATIVE or FLATTENED)
    why: str | None = None  # padded although --padding packed: the reason

    @property
    def packed(self) -> bool:
        return self.mode == "packed"

    def record(self) -> dict[str, str]:
        return {key: value for key, value in asdict(self).items() if value is not None}


def choose(requested: str, loaded: LoadedModel, device: str, half: bool) -> Padding:
    """What ``requested`` (--padding) runs for the loaded model on ``device`` (``half``: under
    bf16 autocast, where the fused varlen kernels run; float32 runs the reference)."""
    module = loaded.model[0]
    backbone = module.auto_model
    native = hasattr(backbone.config, "unpadded_attention")

    def padded(why: str | None = None) -> Padding:
        kernel = (
            backbone.attention_kernel(device, unpadded=False)
            if native
            else loaded.forward_attn_implementation
        )
        return Padding(requested, "padded", kernel, why=why)

    if requested == "padded":
        return padded()
    if native:
        kernel = backbone.attention_kernel(device, unpadded=True, half=half)
        return Padding(requested, "packed", kernel, NATIVE)
    if getattr(module, "can_flatten_inputs", False):
        return Padding(requested, "packed", loaded.forward_attn_implementation, FLATTENED)
    if not unpad.supports(backbone):
        return padded(
            f"{type(backbone).__name__} (model_type {backbone.config.model_type!r}) cannot run "
            f"packed: neobench packs transformers' own {', '.join(sorted(unpad.POSITIONS))} "
            "and native NeoBERT"
        )
    dropout = _active_dropout(backbone.config)
    if dropout:
        shown = ", ".join(f"{key}={value}" for key, value in dropout.items())
        return padded(
            f"the backbone trains with dropout ({shown}): packed rows would draw other dropout "
            "masks than padded ones, and the varlen kernels apply no attention dropout (the "
            "recipe's dropout=0 packs)"
        )
    if not patches.on("unpadded-attention"):
        return padded(f"the library patch unpadded-attention is off ({_off_reason()})")
    return Padding(requested, "packed", varlen_kernel_name(device, half), PATCH)


def _active_dropout(config: Any) -> dict[str, float]:
    """The config's dropout probabilities above 0, read as load_model's dropout_overrides
    writes them (every float key naming dropout)."""
    return {
        key: value
        for key, value in config.to_dict().items()
        if "dropout" in key and isinstance(value, float) and value > 0
    }


def _off_reason() -> str:
    off = patches.off_reason() or {}
    untested = off.get("untested") or []
    return str(off.get("why", "off")) + (f": {', '.join(untested)}" if untested else "")


@contextlib.contextmanager
def applied(st_model: Any, padding: Padding) -> Iterator[None]:
    """The SentenceTransformer's forwards (and its collation) as ``padding`` chose, for the
    block: training, not the dev metric or the save after it."""
    module = st_model[0]
    backbone = module.auto_model
    with contextlib.ExitStack() as stack:
        if hasattr(backbone.config, "unpadded_attention"):  # native NeoBERT: its own switch
            stack.enter_context(_neobert_path(backbone.config, padding.packed))
        elif padding.packer == PATCH:
            if not stack.enter_context(unpad.unpadded(st_model)):
                raise RuntimeError(
                    "the unpadded-attention patch went off after the run card recorded packed "
                    f"training ({patches.ENV} changed during the run)"
                )
        elif not padding.packed and getattr(module, "can_flatten_inputs", False):
            stack.enter_context(_collated_padded(module))
        yield


@contextlib.contextmanager
def _neobert_path(config: Any, packed: bool) -> Iterator[None]:
    """NeoBERT's config.unpadded_attention "on" (packed) or "off" for the block, then as loaded
    (the saved model keeps the loaded value; only checkpoints taken meanwhile carry this one)."""
    before = config.unpadded_attention
    config.unpadded_attention = "on" if packed else "off"
    try:
        yield
    finally:
        config.unpadded_attention = before


@contextlib.contextmanager
def _collated_padded(module: Any) -> Iterator[None]:
    """sentence-transformers' own switch (its Transformer module's ``unpad_inputs``) off for the
    block: the collator pads every column, flattening none."""
    before = module.unpad_inputs
    module.unpad_inputs = False
    try:
        yield
    finally:
        module.unpad_inputs = before


@dataclass(frozen=True)
class StepPositions:
    """One step's token positions through the encoder: its texts' real tokens, and what the
    padded forwards run."""

    real: int
    padded: int

    @property
    def padding_share(self) -> float:
        """The share of the padded forwards' positions that are padding (packed saves them)."""
        return 1.0 - self.real / self.padded if self.padded else 0.0


def step_positions(lengths: Sequence[Sequence[int]]) -> StepPositions:
    """The positions of one step from each column's text lengths (``lengths[0]``: the queries;
    the rest: the positives, then each hard negative), laid out as sentence-transformers' padded
    losses run them: the queries in one forward padded to the longest query, every candidate in
    a second, merged, padded to the longest candidate."""
    queries = list(lengths[0])
    candidates = [n for column in lengths[1:] for n in column]
    real = sum(queries) + sum(candidates)
    padded = len(queries) * max(queries, default=0)
    padded += len(candidates) * max(candidates, default=0)
    return StepPositions(real, padded)
