"""A model folder built from a transformers config: random weights, seeded, with a tokenizer.

What a study's `config:` entry becomes (neobench/study/models.py), and the full-size shapes that
`neobench bench gpu` measures on a machine without the hub (BERT-base, ModernBERT-base, NeoBERT).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any


def build_from_config(values: dict[str, Any], tokenizer: str, target: Path, seed: int) -> None:
    """Write ``target``: the backbone of the config ``values`` with weights drawn under ``seed``,
    and the tokenizer of the folder ``tokenizer``; built in a sibling folder and moved into place
    (an interrupted build leaves no complete-looking folder)."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    from neobench.models import register

    register()  # a config of model_type "neobert"
    fields = {k: v for k, v in values.items() if k != "model_type"}
    tmp = target.with_name(target.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    torch.manual_seed(seed)
    network = AutoModel.from_config(AutoConfig.for_model(values["model_type"], **fields))
    network.save_pretrained(tmp)
    AutoTokenizer.from_pretrained(tokenizer).save_pretrained(tmp)
    tmp.replace(target)
