"""neobench: the NeoBERT fine-tune-and-evaluate protocol as a reproducible standard.

    import neobench as nb
    board = nb.leaderboard("runs", ci=True)

The API (neobench/api.py: finetune, evaluate, load_runs, leaderboard, compare, plan,
overlap, load_study, reproduce, publish, run_glue, glue_table) loads
on first use, so importing neobench imports neither torch nor transformers. The packages' layers:
docs/architecture.md.
"""

from __future__ import annotations

import logging
from typing import Any

from neobench._version import __version__

# A library's loggers stay silent until the application configures logging: without a handler of
# its own, a warning would reach stderr through Python's last-resort handler.
logging.getLogger(__name__).addHandler(logging.NullHandler())

API = ("finetune", "evaluate", "load_runs", "leaderboard", "compare", "plan", "overlap",
       "load_study", "reproduce", "publish", "run_glue", "glue_table", "Study", "Runs",
       "NeobenchError")  # fmt: skip
__all__ = ["__version__", *API]


def __getattr__(name: str) -> Any:
    if name in API:
        from neobench import api

        return getattr(api, name)
    raise AttributeError(f"module 'neobench' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names and the API's, loaded or not (tab completion, ``dir(neobench)``)."""
    return sorted({*globals(), *API})
