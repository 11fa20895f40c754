"""Other jobs' embedding caches ($NEOBENCH_CACHE_READ, os.pathsep-separated files or folders):
read on a miss, never written.

Each is opened at first use ``mode=ro&immutable=1``, so no lock, -wal or -shm touches it (list
only files whose writer has finished: an immutable reader does not see later writes). Its
vectors pass the same checksum as the job's own. One that is missing, unreadable, damaged or
holds a vector failing its checksum is skipped for the run with one warning, and left as it is:
it is not ours to move aside.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

from neobench.core.errors import NeobenchError
from neobench.encoder.cache_file import Damaged, open_read_only, select_rows
from neobench.encoder.cache_location import CACHE_FILE, NO_EFFECT, READ_ENV
from neobench.encoder.cache_rows import verify_rows


class OtherCaches:
    """The other jobs' caches of one EmbeddingCache, in the order listed; ``warn`` is its own
    warning (logged, and kept for the run card)."""

    def __init__(self, paths: list[Path], own: Path, warn: Callable[[str], None]) -> None:
        self.paths = paths
        self.own = own  # the job's own cache file, never read as another's
        self._warn = warn
        # (path, connection) of those still read; None until first use, and again after close.
        self._open: list[tuple[Path, sqlite3.Connection]] | None = None

    def read(self, keys: list[bytes]) -> list[tuple]:
        """The verified rows of ``keys`` in the other jobs' caches, the first listed first."""
        if self._open is None:
            self._open = [found for p in self.paths if (found := self._open_one(p))]
        found: dict[bytes, tuple] = {}
        for path, db in list(self._open):
            wanted = [key for key in keys if key not in found]
            if not wanted:
                break
            try:
                got, bad = verify_rows(select_rows(db, wanted))
            except (sqlite3.DatabaseError, OSError) as error:
                self._skip(path, str(error))
                continue
            found |= {row[0]: row for row in got}
            if bad:  # its verified vectors are still right; the file is not to be trusted further
                self._skip(path, f"{len(bad)} cached embeddings failed their checksum")
        return list(found.values())

    def close(self) -> None:
        for _, other in self._open or []:
            with contextlib.suppress(sqlite3.Error):
                other.close()
        self._open = None

    def _open_one(self, path: Path) -> tuple[Path, sqlite3.Connection] | None:
        # Told apart at first use, not at start: this job's own folder is created meanwhile.
        path = path / CACHE_FILE if path.is_dir() else path
        if path.resolve() == self.own.resolve():
            return None  # this job's own cache, read already
        if not path.is_file():
            problem = "no such file"
        else:
            try:
                return path, open_read_only(path)
            except (Damaged, NeobenchError, sqlite3.DatabaseError, OSError) as error:
                problem = str(error)
        self._skip(path, problem)
        return None

    def _skip(self, path: Path, problem: str) -> None:
        """Stop reading another job's cache for this run; it is left as it is."""
        for other in [db for p, db in self._open or [] if p == path]:
            with contextlib.suppress(sqlite3.Error):
                other.close()
        self._open = [(p, db) for p, db in self._open or [] if p != path]
        self._warn(
            f"embedding cache {path} (listed in ${READ_ENV}, read-only): {problem}; not read "
            f"again in this run, and left unchanged ({NO_EFFECT})."
        )
