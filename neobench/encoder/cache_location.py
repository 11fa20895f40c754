"""Where the embedding cache lives: its folder (--cache-dir, else $NEOBENCH_CACHE, else
~/.cache/neobench), its file name, the other jobs' caches named by $NEOBENCH_CACHE_READ, the check
that the folder can hold a cache before any work starts, and the advice the cache's messages share.
"""

from __future__ import annotations

import os
from pathlib import Path

from neobench.core.errors import NeobenchError
from neobench.core.home import CACHE_ENV as CACHE_ENV  # re-exported: the cache reads it here
from neobench.core.home import neobench_home

READ_ENV = "NEOBENCH_CACHE_READ"  # other jobs' finished caches, read-only
CACHE_FILE = "embeddings.sqlite"
LOCATION_FIX = (
    "Pass --cache-dir with a writable folder (or set $NEOBENCH_CACHE), "
    "or --no-cache to run without the cache."
)
NO_EFFECT = "scores do not depend on the cache"


def default_cache_path() -> Path:
    """$NEOBENCH_CACHE/embeddings.sqlite, else ~/.cache/neobench/embeddings.sqlite."""
    return neobench_home() / CACHE_FILE


def cache_path(cache_dir: str | None) -> Path:
    """The cache file for a --cache-dir value (None: the default folder)."""
    return Path(cache_dir).expanduser() / CACHE_FILE if cache_dir else default_cache_path()


def read_paths() -> list[Path]:
    """The other caches named by $NEOBENCH_CACHE_READ (files, or folders holding one)."""
    return [Path(p).expanduser() for p in os.environ.get(READ_ENV, "").split(os.pathsep) if p]


def check_folder(folder: Path) -> None:
    """A NeobenchError unless ``folder`` is, or can be made, a folder this process can write."""
    where = f"embedding cache folder {folder}"
    if folder.exists() and not folder.is_dir():
        raise NeobenchError(f"{where} is a file, not a folder. {LOCATION_FIX}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise NeobenchError(
            f"{where} cannot be created ({error.strerror}). {LOCATION_FIX}"
        ) from None
    # access() honours read-only mounts even for root, for whom permission bits do not count.
    if not os.access(folder, os.W_OK | os.X_OK):
        read_only = os.statvfs(folder).f_flag & os.ST_RDONLY
        why = "is on a read-only file system" if read_only else "is not writable by this user"
        raise NeobenchError(f"{where} {why}. {LOCATION_FIX}")
    file = folder / CACHE_FILE
    if file.exists() and (file.is_dir() or not os.access(file, os.R_OK | os.W_OK)):
        raise NeobenchError(
            f"embedding cache {file} is not a readable, writable file. {LOCATION_FIX}"
        )
