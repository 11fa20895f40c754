"""Any encoder -> a SentenceTransformer with mean pooling: load, backbone checks, attention choice,
unpad and native NeoBERT (registered with transformers' Auto classes by `register` when a model
is loaded or built, never at import).

May import: protocol, compat, core.
"""

from __future__ import annotations

import functools


@functools.cache  # once per process
def register() -> None:
    """Register model_type "neobert" with transformers' Auto classes (idempotent)."""
    from transformers import (
        AutoConfig,
        AutoModel,
        AutoModelForMaskedLM,
        AutoModelForSequenceClassification,
    )

    from neobench.models.neobert import (
        NeoBERT,
        NeoBERTConfig,
        NeoBERTForSequenceClassification,
        NeoBERTLMHead,
    )

    AutoConfig.register("neobert", NeoBERTConfig, exist_ok=True)
    AutoModel.register(NeoBERTConfig, NeoBERT, exist_ok=True)
    AutoModelForMaskedLM.register(NeoBERTConfig, NeoBERTLMHead, exist_ok=True)
    AutoModelForSequenceClassification.register(
        NeoBERTConfig, NeoBERTForSequenceClassification, exist_ok=True
    )
