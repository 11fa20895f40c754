"""neobench's own folder on this machine: what only saves time and may be deleted at any moment
(the embedding cache, encoder/cache.py; model fingerprints, models/fingerprint.py). Nothing in it
can change a score."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "NEOBENCH_CACHE"


def neobench_home() -> Path:
    """$NEOBENCH_CACHE, else ~/.cache/neobench (not created here)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "neobench").expanduser()
