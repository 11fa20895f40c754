"""Unpadded (variable-length) encoding for transformers' own encoders: BERT, RoBERTa, ...

The real tokens of a batch are packed into one row of T tokens with per-sequence position ids;
attention stays within each sequence through the ``cu_seq_lens`` transformers passes down to its
attention functions (the one registered below runs neobert.varlen_attention). The last hidden
state is scattered back to (batch, length, hidden), zeros at padding, as sentence-transformers'
pooling expects. Only model types in ``POSITIONS`` (their implementation forwards position ids and
attention kwargs) are packed; see docs/guide.md, "Backbones". Packing, the kernels and the scatter
are differentiable: `finetune --padding packed` trains through ``unpadded`` (train/packing.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from transformers import AttentionInterface

from neobench.compat import patches
from neobench.models.attention import UNPADDED_KERNEL, UNPADDED_POSITIONS
from neobench.models.neobert import pack, unpack, varlen_attention

KERNEL = UNPADDED_KERNEL

POSITIONS = UNPADDED_POSITIONS  # how each architecture numbers positions (models/attention.py)


def _varlen_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    sliding_window: int | None = None,
    cu_seq_lens_q: torch.Tensor | None = None,
    max_length_q: int | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers attention-interface signature: (1, heads, T, d) in, (1, T, heads, d) out."""
    if cu_seq_lens_q is None:
        raise RuntimeError(f"{KERNEL} attention needs packed inputs (cu_seq_lens_q)")
    if dropout:  # transformers passes the module's attention dropout in training mode only
        raise RuntimeError(
            f"{KERNEL} attention applies no attention dropout (asked for {dropout}): train "
            "with dropout off, or padded (train/packing.py)"
        )
    q, k, v = (t[0].transpose(0, 1) for t in (query, key, value))  # (T, heads, d)
    # transformers' sliding_window s means |query - key| <= s - 1 (its flash path passes s - 1).
    window = sliding_window - 1 if sliding_window is not None else None
    out = varlen_attention(q, k, v, cu_seq_lens_q, int(max_length_q), scale=scaling, window=window)
    return out.unsqueeze(0), None


def supports(auto_model: Any) -> bool:
    """Whether ``auto_model`` can run packed: its type is listed and its class is transformers'
    own. Remote code of a listed type (nomic-ai's NomicBERT) has other forward arguments."""
    return getattr(auto_model.config, "model_type", None) in POSITIONS and type(
        auto_model
    ).__module__.startswith("transformers.")


def packed_forward(
    forward: Any,
    config: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    token_type_ids: torch.Tensor | None = None,
    **kwargs: Any,
) -> Any:
    """The backbone's ``forward`` on the real tokens only; last_hidden_state comes back as
    (B, L, H) with zeros at padding."""
    from transformers.modeling_outputs import BaseModelOutput

    mask = attention_mask.bool()
    cu_seqlens, positions, max_len = pack(mask)
    if POSITIONS[config.model_type] == "after_padding_idx":
        positions = positions + config.pad_token_id + 1
    extra = {"token_type_ids": token_type_ids[mask][None]} if token_type_ids is not None else {}
    with patches.applied("unpadded-attention", config, KERNEL) as on:  # for this call only
        if not on:  # NEOBENCH_PATCHES changed since the block began: padded, as shipped
            padded = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
            return forward(
                input_ids=input_ids, attention_mask=attention_mask, return_dict=True, **padded
            )
        out = forward(
            input_ids=input_ids[mask][None],
            position_ids=positions[None],
            cu_seq_lens_q=cu_seqlens,
            cu_seq_lens_k=cu_seqlens,
            max_length_q=max_len,
            max_length_k=max_len,
            return_dict=True,
            **extra,
        )
    return BaseModelOutput(last_hidden_state=unpack(out.last_hidden_state[0], mask))


@contextlib.contextmanager
def unpadded(st_model: Any, enabled: bool = True) -> Iterator[bool]:
    """Within the block the SentenceTransformer's backbone runs packed, if ``enabled``, its
    architecture allows and the registry's "unpadded-attention" patch is in force; yields
    whether it does."""
    auto_model = getattr(st_model[0], "auto_model", None)
    usable = enabled and auto_model is not None and supports(auto_model)
    if not usable or not patches.on("unpadded-attention"):  # the gate off: as shipped, padded
        yield False
        return
    original = auto_model.forward

    def forward(
        input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs: Any
    ) -> Any:
        if attention_mask is None or kwargs.get("output_hidden_states"):
            return original(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        kwargs.pop("return_dict", None)
        return packed_forward(original, auto_model.config, input_ids, attention_mask, **kwargs)

    with patches.applied("unpadded-attention", auto_model, forward) as on:
        yield on


# transformers' attention layers find the kernel by name (the patch sets it per packed call)
AttentionInterface.register(KERNEL, _varlen_attention_forward)
