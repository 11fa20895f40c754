"""Which attention implementation a backbone runs: the fastest its class supports, read from the
class attributes transformers itself checks (``_supports_sdpa``, ``_supports_flash_attn``,
``_supports_flex_attn``); the order and what each backbone gets: docs/guide.md, "Backbones".
Remote-code classes cannot be inspected without running their code, so they are tried in that
order, the next taken when transformers refuses one (``candidates`` + ``build_first``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from neobench.core.errors import NeobenchError, check_choice

if TYPE_CHECKING:
    from collections.abc import Callable

logger = logging.getLogger(__name__)

# The transformers model types neobench runs unpadded (models/unpad.py), and how each numbers
# positions: from 0, or after the padding index (RoBERTa family). With native NeoBERT, the
# backbones that run packed (train/packing.py).
UNPADDED_POSITIONS = {
    "bert": "from_zero",
    "electra": "from_zero",
    "nomic_bert": "from_zero",
    "modernbert": "from_zero",
    "roberta": "after_padding_idx",
    "xlm-roberta": "after_padding_idx",
    "camembert": "after_padding_idx",
}
PACKED_TYPES = frozenset({*UNPADDED_POSITIONS, "neobert"})
# The name models/unpad.py registers its packed kernel under with transformers.
UNPADDED_KERNEL = "neobench_varlen"

AUTO = "auto"
FLASH = ("flash_attention_2", "flash_attention_3", "flash_attention_4")


def choices() -> list[str]:
    """Values of --attn-implementation: auto, eager and transformers' registered functions, but
    neobench's packed kernel (unpad.py) and the decoding-only paged variants (their inputs are
    built only by neobench's encoder or a generation loop)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    registered = [
        k for k in ALL_ATTENTION_FUNCTIONS.valid_keys() if k != UNPADDED_KERNEL and "|" not in k
    ]
    return [AUTO, "eager", *sorted(registered)]


def check(value: str) -> str:
    """``value`` if it names an implementation; else "did you mean" and the valid ones."""
    return check_choice("--attn-implementation", value, choices())


def backbone_class(config_dir: Path, trust_remote_code: bool) -> type | None:
    """The class AutoModel builds for the folder (what sentence-transformers loads), or None for
    remote code, which cannot be inspected without importing it."""
    from transformers import AutoConfig

    from neobench.compat.transformers import auto_model_class
    from neobench.models import register

    register()  # native NeoBERT
    config = AutoConfig.from_pretrained(str(config_dir), trust_remote_code=trust_remote_code)
    if trust_remote_code and "AutoModel" in (getattr(config, "auto_map", None) or {}):
        return None
    return auto_model_class(config)  # None: an unregistered config class, transformers reports


def supported(cls: type) -> list[str]:
    """Implementations ``cls`` declares, in transformers' own class attributes."""
    from neobench.compat.transformers import declared_attention

    declared = declared_attention(cls)
    found = ["eager"]
    if "sdpa" in declared:
        found.append("sdpa")
    if "flash" in declared:
        found += list(FLASH)
    if "flex_attention" in declared:
        found.append("flex_attention")
    return found


def flash_usable(device: str, half: bool) -> bool:
    """flash-attn 2 runs here: a CUDA device, fp16/bf16 compute, and the package usable
    (transformers' own check, the version included)."""
    if not (device.startswith("cuda") and half):
        return False
    from transformers.utils import is_flash_attn_2_available

    return bool(is_flash_attn_2_available())


def candidates(requested: str, cls: type | None, device: str, half: bool, spec: str) -> list[str]:
    """Implementations to try, best first: one for an inspectable class, a fallback chain for
    remote code under ``auto``. Raises NeobenchError for a request the class cannot serve."""
    check(requested)
    if requested in FLASH and not device.startswith("cuda"):
        raise NeobenchError(
            f"--attn-implementation {requested}: flash attention runs on CUDA only, and this run "
            f"is on {device}. Use --attn-implementation auto (sdpa or eager on the CPU)."
        )
    if requested != AUTO:
        if cls is not None and requested not in supported(cls):
            raise NeobenchError(
                f"--model {spec}: {cls.__name__} does not support --attn-implementation "
                f"{requested}; it supports {', '.join(supported(cls))}. Pass "
                "--attn-implementation auto (the fastest of those) or one of them."
            )
        return [requested]
    preferred = (["flash_attention_2"] if flash_usable(device, half) else []) + ["sdpa", "eager"]
    if cls is None:
        return preferred
    return [next(impl for impl in preferred if impl in supported(cls))]


def refused(error: BaseException) -> bool:
    """Whether ``error`` is transformers refusing an attention implementation for a class."""
    text = str(error)
    return "does not support" in text and ("attention" in text or "Flash Attention" in text)


def build_first(
    options: list[str], requested: str, spec: str, build: Callable[[str], object]
) -> object:
    """``build`` with the first implementation transformers accepts (several are tried only for
    remote code under ``auto``, whose support is unknown until its class is built)."""
    for index, impl in enumerate(options):
        try:
            return build(impl)
        except ValueError as error:
            if not refused(error):
                raise
            if requested != AUTO:  # remote code: its support was unknown before building
                class_name = str(error).strip().split(" ", 1)[0]
                raise NeobenchError(
                    f"--model {spec}: its remote code ({class_name}) does not support "
                    f"--attn-implementation {requested} (transformers refused it when building "
                    "the model). Pass --attn-implementation auto to take the fastest "
                    "implementation it accepts, or eager, which every class supports."
                ) from None
            if index == len(options) - 1:
                raise
            logger.info("%s refused %s; trying %s", spec, impl, options[index + 1])
    raise AssertionError("unreachable: candidates() returns at least one implementation")
