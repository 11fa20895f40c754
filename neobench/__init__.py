"""neobench: the NeoBERT fine-tune-and-evaluate protocol as a reproducible standard.

From Python (neobench/api.py; the same functions the CLI calls):

    import neobench as nb
    board = nb.leaderboard("runs", ci=True)
    board.to_pandas()

finetune, evaluate, load_runs, leaderboard, compare, load_study; errors are NeobenchError.

Packages by stage, each importing only the ones below it (import-linter, pyproject.toml): core <-
protocol <- models <- encoder <- evaluate / train <- report <- bench / study <- cli / api.
Importing neobench imports neither torch nor transformers (the API's names load on first use);
native NeoBERT is registered with transformers' Auto classes when a model loads (models.register).
"""

from __future__ import annotations

from typing import Any

from neobench._version import __version__

API = ("finetune", "evaluate", "load_runs", "leaderboard", "compare", "load_study", "Study",
       "Runs", "NeobenchError")  # fmt: skip
__all__ = ["__version__", *API]


def __getattr__(name: str) -> Any:
    if name in API:
        from neobench import api

        return getattr(api, name)
    raise AttributeError(f"module 'neobench' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names and the API's, loaded or not (tab completion, ``dir(neobench)``)."""
    return sorted({*globals(), *API})
