"""The shared embedding cache: vectors in SQLite (WAL), each checked against its checksum on read.

The cache only saves time: no state of its file may fail a task or change a score. The file is
``<folder>/embeddings.sqlite`` (plus SQLite's own -wal and -shm), the folder being --cache-dir,
else $NEOBENCH_CACHE, else ~/.cache/neobench. Table ``emb(key, vec, digest, used)``; the schema
version is SQLite's ``user_version`` (3). Version 1 (neobench 0.1.0: no digest) is moved aside,
not migrated: fresh checksums over its bytes would bless exactly the damage they exist to catch.
Version 2 (no last-use stamps) is migrated in place: its checksums stay valid.

With ``max_bytes`` the cache keeps the bytes its database holds under that cap, least recently
used rows out first (neobench/encoder/cache_lru.py: last use is stamped in blocks, at most
once a minute per row).

What happens when (a logger warning each, unless it says error):

- the folder is a file, cannot be created, or is not writable: a NeobenchError, before any work.
- the file is not a database, has malformed pages, or holds another schema: it is moved aside to
  ``embeddings.sqlite.corrupt-<time>`` (with its -wal/-shm) and a fresh cache starts. At open,
  ``PRAGMA quick_check`` reads every page of files up to QUICK_CHECK_MAX_BYTES (about 0.35 s per
  400 MB from the page cache, disk speed when cold); larger files are only opened and their schema
  read, and their damage is met by a later read or write (next point). `neobench cache info`
  always runs the full check.
- a read or write meets damage during a run: the file is moved aside the same way and the run
  goes on without a cache; any other database error also switches the cache off for the run.
- a vector fails its checksum: the entry is dropped and the text encoded again.
- the disk fills up while storing: storing stops for the run (one warning); the computed
  embeddings are used from memory.
- the file is deleted or replaced during a run: noticed before the next read or write (its inode
  changed), and a fresh cache starts at the same path.

Two forms of the same reads and writes (the same rows on disk): per item, `get_many(keys) ->
{key: vector}` and `put_many((key, vector), ...)`; per block, `keys(fingerprint, prompt, texts)`,
`lookup(keys) -> (vectors, found)` (a (n, dim) float32 matrix and a bool mask) and
`put(keys, vectors)`. The block form does no numpy call per vector. A new file has 16 KiB pages
(PAGE_SIZE); one made with another page size is used as it is.

Caches of other jobs ($NEOBENCH_CACHE_READ, os.pathsep-separated files or folders) are read on a
miss, never written: opened ``mode=ro&immutable=1``, so no lock, -wal or -shm touches them (list
only files whose writer has finished: an immutable reader does not see later writes). Their
vectors pass the same checksum and are copied into this cache. One that is missing, unreadable,
damaged or holds a vector failing its checksum is skipped for the run with one warning, and left
as it is: it is not ours to move aside.

The store (EmbeddingCache, with the warnings and the degrading above) is here; beside it:
cache_location (folder, file name, environment), cache_rows (keys, checksums, blocks),
cache_file (the SQLite schema, opening, moving aside), cache_others (other jobs' caches) and
cache_report (`neobench cache info|clear`).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

import numpy as np

from neobench.core.errors import NeobenchError
from neobench.encoder.cache_file import (
    ASIDE_TAGS,
    PAGE_SIZE,
    SCHEMA_VERSION,
    Damaged,
    cache_size,
    file_identity,
    is_damage,
    is_full,
    move_aside,
    open_db,
    select_rows,
    used_bytes,
)
from neobench.encoder.cache_location import (
    CACHE_ENV,
    CACHE_FILE,
    NO_EFFECT,
    READ_ENV,
    cache_path,
    check_folder,
    default_cache_path,
    read_paths,
)
from neobench.encoder.cache_lru import evict, now_ms, restamp, write_settings
from neobench.encoder.cache_others import OtherCaches
from neobench.encoder.cache_rows import (
    blobs_block,
    block_rows,
    text_key,
    text_keys,
    vector_digest,
    verify_rows,
)

# Imported from here by callers: the cache's settings and the checksum live in its siblings.
__all__ = [
    "CACHE_ENV",
    "CACHE_FILE",
    "PAGE_SIZE",
    "READ_ENV",
    "SCHEMA_VERSION",
    "EmbeddingCache",
    "cache_path",
    "default_cache_path",
    "vector_digest",
]

logger = logging.getLogger(__name__)

# Both are read from this module at each open, not copied into its siblings, so a value set
# here (tests lower them) takes effect.
# quick_check reads the whole file: ~1 s per GB warm, far more on a cold network disk.
QUICK_CHECK_MAX_BYTES = 2 * 1024**3
# Shards of one job share the cache and each holds the write lock for one batch at a time.
BUSY_TIMEOUT_S = 60.0

T = TypeVar("T")


class EmbeddingCache:
    """Embeddings on disk in SQLite (WAL): a killed run leaves every committed batch intact.

    Opening checks the folder (NeobenchError) and the file (moved aside when damaged). Reads and
    writes never raise a database error: they warn and degrade, see the module docstring.
    """

    def __init__(
        self,
        path: Path,
        read_from: Iterable[Path] | None = None,
        max_bytes: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes  # the cap on used_bytes(); None: no cap
        self.evicted = 0  # rows this process deleted to keep under the cap
        # Other jobs' caches, read on a miss (None: $NEOBENCH_CACHE_READ); opened at first use.
        self.read_from = read_paths() if read_from is None else [Path(p) for p in read_from]
        self._others = OtherCaches(self.read_from, self.path, self._warn)
        self.events: list[str] = []  # the warnings given, for the run card
        self.bad_entries = 0  # cached vectors that failed their checksum
        self.stored = 0  # embeddings this process stored in the current file
        self.writable = True  # False once the disk was full
        self.db = self._open_or_replace()
        self._identity = file_identity(self.path)

    # The key of a text, and of a list of texts (see neobench/encoder/cache_rows.py).
    key = staticmethod(text_key)
    keys = staticmethod(text_keys)

    def lookup(self, keys: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """The verified vectors of ``keys`` as one block: ``(vectors, found)``, ``vectors`` a
        (len(keys), dim) float32 matrix whose row i is key i's vector where ``found[i]`` (a bool
        array) and zeros elsewhere (writable: the caller fills them); dim is 0 when nothing
        is found.

        The bulk form of `get_many`, with the same sources, checks and copying; a repeated key
        is found (or not) at each of its places. A found vector whose length differs from the
        first found one's (a key holds one model's vector, so only a damaged or foreign entry
        would) counts as missing, so the caller encodes it again and overwrites it.
        """
        blobs = self._fetch(keys)
        size = len(next(iter(blobs.values()))) if blobs else 0
        if any(len(b) != size for b in blobs.values()):
            blobs = {k: b for k, b in blobs.items() if len(b) == size}
        found = np.fromiter((k in blobs for k in keys), dtype=bool, count=len(keys))
        places = np.flatnonzero(found).tolist()
        return blobs_block([blobs[keys[i]] for i in places], len(keys), places), found

    def get_many(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        """The verified vectors of ``keys`` found in the cache, else in the other jobs' caches
        (copied into this one); damaged ones are dropped. The arrays are read-only rows of one
        block (see `lookup` for the block itself)."""
        blobs = self._fetch(keys)
        if len({len(b) for b in blobs.values()}) != 1:  # none, or of several lengths
            return {k: np.frombuffer(b, dtype=np.float32) for k, b in blobs.items()}
        block = blobs_block(list(blobs.values()), len(blobs))
        block.flags.writeable = False
        return dict(zip(blobs, block, strict=True))

    def put(self, keys: list[bytes], vectors: np.ndarray) -> None:
        """Store the (len(keys), dim) block ``vectors`` under ``keys`` in one transaction: all
        of it or none of it. The bulk form of `put_many`."""
        if self.db is None or not self.writable or not keys:
            return
        rows = block_rows(keys, vectors)
        self._guard("storing", lambda: self._insert(rows), None)

    def put_many(self, items: Iterable[tuple[bytes, np.ndarray]]) -> None:
        """Store one batch of (key, vector) in one transaction: all of it or none of it."""
        if self.db is None or not self.writable:
            return
        keys, vectors = [], []
        for key, vector in items:
            keys.append(key)
            vectors.append(np.asarray(vector, dtype=np.float32))
        if len({v.shape for v in vectors}) <= 1:
            self.put(keys, np.stack(vectors) if vectors else np.zeros((0, 0), np.float32))
            return
        rows = [row for k, v in zip(keys, vectors, strict=True) for row in block_rows([k], v)]
        self._guard("storing", lambda: self._insert(rows), None)

    def held_bytes(self) -> int | None:
        """What the database holds now (the cap's measure); None without a database."""
        return self._guard("measuring", lambda: used_bytes(self.db), None)

    def record_settings(self, policy: str) -> None:
        """Write the run's policy and cap into the file, for `neobench cache info`; and apply
        the cap at once (it may be lower than what the file holds)."""
        if self.db is None or not self.writable:
            return
        self._guard(
            "recording settings", lambda: write_settings(self.db, policy, self.max_bytes), None
        )
        if self.max_bytes is not None:
            self._guard("evicting", self._evict, None)

    def _fetch(self, keys: list[bytes]) -> dict[bytes, bytes]:
        """The verified vector bytes of ``keys`` found here, else in the other jobs' caches
        (copied into this one); damaged entries are dropped and counted. Rows found here are
        stamped as used (in one block, only those with a stale stamp)."""
        read = self._guard("reading", lambda: select_rows(self.db, keys, used=True), [])
        if read and self.writable:
            stamps = [(row[0], row[3]) for row in read]
            self._guard("stamping", lambda: restamp(self.db, stamps), 0)
        good, bad = verify_rows([row[:3] for row in read])
        if bad:
            self.bad_entries += len(bad)
            self._warn(
                f"embedding cache {self.path}: {len(bad)} cached embeddings failed their "
                "checksum (damaged on disk); dropped and encoded again."
            )
            if self.writable:
                self._guard("dropping damaged entries", lambda: self._delete(bad), None)
        found = {key: vec for key, vec, _ in good}
        missing = [key for key in dict.fromkeys(keys) if key not in found]
        if missing and self.read_from:
            copied = self._others.read(missing)
            if copied and self.db is not None and self.writable:
                # Verified rows, checksums included: stored as they are.
                self._guard("storing", lambda: self._insert(copied), None)
            found |= {key: vec for key, vec, _ in copied}
        return found

    def close(self) -> None:
        """Close the connection; the last one to close folds the WAL into the file."""
        if self.db is not None:
            with contextlib.suppress(sqlite3.Error):
                self.db.close()
            self.db = None
        self._others.close()

    def _insert(self, rows: list[tuple[bytes, bytes, bytes]]) -> None:
        now = now_ms()
        with self.db:  # one transaction
            self.db.executemany(
                "INSERT OR REPLACE INTO emb (key, vec, digest, used) VALUES (?, ?, ?, ?)",
                [(*row, now) for row in rows],
            )
        self.stored += len(rows)
        if self.max_bytes is not None:
            self._evict()

    def _evict(self) -> None:
        self.evicted += evict(self.db, self.max_bytes)

    def _delete(self, keys: list[bytes]) -> None:
        with self.db:
            self.db.executemany("DELETE FROM emb WHERE key = ?", [(k,) for k in keys])

    def _guard(self, action: str, work: Callable[[], T], fallback: T) -> T:
        """``work()``, or ``fallback`` after a warning when the cache is gone or fails."""
        self._follow_file()
        if self.db is None:
            return fallback
        try:
            return work()
        except (sqlite3.DatabaseError, OSError) as error:
            self._trouble(error, action)
            return fallback

    def _follow_file(self) -> None:
        """A deleted or replaced file would swallow every write unseen: reopen at the path."""
        if self.db is None or file_identity(self.path) == self._identity:
            return
        self.close()
        lost = ""
        if self.stored:
            lost = f": the {self.stored} embeddings this run stored are no longer in it"
        self._warn(
            f"embedding cache {self.path} was deleted or replaced during this run{lost} (texts "
            f"are encoded again when needed; {NO_EFFECT}). Continuing with a new cache at "
            f"{self.path}."
        )
        self.stored = 0
        try:
            self.db = self._open_or_replace()
        except NeobenchError as error:
            self._warn(f"{error} This run continues without the cache.")
        self._identity = file_identity(self.path)

    def _trouble(self, error: BaseException, action: str) -> None:
        if is_full(error):
            self.writable = False
            self._warn(
                f"embedding cache {self.path}: the disk is full ({error}); this run stores no "
                f"more embeddings and keeps the computed ones in memory ({NO_EFFECT}). Free "
                "space there, or pass --cache-dir on another disk, or --no-cache."
            )
            return
        self.close()
        if not is_damage(error):
            self._warn(
                f"embedding cache {self.path}: {error} while {action}; this run continues "
                f"without the cache ({NO_EFFECT})."
            )
            return
        try:
            where = f"moved to {move_aside(self.path, 'corrupt')} (with its -wal/-shm)"
        except OSError as move_error:
            where = (
                f"it could not be moved aside ({move_error}); fix: neobench cache clear "
                f"--cache-dir {self.path.parent}"
            )
        self._warn(
            f"embedding cache {self.path} is damaged ({error}, found while {action}): {where}. "
            f"This run continues without the cache ({NO_EFFECT}); the next starts a fresh one."
        )

    def _open_or_replace(self) -> sqlite3.Connection | None:
        """Open the cache; a damaged or outdated file is moved aside and a fresh one started."""
        check_folder(self.path.parent)
        try:
            return open_db(
                self.path,
                full_check=cache_size(self.path) <= QUICK_CHECK_MAX_BYTES,
                timeout=BUSY_TIMEOUT_S,
            )
        except Damaged as damage:
            aside = self._move_aside_at_open(damage)
            self._warn(
                f"embedding cache {self.path} is {ASIDE_TAGS[damage.tag]} ({damage}): moved to "
                f"{aside} (with its -wal/-shm); starting a fresh cache. Delete the old file when "
                "you no longer need it (neobench cache clear does)."
            )
        except sqlite3.DatabaseError as error:
            return self._without_cache(error)
        try:
            return open_db(self.path, full_check=False, timeout=BUSY_TIMEOUT_S)
        except (Damaged, sqlite3.DatabaseError) as error:  # another process got there first
            return self._without_cache(error)

    def _without_cache(self, error: Exception) -> None:
        self._warn(
            f"embedding cache {self.path}: {error}; this run continues without the cache "
            f"({NO_EFFECT})."
        )

    def _move_aside_at_open(self, damage: Damaged) -> Path:
        try:
            return move_aside(self.path, damage.tag)
        except OSError as error:
            raise NeobenchError(
                f"embedding cache {self.path} is {ASIDE_TAGS[damage.tag]} ({damage}) and could "
                f"not be moved aside ({error}). Fix: neobench cache clear --cache-dir "
                f"{self.path.parent}"
            ) from None

    def _warn(self, message: str) -> None:
        self.events.append(message)
        logger.warning("%s", message)
