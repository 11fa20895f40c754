"""neobench: the NeoBERT fine-tune-and-evaluate protocol as a reproducible standard."""

__version__ = "0.1.0"

# transformers has no "neobert"; registering our native implementation makes
# AutoModel / AutoModelForMaskedLM load chandar-lab/NeoBERT folders without remote code.
from neobench.models import register as _register_models

_register_models()
