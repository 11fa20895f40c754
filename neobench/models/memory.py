"""A training step's peak memory per device, from a config's shapes alone (no torch): what the
model states hold, what the texts in flight keep for the backward, and what the loss adds; the
formula, its sources and how it was checked: docs/performance.md, "Memory of a training step".

The recipe's precision (train/devices.py `bf16`, trainer.py `optimiser_arguments`): float32
weights, bfloat16 autocast on CUDA, stock AdamW (transformers' default, ``adamw_torch_fused``),
gradients set to None after each step (the trainer's ``zero_grad``), no gradient accumulation.
Every byte count below is what autograd saves for one token of one layer, tensor by tensor, as
torch's saved-tensor hooks count it for each architecture (tests/test_memory.py checks the
counts against them on the CPU, in float32 and under bfloat16 autocast).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from neobench.models.flops import weights_per_token
from neobench.protocol.config import MEMORY_SHARE as MEMORY_SHARE  # a budget's default share

GIB = 1024**3

# Model states, bytes per parameter.
WEIGHT_BYTES = 4  # float32 weights: autocast computes in bf16 but keeps the weights in float32
GRADIENT_BYTES = 4  # float32 .grad, allocated during the backward (None between steps)
ADAMW_BYTES = 8  # AdamW's two moments (exp_avg, exp_avg_sq), float32, from the first step on
CAST_BYTES = 2  # autocast's bf16 copy of each matmul weight, kept from the forward to the backward

# Activations, bytes per element.
FLOAT32 = 4  # norms run in float32 (layer_norm is on autocast's float32 list; RMSNorm upcasts)
HALF = 2  # a matmul's output under bf16 autocast
NORM_STATS_BYTES = 8  # LayerNorm's mean and 1/std per token, float32
RMS_STATS_BYTES = 4  # RMSNorm's 1/rms per token, float32
LSE_BYTES = 4  # a fused attention kernel's log-sum-exp, float32, per head and query
INDEX_BYTES = 8  # int64 per position of each tokenizer output: input_ids, attention_mask, ...
# Eager attention keeps, per head, query and key, softmax's output (float32: CUDA autocast runs
# softmax in float32, ModernBERT and NeoBERT ask for it) and its bf16 cast for the product with V.
EAGER_SCORE_BYTES = {True: FLOAT32 + HALF, False: FLOAT32}  # by autocast
# SDPA given a padded batch's 4-D mask (BERT-like, ModernBERT) turns it into an additive bias of
# the activations' dtype in every layer and keeps it for the backward: one element per query and
# key. NeoBERT's mask is (texts, 1, 1, keys): no square term.
SQUARE_MASK_TYPES = ("bert", "roberta", "modernbert")
# DeBERTa-v2's disentangled attention: each layer projects the 2k relative positions to keys and
# queries, repeated per text (2 x 2k x hidden elements), and scores every token against them,
# content-to-position and position-to-content (2 x heads x 2k elements per token).
RELATIVE_TABLES = 2
# The fused kernels (SDPA, flash) are not available for these model types in transformers (their
# classes declare no `_supports_sdpa`; tests/test_memory.py checks): they run eager attention.
EAGER_ONLY = ("deberta-v2",)

# Working memory beyond the saved tensors: the backward of one layer holds, for the tokens of one
# column, the float32 gradient of the residual stream and two gradients of its widest activation.
WORKING_WIDEST = 2
# The loss: each text's pooled vector, its normalised copy (cosine) and its gradient, float32;
# the score matrix of queries x candidates, its scaled copy, softmax's output and the gradient.
EMBEDDING_COPIES = 3
SCORE_COPIES = 4

# After an out-of-memory error, the budget a run continues under: the failed attempt's estimate
# with its activations cut to this share (it did not fit: the device holds less than estimated;
# the model states do not shrink, so only what chunks change is cut).
OOM_BACKOFF = 0.8


@dataclass(frozen=True)
class Column:
    """One column of a step (the queries, the positives, one hard negative) on one device."""

    texts: int
    positions: int  # token positions through the encoder: texts x longest padded, sum packed
    square_positions: int  # sum over its texts of (positions per text)^2: the score terms
    longest: int  # positions of its longest text
    packed: bool = False  # its texts without pad tokens (variable-length attention)
    flattened: bool = False  # packed by sentence-transformers' collator (cu_seq_lens): not merged

    @classmethod
    def padded(cls, texts: int, longest: int) -> Column:
        """Texts padded to the column's longest, as sentence-transformers' collator pads them."""
        return cls(texts, texts * longest, texts * longest**2, longest)

    @classmethod
    def of_lengths(cls, lengths: list[int], flattened: bool = False) -> Column:
        """Texts without pad tokens (variable-length attention): each its own length."""
        square = sum(n * n for n in lengths)
        longest = max(lengths, default=0)
        return cls(len(lengths), sum(lengths), square, longest, packed=True, flattened=flattened)

    def chunk(self, texts: int) -> Column:
        """The heaviest chunk of ``texts`` of this column: as many texts at the longest length."""
        if texts >= self.texts:
            return self
        return replace(Column.padded(texts, self.longest), packed=self.packed)


def merged_candidates(columns: tuple[Column, ...]) -> tuple[Column, ...]:
    """The columns as the plain loss runs them: the queries in one forward, the candidate columns
    merged into another (sentence-transformers' embed_columns), padded to the longest candidate,
    or packed when the backbone unpads (the merged batch, then its real tokens only). Batches the
    collator flattened (cu_seq_lens) it does not merge: one forward per column."""
    queries, candidates = columns[0], columns[1:]
    if len(candidates) < 2 or any(c.flattened for c in candidates):
        return columns
    texts, longest = sum(c.texts for c in candidates), max(c.longest for c in candidates)
    if all(c.packed for c in candidates):
        positions = sum(c.positions for c in candidates)
        square = sum(c.square_positions for c in candidates)
        return (queries, Column(texts, positions, square, longest, packed=True))
    if any(c.packed for c in candidates):
        return columns  # a mixed step: no loss builds one
    return (queries, Column.padded(texts, longest))


@dataclass(frozen=True)
class Step:
    """What one device does in a step: its columns (query, positive, negatives), the processes
    whose candidates the loss gathers, and the GradCache chunk (texts) or None (plain loss)."""

    columns: tuple[Column, ...]
    world: int = 1
    chunk: int | None = None

    @property
    def queries(self) -> int:
        return self.columns[0].texts

    @property
    def candidates(self) -> int:
        """Candidates per query: the positives and hard negatives of every process."""
        return sum(c.texts for c in self.columns[1:]) * self.world

    @property
    def texts(self) -> int:
        return sum(c.texts for c in self.columns)

    def chunked(self, texts: int | None) -> Step:
        return replace(self, chunk=texts)


@dataclass(frozen=True)
class Precision:
    """How a step computes: under bf16 autocast (CUDA, the recipe) or in float32 (the CPU), and
    which attention: fused (SDPA, flash), varlen (packed, no mask) or eager."""

    autocast: bool
    attention: str = "sdpa"  # sdpa | varlen | eager

    @property
    def activation_bytes(self) -> int:
        return HALF if self.autocast else FLOAT32


@dataclass(frozen=True)
class Memory:
    """A step's peak bytes per device, by part."""

    weights: int  # float32 weights and AdamW's moments: held across steps
    gradients: int  # float32 gradients: complete at the end of the backward
    casts: int  # autocast's bf16 weight copies, held from the forward into the backward
    activations: int  # what the texts in flight keep for the backward (the chunk's with GradCache)
    working: int  # the backward's transient gradients of one layer
    loss: int  # embeddings and the score matrix
    chunked: bool = False  # GradCache: the gradients exist while the later chunks run

    @property
    def peak(self) -> int:
        """Plain: the larger of the backward's start (every activation, no gradient yet) and its
        end (every gradient, the activations freed); in between, a layer's activations go as its
        gradients come, and a layer's activations outweigh its weights at any real batch.
        GradCache: a chunk's activations on top of the gradients of the chunks before it."""
        during = self.casts + self.activations + self.working + self.loss
        if self.chunked:
            return self.weights + self.gradients + during
        return self.weights + max(during, self.gradients + self.loss)


def field_reader(config: Any) -> Any:
    return config.get if isinstance(config, dict) else lambda name: getattr(config, name, None)


def embedding_parameters(fields: dict[str, Any]) -> int:
    """The tables ``weights_per_token`` leaves out (looked up, not multiplied), with the
    embedding norm: they take weights, gradients and moments like any parameter."""
    h, vocab = int(fields["hidden_size"]), int(fields.get("vocab_size") or 0)
    kind = fields.get("model_type")
    if kind == "neobert":
        return vocab * h  # the token table; positions are rotary
    if kind == "modernbert":
        return vocab * h + h  # the token table and its norm (no bias); positions are rotary
    count = vocab * h + 2 * h  # the token table and the embedding LayerNorm
    if kind == "deberta-v2":
        buckets = int(fields.get("position_buckets") or 0)
        count += 2 * (buckets or int(fields.get("max_position_embeddings") or 512)) * h
        if fields.get("position_biased_input", True):
            count += int(fields.get("max_position_embeddings") or 512) * h
        return count
    count += int(fields.get("max_position_embeddings") or 512) * h  # absolute positions
    count += int(fields.get("type_vocab_size") or 2) * h  # token types
    return count


def parameters(fields: dict[str, Any]) -> tuple[int, int]:
    """(every parameter, the matmul weights autocast copies) of the network ``fields`` (a
    config.json's) describes."""
    layers, _ = weights_per_token(fields)
    return layers + embedding_parameters(fields), layers


def attention_kind(fields: dict[str, Any], implementation: str) -> str:
    """sdpa | varlen | eager: what a backbone of these fields runs under --attn-implementation
    ``implementation`` (auto: the fused kernel where its class has one)."""
    if implementation == "eager" or fields.get("model_type") in EAGER_ONLY:
        return "eager"
    return "varlen" if implementation.startswith("flash_attention") else "sdpa"


def _swiglu(inner: int) -> int:
    return 8 * math.ceil(int(2 * inner / 3) / 8)  # NeoBERT's F (models/neobert.py swiglu_hidden)


def layer_bytes(fields: dict[str, Any], precision: Precision) -> float:
    """Bytes one token keeps in one layer for the backward (the per-token, per-layer estimate;
    34 x hidden in 16-bit for a BERT layer with a fused kernel in Korthikanti et al. 2022, which
    counts dropout masks, none here: the recipe turns dropout off).

    Every layer: its norms' float32 inputs, the inputs of its matmuls (under autocast a bf16
    cast of each float32 input, per call), the attention's q, k, v and output (a fused kernel
    also keeps its log-sum-exp), and its MLP's intermediates."""
    h, w = int(fields["hidden_size"]), precision.activation_bytes
    f = int(fields.get("intermediate_size") or 4 * h)
    heads = int(fields.get("num_attention_heads") or 1)
    eager = precision.attention == "eager"
    lse = 0 if eager else LSE_BYTES * heads
    kind = fields.get("model_type")
    if kind in ("modernbert", "neobert"):
        # Pre-norm, one fused qkv matmul and the MLP's input: two matmul inputs from norms.
        # Attention: q and k after the rotary embedding, the qkv output (v is a view of it),
        # the output; eager keeps two of them fewer (its products save views instead).
        attention = (4 if eager else 6) * w * h + lse
        if kind == "neobert":
            # RMSNorm keeps its input, the normalised product (float32) and 1/rms; SwiGLU's
            # w12 output (2F), silu's output and the product (F each).
            norms = 2 * (2 * FLOAT32 * h + RMS_STATS_BYTES)
            mlp = 4 * w * _swiglu(f)
        else:  # GeGLU: Wi's output (2 x intermediate), the activation's output, the product
            norms = 2 * (FLOAT32 * h + NORM_STATS_BYTES)
            mlp = 4 * w * f
        return norms + 2 * w * h + attention + mlp
    # BERT-like, post-norm: q, k, v are three matmuls of one input (under autocast three casts;
    # in float32 the one tensor), then the MLP's input; the GELU's input and output.
    norms = 2 * (FLOAT32 * h + NORM_STATS_BYTES)
    inputs = (4 if precision.autocast else 2) * w * h
    count = norms + inputs + 4 * w * h + lse + 2 * w * f
    if kind == "deberta-v2":
        count += RELATIVE_TABLES * heads * _relative_span(fields) * w
    return count


def _relative_span(fields: dict[str, Any]) -> int:
    """DeBERTa-v2's relative positions scored per token (2k: both directions)."""
    buckets = int(fields.get("position_buckets") or 0)
    return 2 * (buckets or int(fields.get("max_position_embeddings") or 512))


def score_bytes(fields: dict[str, Any], precision: Precision) -> float:
    """Bytes per (query, key) pair of one text in one layer: eager attention's probabilities of
    every head, or the 4-D mask SDPA turns into a bias; none for varlen (packed) attention."""
    if precision.attention == "eager":
        return int(fields.get("num_attention_heads") or 1) * EAGER_SCORE_BYTES[precision.autocast]
    if precision.attention == "sdpa" and fields.get("model_type") in SQUARE_MASK_TYPES:
        return precision.activation_bytes
    return 0


def text_bytes(fields: dict[str, Any], precision: Precision) -> float:
    """Bytes per text and layer whatever its length: DeBERTa-v2's relative-position keys and
    queries, repeated per text."""
    if fields.get("model_type") != "deberta-v2":
        return 0
    h = int(fields["hidden_size"])
    return RELATIVE_TABLES * _relative_span(fields) * h * precision.activation_bytes


def outside_bytes(fields: dict[str, Any], precision: Precision) -> float:
    """Bytes per token outside the layers: the tokenizer's int64 outputs, the embedding norm's
    input, a pre-norm network's final norm, and mean pooling's float32 mask."""
    h, kind = int(fields["hidden_size"]), fields.get("model_type")
    inputs = (3 if kind in ("bert", "roberta") else 2) * INDEX_BYTES  # + token_type_ids
    pooling = FLOAT32 * h  # the attention mask as the embeddings' dtype, kept by the product
    if kind == "neobert":  # no embedding norm; the final RMSNorm
        return inputs + 2 * FLOAT32 * h + RMS_STATS_BYTES + pooling
    embedding_norm = FLOAT32 * h + NORM_STATS_BYTES
    if kind == "modernbert":  # the final norm; the first layer has no attention norm
        return inputs + embedding_norm + pooling
    return inputs + embedding_norm + pooling


def column_bytes(fields: dict[str, Any], column: Column, precision: Precision) -> float:
    """What one column's texts keep for the backward (a packed column runs varlen attention)."""
    if column.packed:
        precision = replace(precision, attention="varlen")
    layers = int(fields["num_hidden_layers"])
    per_token = layers * layer_bytes(fields, precision) + outside_bytes(fields, precision)
    square = layers * score_bytes(fields, precision)
    per_text = layers * text_bytes(fields, precision)
    return column.positions * per_token + column.square_positions * square + column.texts * per_text


def _working(fields: dict[str, Any], column: Column, precision: Precision) -> float:
    h = int(fields["hidden_size"])
    f = int(fields.get("intermediate_size") or 4 * h)
    widest = 2 * f if fields.get("model_type") in ("modernbert", "neobert") else f
    per_token = FLOAT32 * h + WORKING_WIDEST * precision.activation_bytes * widest
    return column.positions * per_token


def estimate(fields: dict[str, Any], step: Step, precision: Precision) -> Memory:
    """The peak of ``step`` on one device: the plain loss keeps every column's activations until
    its backward; GradCache (``step.chunk``) one chunk's at a time, and every text's embedding."""
    params, matmuls = parameters(fields)
    if step.chunk is None:
        in_flight = merged_candidates(step.columns)
        activations = sum(column_bytes(fields, c, precision) for c in in_flight)
        score_rows = step.queries
    else:
        in_flight = tuple(c.chunk(step.chunk) for c in step.columns)
        activations = max(column_bytes(fields, c, precision) for c in in_flight)
        score_rows = min(step.queries, step.chunk)  # the loss is chunked over its rows too
    working = max(_working(fields, c, precision) for c in in_flight)
    dim = int(fields["hidden_size"])
    embeddings = (step.queries + step.candidates) * dim * FLOAT32 * EMBEDDING_COPIES
    scores = score_rows * step.candidates * FLOAT32 * SCORE_COPIES
    return Memory(
        weights=params * (WEIGHT_BYTES + ADAMW_BYTES),
        gradients=params * GRADIENT_BYTES,
        casts=matmuls * CAST_BYTES if precision.autocast else 0,
        activations=round(activations),
        working=round(working),
        loss=embeddings + scores,
        chunked=step.chunk is not None,
    )


def largest_chunk(
    fields: dict[str, Any], step: Step, precision: Precision, budget: float, fit: float = 1.0
) -> int | None:
    """The GradCache chunk (texts) whose step fits ``budget`` bytes, as large as fits and then
    evened out (the same number of chunks, of equal size: less memory, same speed); None when
    not even one text at a time fits. ``fit``: the card's factor on the activations."""
    longest = max(c.texts for c in step.columns)

    def fits(texts: int) -> bool:
        return fitted_peak(estimate(fields, step.chunked(texts), precision), fit) <= budget

    if not fits(1):
        return None
    low, high = 1, longest  # fits(low); the largest that fits is found by bisection
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    chunks = math.ceil(longest / low)
    return math.ceil(longest / chunks)


def fitted_peak(memory: Memory, fit: float) -> float:
    """The peak with the activations (and their working memory) scaled by a card's ``fit``."""
    scaled = replace(
        memory, activations=round(memory.activations * fit), working=round(memory.working * fit)
    )
    return scaled.peak


def fit_factor(fields: dict[str, Any], step: Step, precision: Precision, measured: float) -> float:
    """The factor on the activations that makes the formula's peak at ``step`` the ``measured``
    peak (bytes): what a card's kernels, allocator rounding and temporaries add or take away."""
    memory = estimate(fields, step, precision)
    rest = memory.weights + memory.casts + memory.loss
    in_flight = memory.activations + memory.working
    return max(0.0, (measured - rest) / in_flight) if in_flight else 1.0


def gib(count: float) -> str:
    """Bytes as GiB, one decimal (two below 1 GiB)."""
    value = count / GIB
    return f"{value:,.1f} GiB" if value >= 1 else f"{value:.2f} GiB"


def budget_problems(given: float | None) -> list[str]:
    """--memory-budget is a positive number of GiB."""
    if given is None or (isinstance(given, (int, float)) and given > 0):
        return []
    return [f"--memory-budget {given}: give the GiB a step may use per device, above 0."]
