"""Native NeoBERT (chandar-lab/NeoBERT): no remote code, no xformers, same checkpoint layout.
Architecture and attention paths: docs/guide.md, "Native NeoBERT".

Weight names and shapes are the hub checkpoint's, loaded strictly:
  model.encoder.weight                                  (V, H)    token embedding
  model.transformer_encoder.{i}.attention_norm.weight   (H,)      pre-attention RMSNorm
  model.transformer_encoder.{i}.qkv.weight              (3H, H)   fused q/k/v, rows grouped PER HEAD
  model.transformer_encoder.{i}.wo.weight               (H, H)
  model.transformer_encoder.{i}.ffn_norm.weight         (H,)      pre-FFN RMSNorm
  model.transformer_encoder.{i}.ffn.w12.weight          (2F, H)   packed SwiGLU [w1; w2]
  model.transformer_encoder.{i}.ffn.w3.weight           (H, F)
  model.layer_norm.weight                               (H,)      final RMSNorm
  decoder.weight / decoder.bias                         (V, H)/(V,) MLM head (not tied)
RoPE is interleaved (complex pairs (2i, 2i+1)); never a buffer, so nothing is left uninitialised
on meta devices. The plain-torch reference (one SDPA per text length) is what the CUDA varlen path
is tested against. Every attention path is differentiable: `finetune --padding packed` trains on
the unpadded one.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import (
    BaseModelOutput,
    MaskedLMOutput,
    SequenceClassifierOutput,
)

from neobench.models.heads import ClassificationHead


class NeoBERTConfig(PretrainedConfig):
    model_type = "neobert"

    def __init__(
        self,
        vocab_size: int = 30522,
        hidden_size: int = 768,
        num_hidden_layers: int = 28,
        num_attention_heads: int = 12,
        intermediate_size: int = 3072,
        max_length: int = 4096,
        norm_eps: float = 1e-5,
        rope_theta: float = 10000.0,
        embedding_init_range: float = 0.02,
        decoder_init_range: float = 0.02,
        classifier_init_range: float = 0.02,
        pad_token_id: int = 0,
        unpadded_attention: str = "auto",
        **kwargs: object,
    ) -> None:
        super().__init__(pad_token_id=pad_token_id, **kwargs)
        if hidden_size % num_attention_heads:
            raise ValueError(
                f"hidden_size {hidden_size} is not a multiple of {num_attention_heads} heads"
            )
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.max_length = max_length
        # transformers and sentence-transformers read the usable length from this name.
        self.max_position_embeddings = max_length
        self.norm_eps = norm_eps
        self.rope_theta = rope_theta
        self.embedding_init_range = embedding_init_range
        self.decoder_init_range = decoder_init_range
        self.classifier_init_range = classifier_init_range
        # "auto": unpadded varlen attention on CUDA, padded SDPA elsewhere; "on" / "off" force it.
        self.unpadded_attention = unpadded_attention
        self.dim_head = hidden_size // num_attention_heads

    def _get_generation_parameters(self) -> dict:
        # The hub config names the context length `max_length`, which transformers would take for
        # a generation setting and refuse to save; NeoBERT generates nothing.
        return {}

    @property
    def swiglu_hidden(self) -> int:
        """F = 8 * ceil(int(2 * intermediate / 3) / 8): 3072 -> 2048 for the hub model."""
        return 8 * math.ceil(int(2 * self.intermediate_size / 3) / 8)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalise in float32 so bf16/fp16 activations do not lose the mean-square.
        normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


class SwiGLU(nn.Module):
    def __init__(self, hidden: int, inner: int) -> None:
        super().__init__()
        self.w12 = nn.Linear(hidden, 2 * inner, bias=False)
        self.w3 = nn.Linear(inner, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.w12(x).chunk(2, dim=-1)  # w1 = first half of w12's rows
        return self.w3(F.silu(gate) * up)


def rope_angles(positions: torch.Tensor, dim_head: int, theta: float) -> torch.Tensor:
    """exp(i * p * theta^(-2j/d)) for every position p: complex64, shape (*positions.shape, d/2)."""
    inv_freq = 1.0 / (
        theta
        ** (torch.arange(0, dim_head, 2, device=positions.device, dtype=torch.float32) / dim_head)
    )
    angles = positions.to(torch.float32)[..., None] * inv_freq
    return torch.polar(torch.ones_like(angles), angles)


def apply_rope(x: torch.Tensor, rotation: torch.Tensor) -> torch.Tensor:
    """Rotate interleaved pairs (2j, 2j+1) of x (..., heads, d) by rotation (..., d/2)."""
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(pairs * rotation.unsqueeze(-2)).flatten(-2).type_as(x)


class EncoderBlock(nn.Module):
    def __init__(self, config: NeoBERTConfig) -> None:
        super().__init__()
        self.heads, self.dim_head = config.num_attention_heads, config.dim_head
        self.attention_norm = RMSNorm(config.hidden_size, config.norm_eps)
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=False)
        self.wo = nn.Linear(config.hidden_size, config.hidden_size, bias=False)
        self.ffn_norm = RMSNorm(config.hidden_size, config.norm_eps)
        self.ffn = SwiGLU(config.hidden_size, config.swiglu_hidden)

    def project(self, x: torch.Tensor, rotation: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """q, k, v of shape (*tokens, heads, d); qkv.weight rows are [q_h | k_h | v_h] per head."""
        q, k, v = (
            self.qkv(self.attention_norm(x))
            .view(*x.shape[:-1], self.heads, 3 * self.dim_head)
            .chunk(3, dim=-1)
        )
        return apply_rope(q, rotation), apply_rope(k, rotation), v

    def forward_padded(
        self, x: torch.Tensor, rotation: torch.Tensor, keep: torch.Tensor | None, eager: bool
    ) -> torch.Tensor:
        # x: (B, L, H); rotation: (L, d/2); keep: (B, 1, 1, L) bool, True = attend to that key.
        q, k, v = (t.transpose(1, 2) for t in self.project(x, rotation))  # (B, heads, L, d)
        if eager:  # the explicit softmax, for --attn-implementation eager
            scores = q @ k.transpose(-1, -2) / math.sqrt(self.dim_head)  # (B, heads, L, L)
            if keep is not None:
                scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
            attended = torch.softmax(scores.float(), dim=-1).type_as(v) @ v
        else:
            attended = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        x = x + self.wo(attended.transpose(1, 2).reshape(x.shape))
        return x + self.ffn(self.ffn_norm(x))

    def forward_unpadded(
        self, x: torch.Tensor, rotation: torch.Tensor, cu_seqlens: torch.Tensor, max_len: int
    ) -> torch.Tensor:
        # x: (T, H) real tokens of all rows, packed; rotation: (T, d/2) per-token positions.
        q, k, v = self.project(x, rotation)  # (T, heads, d)
        attended = varlen_attention(q, k, v, cu_seqlens, max_len)
        x = x + self.wo(attended.reshape(x.shape))
        return x + self.ffn(self.ffn_norm(x))


def varlen_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_len: int,
    scale: float | None = None,
    window: int | None = None,
) -> torch.Tensor:
    """Attention within each packed sequence: (T, heads, d) -> (T, heads, d). ``window``: attend
    only to keys at most that many positions away (local attention layers)."""
    bands = (window, window) if window is not None else (-1, -1)
    # The fused varlen kernels take half precision only; float32 runs the reference.
    if q.is_cuda and q.dtype in (torch.float16, torch.bfloat16):
        try:
            from flash_attn import flash_attn_varlen_func

            return flash_attn_varlen_func(
                q, k, v, cu_seqlens, cu_seqlens, max_len, max_len, softmax_scale=scale,
                window_size=bands,
            )  # fmt: skip
        except ImportError:
            from torch.nn.attention.varlen import varlen_attn

            return varlen_attn(
                q, k, v, cu_seqlens, cu_seqlens, max_len, max_len, scale=scale, window_size=bands
            )
    return varlen_reference(q, k, v, cu_seqlens, scale, window)


def pack(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """For a right-padded (B, L) bool mask: cu_seqlens (B + 1,) int32, each real token's index in
    its row (T,), which is its position, and the longest row's length."""
    lengths = mask.sum(dim=1, dtype=torch.int32)
    cu_seqlens = F.pad(torch.cumsum(lengths, 0, dtype=torch.int32), (1, 0))
    positions = torch.arange(mask.shape[1], device=mask.device).expand(mask.shape)[mask]
    return cu_seqlens, positions, int(lengths.max())


