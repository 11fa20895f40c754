"""neobench: the NeoBERT fine-tune-and-evaluate protocol as a reproducible standard.

Packages by stage, each importing only the ones below it (checked by import-linter, see
pyproject.toml): core <- protocol <- models <- encoder <- evaluate / train <- report <- bench /
study <- cli. Importing neobench imports neither torch nor transformers; native NeoBERT is
registered with transformers' Auto classes when a model is loaded (neobench.models.register).
"""

__version__ = "0.1.0"
