"""Where the recipe runs: its processes (WORLD_SIZE, RANK from `torchrun` or `accelerate
launch`; one without them) and their precision. Only the main process writes the card, the model
and the plots: the others would race it for the same files.
"""

from __future__ import annotations

import os

from neobench.protocol.recipe_values import RecipeValues


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def bf16(values: RecipeValues, device: str) -> bool:
    """bfloat16 autocast: on CUDA when the recipe asks for it; the CPU always runs float32."""
    return device.startswith("cuda") and values.mixed_precision == "bf16"