def unpack(packed: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Packed (T, H) real-token states back to (B, L, H), zeros at padding."""
    out = packed.new_zeros(*mask.shape, packed.shape[-1])
    out[mask] = packed
    return out


def varlen_kernel_name(device: str, half: bool = True) -> str:
    """What ``varlen_attention`` runs on ``device``, in half precision or not (for run cards)."""
    if not device.startswith("cuda") or not half:
        return "varlen (per-sequence sdpa reference)"
    try:
        import flash_attn  # noqa: F401

        return "varlen (flash-attn)"
    except ImportError:
        return "varlen (torch varlen_attn)"


def varlen_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    scale: float | None = None,
    window: int | None = None,
) -> torch.Tensor:
    """Plain-torch variable-length attention: the sequences of each length stacked, one SDPA per
    length (banded if ``window``), so no padding and, at a training step's hundreds of texts, far
    fewer calls than texts. Sequences are split off and the outputs concatenated, never sliced or
    written into slices: autograd's backward of each slice would fill a whole (T, heads, d)
    gradient, per sequence."""
    lengths = torch.diff(cu_seqlens).tolist()
    pieces = [t.split(lengths) for t in (q, k, v)]  # per sequence: (n, heads, d)
    by_length: dict[int, list[int]] = {}
    for index, n in enumerate(lengths):
        by_length.setdefault(n, []).append(index)
    outs: list[torch.Tensor] = [q[:0]] * len(lengths)  # each replaced below, in text order
    for n, indices in by_length.items():
        # (g, heads, n, d), 4-d: torch's fused CPU kernel takes no other (else the math path)
        stacked = (torch.stack([p[i] for i in indices]).transpose(1, 2) for p in pieces)
        band = None
        if window is not None:
            pos = torch.arange(n, device=q.device)
            band = (pos[:, None] - pos[None, :]).abs() <= window
        attended = F.scaled_dot_product_attention(*stacked, attn_mask=band, scale=scale)
        for index, out in zip(indices, attended.transpose(1, 2).unbind(0), strict=True):
            outs[index] = out  # (n, heads, d)
    return torch.cat(outs)  # (T, heads, d)


class NeoBERTPreTrainedModel(PreTrainedModel):
    config_class = NeoBERTConfig
    base_model_prefix = "model"
    _supports_sdpa = True
    _supports_flash_attn = True
    _no_split_modules = ("EncoderBlock",)

    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.embedding_init_range
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=std)
        elif isinstance(module, RMSNorm):
            nn.init.ones_(module.weight)


class NeoBERT(NeoBERTPreTrainedModel):
    """The encoder: AutoModel for model_type "neobert"."""

    def __init__(self, config: NeoBERTConfig) -> None:
        super().__init__(config)
        self.encoder = nn.Embedding(
            config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id
        )
        self.transformer_encoder = nn.ModuleList(
            EncoderBlock(config) for _ in range(config.num_hidden_layers)
        )
        self.layer_norm = RMSNorm(config.hidden_size, config.norm_eps)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.encoder

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.encoder = value

    def attention_kernel(self, device: str, unpadded: bool | None = None, half: bool = True) -> str:
        """What actually runs on ``device`` (recorded in run cards); ``unpadded``: the path the
        caller forces (None: the config's)."""
        if self.use_unpadded(device) if unpadded is None else unpadded:
            return varlen_kernel_name(device, half)
        return "eager (padded, key mask)" if self._eager() else "sdpa (padded, key mask)"

    def _eager(self) -> bool:
        """The padded path runs the explicit softmax when transformers was asked for eager;
        sdpa and flash requests run SDPA (the packed path covers flash-attn)."""
        from neobench.compat.transformers import attn_implementation

        return attn_implementation(self.config) == "eager"

    def use_unpadded(self, device: str) -> bool:
        """config.unpadded_attention: "on", "off", or "auto" (on CUDA only)."""
        mode = getattr(self.config, "unpadded_attention", "auto")
        return mode == "on" or (mode != "off" and device.startswith("cuda"))

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,  # accepted and ignored: NeoBERT has none
        output_hidden_states: bool = False,
        return_dict: bool = True,
        **kwargs: object,
    ) -> BaseModelOutput:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        mask = attention_mask.bool()
        x = self.encoder(input_ids)
        hidden_states = [x] if output_hidden_states else None
        if self.use_unpadded(str(x.device)):
            cu_seqlens, positions, max_len = pack(mask)
            rotation = rope_angles(positions, self.config.dim_head, self.config.rope_theta)
            packed = x[mask]
            for block in self.transformer_encoder:
                packed = block.forward_unpadded(packed, rotation, cu_seqlens, max_len)
                if output_hidden_states:
                    hidden_states.append(unpack(packed, mask))
            out = unpack(self.layer_norm(packed), mask)
        else:
            positions = torch.arange(input_ids.shape[1], device=x.device)
            rotation = rope_angles(positions, self.config.dim_head, self.config.rope_theta)
            keep = None if bool(mask.all()) else mask[:, None, None, :]
            eager = self._eager()
            for block in self.transformer_encoder:
                x = block.forward_padded(x, rotation, keep, eager)
                if output_hidden_states:
                    hidden_states.append(x)
            out = self.layer_norm(x)
        return BaseModelOutput(
            last_hidden_state=out, hidden_states=tuple(hidden_states) if hidden_states else None
        )


class NeoBERTLMHead(NeoBERTPreTrainedModel):
    """Encoder + MLM decoder: AutoModelForMaskedLM for model_type "neobert" (the hub checkpoint)."""

    def __init__(self, config: NeoBERTConfig) -> None:
        super().__init__(config)
        self.model = NeoBERT(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if module is getattr(self, "decoder", None):
            nn.init.normal_(module.weight, std=self.config.decoder_init_range)
            nn.init.zeros_(module.bias)

    def get_output_embeddings(self) -> nn.Linear:
        return self.decoder

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: object,
    ) -> MaskedLMOutput:
        hidden = self.model(input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state
        logits = self.decoder(hidden)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(
                logits.view(-1, logits.shape[-1]).float(), labels.view(-1), ignore_index=-100
            )
        return MaskedLMOutput(loss=loss, logits=logits, hidden_states=hidden)


class NeoBERTForSequenceClassification(NeoBERTPreTrainedModel):
    """Encoder + the authors' GLUE head: AutoModelForSequenceClassification for model_type
    "neobert"; the encoder's weights load from the hub checkpoint (its ``model.`` prefix)."""

    def __init__(self, config: NeoBERTConfig) -> None:
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = NeoBERT(config)
        dropout = getattr(config, "classifier_dropout", None)
        self.head = ClassificationHead(
            config.hidden_size, config.num_labels, 0.1 if dropout is None else dropout
        )
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs: object,
    ) -> SequenceClassifierOutput:
        kwargs.pop("token_type_ids", None)
        hidden = self.model(input_ids, attention_mask=attention_mask).last_hidden_state
        return self.head.output(hidden, labels)
