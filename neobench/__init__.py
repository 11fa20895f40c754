"""neobench: the NeoBERT fine-tune-and-evaluate protocol as a reproducible standard."""

__version__ = "0.1.0"
