"""Native model implementations registered with transformers' Auto classes."""

from __future__ import annotations

_REGISTERED = False


def register() -> None:
    """Register model_type "neobert" with transformers' Auto classes (idempotent)."""
    global _REGISTERED
    if _REGISTERED:
        return
    from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM

    from neobench.models.neobert import NeoBERT, NeoBERTConfig, NeoBERTLMHead

    AutoConfig.register("neobert", NeoBERTConfig, exist_ok=True)
    AutoModel.register(NeoBERTConfig, NeoBERT, exist_ok=True)
    AutoModelForMaskedLM.register(NeoBERTConfig, NeoBERTLMHead, exist_ok=True)
    _REGISTERED = True
