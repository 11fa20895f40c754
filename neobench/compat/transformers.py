"""neobench's uses of transformers' private names: the class AutoModel builds for a config, the
attention implementations a class declares, a config's attention implementation, and the
"unpadded-attention" patch's changes (compat/patches.py)."""

from __future__ import annotations

from typing import Any

# The class attributes transformers checks before it runs an implementation; the older flash
# name is still found in remote code.
DECLARED = (
    ("_supports_sdpa", ("sdpa",)),
    ("_supports_flash_attn", ("flash",)),
    ("_supports_flash_attn_2", ("flash",)),
    ("_supports_flex_attn", ("flex_attention",)),
)


def auto_model_class(config: Any) -> type | None:
    """The class ``AutoModel.from_config(config)`` builds (what sentence-transformers loads), or
    None for a config class AutoModel does not map (transformers then tries and reports)."""
    from transformers import AutoModel
    from transformers.models.auto.auto_factory import _get_model_class

    mapping = AutoModel._model_mapping
    if type(config) not in mapping:
        return None
    return _get_model_class(config, mapping)


def declared_attention(cls: type) -> set[str]:
    """The implementations ``cls`` declares in transformers' class attributes: "sdpa", "flash"
    (flash-attn 2 and later), "flex_attention"; eager is always there and not listed."""
    declared = (kinds for attribute, kinds in DECLARED if getattr(cls, attribute, False))
    return {kind for kinds in declared for kind in kinds}


def attn_implementation(config: Any, default: str | None = None) -> str | None:
    """The attention implementation transformers resolved for ``config`` (``default`` before it
    resolved one)."""
    return getattr(config, "_attn_implementation", default)


def unpadded_changes(owner: Any, replacement: Any) -> list[tuple[Any, str, Any]]:
    """The "unpadded-attention" patch: with a callable ``replacement``, the backbone ``owner``'s
    forward (an instance attribute shadows the class method); with a kernel name, per packed
    call, the config ``owner``'s attention implementation (transformers takes no per-call
    argument for it)."""
    if callable(replacement):
        return [(owner, "forward", replacement)]
    return [(owner, "_attn_implementation", replacement)]
