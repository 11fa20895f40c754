"""The shared embedding cache: vectors in SQLite (WAL), each checked against its checksum on read.

The cache only saves time: no state of its file may fail a task or change a score. The file is
``<folder>/embeddings.sqlite`` (plus SQLite's own -wal and -shm), the folder being --cache-dir,
else $NEOBENCH_CACHE, else ~/.cache/neobench. One table, ``emb(key, vec, digest)``; the schema
version is SQLite's ``user_version`` (2). Version 1 (neobench 0.1.0: no digest) is moved aside,
not migrated: fresh checksums over its bytes would bless exactly the damage they exist to catch.

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
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import sqlite3
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import numpy as np

from neobench.core.errors import NeobenchError

logger = logging.getLogger(__name__)

CACHE_ENV = "NEOBENCH_CACHE"
READ_ENV = "NEOBENCH_CACHE_READ"  # other jobs' finished caches, read-only
CACHE_FILE = "embeddings.sqlite"
SCHEMA_VERSION = 2  # 1: emb(key, vec) without checksums (neobench 0.1.0)
COLUMNS = ["key", "vec", "digest"]
SIDE_FILES = ("-wal", "-shm")
ASIDE_TAGS = {"corrupt": "damaged", "v1": "outdated"}
# quick_check reads the whole file: ~1 s per GB warm, far more on a cold network disk.
QUICK_CHECK_MAX_BYTES = 2 * 1024**3
# Page size of a new file: 16 KiB pages hold 10 rows of a 384-dim vector (4 KiB pages hold 2,
# leaving a quarter empty; a 1024-dim row would not fit one), and a batch dirties and writes
# 4x fewer pages to the WAL and through checkpoints: inserts 1.2-1.7x faster, lookups within
# noise (benchmarks/cache_throughput.py). A file made with another page size is used as it is.
PAGE_SIZE = 16384
# Keys per SELECT ... IN (...): bounded by the connection's own variable limit (999 before
# SQLite 3.32, 32766 after); larger lists mean fewer statements, and SQLite sorts each list.
SELECT_CHUNK = 16384
# Shards of one job share the cache and each holds the write lock for one batch at a time.
BUSY_TIMEOUT_S = 60.0
# SQLite primary result codes (sqlite3.Error.sqlite_errorcode & 0xFF).
SQLITE_PERM, SQLITE_READONLY, SQLITE_CORRUPT, SQLITE_FULL, SQLITE_CANTOPEN = 3, 8, 11, 13, 14
SQLITE_NOTADB = 26
LOCATION_FIX = (
    "Pass --cache-dir with a writable folder (or set $NEOBENCH_CACHE), "
    "or --no-cache to run without the cache."
)
NO_EFFECT = "scores do not depend on the cache"

T = TypeVar("T")


def default_cache_path() -> Path:
    """$NEOBENCH_CACHE/embeddings.sqlite, else ~/.cache/neobench/embeddings.sqlite."""
    root = os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "neobench"
    return Path(root).expanduser() / CACHE_FILE


def cache_path(cache_dir: str | None) -> Path:
    """The cache file for a --cache-dir value (None: the default folder)."""
    return Path(cache_dir).expanduser() / CACHE_FILE if cache_dir else default_cache_path()


def read_paths() -> list[Path]:
    """The other caches named by $NEOBENCH_CACHE_READ (files, or folders holding one)."""
    return [Path(p).expanduser() for p in os.environ.get(READ_ENV, "").split(os.pathsep) if p]


def vector_digest(key: bytes, vec: bytes) -> bytes:
    """BLAKE2b-128 over key, dimension and bytes: a flipped bit, a cut blob and a vector
    stored under another text's key all fail it (~5 µs per 768-dim vector)."""
    digest = hashlib.blake2b(key, digest_size=16)
    digest.update(struct.pack("<I", len(vec) // 4))
    digest.update(vec)
    return digest.digest()


def _rows(keys: list[bytes], vectors: np.ndarray) -> list[tuple[bytes, bytes, bytes]]:
    """(key, vec, digest) rows of a (n, dim) block: one float32 copy of the whole block, and
    each row's bytes cut from it (what ``tobytes`` of each vector gives, without a numpy call
    per vector)."""
    block = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(keys), -1)
    n, dim = block.shape
    whole, step = block.tobytes(), 4 * dim
    blobs = [whole[i : i + step] for i in range(0, n * step, step)]
    return [(key, vec, vector_digest(key, vec)) for key, vec in zip(keys, blobs, strict=True)]


def _block(blobs: list[bytes], n: int, places: Iterable[int] | None = None) -> np.ndarray:
    """An (n, dim) float32 matrix holding the equal-length vector blobs, the i-th at row
    ``places[i]`` (default: row i), zeros in the rows none fills. Each blob is copied once,
    straight into its row through a memoryview: ~3x faster than joining them into one bytes
    object (which is then one more copy to make writable)."""
    size = len(blobs[0]) if blobs else 0
    out = np.zeros((n, size // 4), dtype=np.float32)
    if size:
        view = memoryview(out).cast("B")
        for i, blob in zip(range(n) if places is None else places, blobs, strict=True):
            view[i * size : (i + 1) * size] = blob
    return out


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


class _Damaged(Exception):
    """The file is not a healthy cache of this schema; ``tag`` names the moved-aside copy."""

    def __init__(self, detail: str, tag: str = "corrupt") -> None:
        super().__init__(detail)
        self.tag = tag


def _code(error: BaseException) -> int:
    return (getattr(error, "sqlite_errorcode", None) or 0) & 0xFF


def _is_damage(error: BaseException) -> bool:
    return _code(error) in (SQLITE_CORRUPT, SQLITE_NOTADB)


def _is_full(error: BaseException) -> bool:
    return _code(error) == SQLITE_FULL or getattr(error, "errno", None) == errno.ENOSPC


def _read_schema(db: sqlite3.Connection, path: Path) -> bool:
    """True for a cache of this schema, False for an empty file; else _Damaged or, for a newer
    schema (which a newer neobench still uses), a NeobenchError."""
    (version,) = db.execute("PRAGMA user_version").fetchone()
    tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    columns = [row[1] for row in db.execute("PRAGMA table_info(emb)")]
    if version > SCHEMA_VERSION:
        raise NeobenchError(
            f"embedding cache {path} has schema version {version}, newer than this neobench's "
            f"({SCHEMA_VERSION}): a newer neobench wrote it. Upgrade neobench, or pass "
            "--cache-dir with another folder, or --no-cache."
        )
    if not tables and version == 0:
        return False
    if tables == ["emb"] and columns == COLUMNS and version == SCHEMA_VERSION:
        return True
    if tables == ["emb"] and columns == ["key", "vec"] and version == 0:
        raise _Damaged("written by neobench 0.1.0, without checksums to verify it", tag="v1")
    raise _Damaged(f"not a neobench embedding cache: tables {tables}, schema version {version}")


def _quick_check(db: sqlite3.Connection) -> None:
    found = [row[0] for row in db.execute("PRAGMA quick_check(3)")]
    if found != ["ok"]:
        # Rows may hold several lines under a "*** in database main ***" heading.
        lines = [line for row in found for line in row.splitlines() if not line.startswith("***")]
        raise _Damaged("; ".join(lines[:3]))


def _open(path: Path, full_check: bool) -> sqlite3.Connection:
    """A connection to a healthy cache at ``path``, created when the file is new or empty.

    Raises _Damaged for a damaged or outdated file, NeobenchError where the path cannot be
    opened, and sqlite3.DatabaseError for any other trouble (busy, I/O, disk full).
    """
    try:
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)
    except sqlite3.DatabaseError as error:
        raise NeobenchError(
            f"embedding cache {path} cannot be opened ({error}). {LOCATION_FIX}"
        ) from None
    try:
        if _read_schema(db, path):
            if full_check:
                _quick_check(db)
        else:
            # Only takes effect on a file with no page yet (another shard's creation wins).
            db.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            db.execute("PRAGMA journal_mode=WAL")  # readers never wait for a writing shard
            with db:  # IF NOT EXISTS: another shard may be creating it at the same time
                db.execute(
                    "CREATE TABLE IF NOT EXISTS emb "
                    "(key BLOB PRIMARY KEY, vec BLOB NOT NULL, digest BLOB NOT NULL)"
                )
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        return db
    except sqlite3.DatabaseError as error:
        db.close()
        if _is_damage(error):
            raise _Damaged(str(error)) from None
        if _code(error) in (SQLITE_CANTOPEN, SQLITE_READONLY, SQLITE_PERM):
            raise NeobenchError(
                f"embedding cache {path} cannot be opened ({error}). {LOCATION_FIX}"
            ) from None
        raise
    except BaseException:
        db.close()
        raise


def _select(db: sqlite3.Connection, keys: list[bytes]) -> list[tuple]:
    chunk = min(SELECT_CHUNK, db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))
    rows: list[tuple] = []
    for start in range(0, len(keys), chunk):
        part = keys[start : start + chunk]
        query = f"SELECT key, vec, digest FROM emb WHERE key IN ({','.join('?' * len(part))})"
        rows += db.execute(query, part).fetchall()
    return rows


def _verify(rows: list[tuple]) -> tuple[list[tuple], list[bytes]]:
    """The rows whose vector passes its checksum, and the keys of those that fail it."""
    good: list[tuple] = []
    bad: list[bytes] = []
    for row in rows:
        key, vec, digest = row
        if isinstance(vec, bytes) and digest == vector_digest(key, vec):
            good.append(row)
        else:
            bad.append(key)
    return good, bad


def _open_read_only(path: Path) -> sqlite3.Connection:
    """A connection that cannot write ``path`` nor create a -wal/-shm beside it; raises
    _Damaged, NeobenchError or sqlite3.DatabaseError for a file that is not a usable cache."""
    # immutable: no locks and no WAL index, so a file on a read-only or foreign disk opens too.
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        if not _read_schema(db, path):
            raise _Damaged("an empty file, not a neobench embedding cache")
        return db
    except BaseException:
        db.close()
        raise


def _files(path: Path) -> list[Path]:
    """The cache file and SQLite's side files that exist."""
    return [p for p in (path, *(Path(f"{path}{s}") for s in SIDE_FILES)) if p.exists()]


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in _files(path))


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


def move_aside(path: Path, tag: str) -> Path:
    """Rename the cache and its -wal/-shm to ``<name>.<tag>-<time>`` (SQLite can still open the
    renamed file with its WAL, to look at it); returns the new path."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    aside = path.with_name(f"{path.name}.{tag}-{stamp}")
    counter = 1
    while _files(aside):
        aside, counter = path.with_name(f"{path.name}.{tag}-{stamp}-{counter}"), counter + 1
    for file in _files(path):
        file.rename(f"{aside}{file.name[len(path.name) :]}")
    return aside


def moved_aside(path: Path) -> list[Path]:
    """Earlier caches moved aside beside ``path`` (their -wal/-shm not listed)."""
    found = {p for tag in ASIDE_TAGS for p in path.parent.glob(f"{path.name}.{tag}-*")}
    return sorted(p for p in found if not p.name.endswith(SIDE_FILES))


class EmbeddingCache:
    """Embeddings on disk in SQLite (WAL): a killed run leaves every committed batch intact.

    Opening checks the folder (NeobenchError) and the file (moved aside when damaged). Reads and
    writes never raise a database error: they warn and degrade, see the module docstring.
    """

    def __init__(self, path: Path, read_from: Iterable[Path] | None = None) -> None:
        self.path = Path(path)
        # Other jobs' caches, read on a miss (None: $NEOBENCH_CACHE_READ); opened at first use.
        self.read_from = read_paths() if read_from is None else [Path(p) for p in read_from]
        self._others: list[tuple[Path, sqlite3.Connection]] | None = None
        self.events: list[str] = []  # the warnings given, for the run card
        self.bad_entries = 0  # cached vectors that failed their checksum
        self.stored = 0  # embeddings this process stored in the current file
        self.writable = True  # False once the disk was full
        self.db = self._open_or_replace()
        self._identity = _identity(self.path)

    @staticmethod
    def key(fingerprint: str, prompt: str, text: str) -> bytes:
        """SHA-256 of fingerprint, prompt and text joined by NUL characters: one text's key."""
        return hashlib.sha256("\x00".join((fingerprint, prompt, text)).encode()).digest()

    @staticmethod
    def keys(fingerprint: str, prompt: str, texts: Iterable[str]) -> list[bytes]:
        """`key` of each text, in order: the hash state of fingerprint NUL prompt NUL, copied and
        fed each text (UTF-8 encodes a concatenation as the concatenation of the parts'
        encodings, so the keys are `key`'s), ~0.55 instead of ~0.8 µs a text."""
        prefix = hashlib.sha256(f"{fingerprint}\x00{prompt}\x00".encode())
        out = []
        for text in texts:
            digest = prefix.copy()
            digest.update(text.encode())
            out.append(digest.digest())
        return out

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
        return _block([blobs[keys[i]] for i in places], len(keys), places), found

    def get_many(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        """The verified vectors of ``keys`` found in the cache, else in the other jobs' caches
        (copied into this one); damaged ones are dropped. The arrays are read-only rows of one
        block (see `lookup` for the block itself)."""
        blobs = self._fetch(keys)
        if len({len(b) for b in blobs.values()}) != 1:  # none, or of several lengths
            return {k: np.frombuffer(b, dtype=np.float32) for k, b in blobs.items()}
        block = _block(list(blobs.values()), len(blobs))
        block.flags.writeable = False
        return dict(zip(blobs, block, strict=True))

    def put(self, keys: list[bytes], vectors: np.ndarray) -> None:
        """Store the (len(keys), dim) block ``vectors`` under ``keys`` in one transaction: all
        of it or none of it. The bulk form of `put_many`."""
        if self.db is None or not self.writable or not keys:
            return
        rows = _rows(keys, vectors)
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
        rows = [row for k, v in zip(keys, vectors, strict=True) for row in _rows([k], v)]
        self._guard("storing", lambda: self._insert(rows), None)

    def _fetch(self, keys: list[bytes]) -> dict[bytes, bytes]:
        """The verified vector bytes of ``keys`` found here, else in the other jobs' caches
        (copied into this one); damaged entries are dropped and counted."""
        good, bad = _verify(self._guard("reading", lambda: _select(self.db, keys), []))
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
            copied = self._read_others(missing)
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
        for _, other in self._others or []:
            with contextlib.suppress(sqlite3.Error):
                other.close()
        self._others = None

    def _read_others(self, keys: list[bytes]) -> list[tuple]:
        """The verified rows of ``keys`` in the other jobs' caches, the first listed first."""
        if self._others is None:
            self._others = [found for p in self.read_from if (found := self._open_other(p))]
        found: dict[bytes, tuple] = {}
        for path, db in list(self._others):
            wanted = [key for key in keys if key not in found]
            if not wanted:
                break
            try:
                got, bad = _verify(_select(db, wanted))
            except (sqlite3.DatabaseError, OSError) as error:
                self._skip_other(path, str(error))
                continue
            found |= {row[0]: row for row in got}
            if bad:  # its verified vectors are still right; the file is not to be trusted further
                self._skip_other(path, f"{len(bad)} cached embeddings failed their checksum")
        return list(found.values())

    def _open_other(self, path: Path) -> tuple[Path, sqlite3.Connection] | None:
        # Told apart at first use, not at start: this job's own folder is created meanwhile.
        path = path / CACHE_FILE if path.is_dir() else path
        if path.resolve() == self.path.resolve():
            return None  # this job's own cache, read already
        if not path.is_file():
            problem = "no such file"
        else:
            try:
                return path, _open_read_only(path)
            except (_Damaged, NeobenchError, sqlite3.DatabaseError, OSError) as error:
                problem = str(error)
        self._skip_other(path, problem)
        return None

    def _skip_other(self, path: Path, problem: str) -> None:
        """Stop reading another job's cache for this run; it is left as it is."""
        for other in [db for p, db in self._others or [] if p == path]:
            with contextlib.suppress(sqlite3.Error):
                other.close()
        self._others = [(p, db) for p, db in self._others or [] if p != path]
        self._warn(
            f"embedding cache {path} (listed in ${READ_ENV}, read-only): {problem}; not read "
            f"again in this run, and left unchanged ({NO_EFFECT})."
        )

    def _insert(self, rows: list[tuple[bytes, bytes, bytes]]) -> None:
        with self.db:  # one transaction
            self.db.executemany(
                "INSERT OR REPLACE INTO emb (key, vec, digest) VALUES (?, ?, ?)", rows
            )
        self.stored += len(rows)

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
        if self.db is None or _identity(self.path) == self._identity:
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
        self._identity = _identity(self.path)

    def _trouble(self, error: BaseException, action: str) -> None:
        if _is_full(error):
            self.writable = False
            self._warn(
                f"embedding cache {self.path}: the disk is full ({error}); this run stores no "
                f"more embeddings and keeps the computed ones in memory ({NO_EFFECT}). Free "
                "space there, or pass --cache-dir on another disk, or --no-cache."
            )
            return
        self.close()
        if not _is_damage(error):
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
            return _open(self.path, full_check=_size(self.path) <= QUICK_CHECK_MAX_BYTES)
        except _Damaged as damage:
            aside = self._move_aside_at_open(damage)
            self._warn(
                f"embedding cache {self.path} is {ASIDE_TAGS[damage.tag]} ({damage}): moved to "
                f"{aside} (with its -wal/-shm); starting a fresh cache. Delete the old file when "
                "you no longer need it (neobench cache clear does)."
            )
        except sqlite3.DatabaseError as error:
            return self._without_cache(error)
        try:
            return _open(self.path, full_check=False)
        except (_Damaged, sqlite3.DatabaseError) as error:  # another process got there first
            return self._without_cache(error)

    def _without_cache(self, error: Exception) -> None:
        self._warn(
            f"embedding cache {self.path}: {error}; this run continues without the cache "
            f"({NO_EFFECT})."
        )

    def _move_aside_at_open(self, damage: _Damaged) -> Path:
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


@dataclass
class CacheReport:
    """What `neobench cache info` shows."""

    path: Path
    state: str = "missing"  # missing | ok | corrupt | outdated | newer
    embeddings: int = 0
    bytes: int = 0  # the file with its -wal/-shm
    problem: str | None = None  # why `neobench eval` would not use the file as it is
    fix: str | None = None
    aside: list[Path] = field(default_factory=list)  # earlier caches moved aside, still on disk
    cleared: list[str] = field(default_factory=list)  # what `cache clear` did, one line each

    @property
    def ok(self) -> bool:
        return self.state in ("missing", "ok")

    @property
    def aside_mb(self) -> float:
        return sum(p.stat().st_size for p in self.aside) / 1e6


def cache_command(cache_dir: str | None, action: str) -> CacheReport:
    """`neobench cache info|clear`: clear first when asked, then the full check."""
    path = cache_path(cache_dir)
    cleared = clear_cache(path) if action == "clear" else []
    report = inspect_cache(path)
    report.cleared = cleared
    return report


def inspect_cache(path: Path) -> CacheReport:
    """The state of the cache at ``path``, read-only: creates, moves and repairs nothing. Always
    runs the full quick_check (reads every page), whatever the size."""
    if path.parent.exists() and not path.parent.is_dir():
        raise NeobenchError(
            f"embedding cache folder {path.parent} is a file, not a folder. Pass --cache-dir "
            "with the folder that holds embeddings.sqlite."
        )
    report = CacheReport(path, bytes=_size(path), aside=moved_aside(path))
    if not path.exists():
        return report
    clear = f"neobench cache clear --cache-dir {path.parent}"
    db = None
    try:
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)
        if _read_schema(db, path):  # else an empty file, which eval fills in
            _quick_check(db)
            (report.embeddings,) = db.execute("SELECT COUNT(*) FROM emb").fetchone()
        report.state = "ok"
    except _Damaged as damage:
        report.state = "outdated" if damage.tag == "v1" else "corrupt"
        report.problem, report.fix = str(damage), clear
    except NeobenchError as error:  # a newer schema: not ours to clear
        report.state, report.problem = "newer", error.problems[0]
    except sqlite3.DatabaseError as error:
        report.state, report.problem, report.fix = "corrupt", str(error), clear
    finally:
        if db is not None:
            db.close()
    return report


def clear_cache(path: Path) -> list[str]:
    """Delete the cache (with its -wal/-shm) in whatever state, and the caches moved aside
    beside it, then start an empty one; returns what was done, one line each.

    Files are removed rather than emptied with DELETE + VACUUM: that works on a damaged file and
    on a full disk, and takes no time on a multi-GB cache. A run using the cache meanwhile sees
    its file replaced and carries on with the new one.
    """
    check_folder(path.parent)
    done = []
    for old in [path, *moved_aside(path)]:
        files = _files(old)
        if files:
            size = sum(f.stat().st_size for f in files)
            for file in files:
                file.unlink()
            done.append(f"removed {old} ({size / 1e6:.1f} MB, {len(files)} file(s))")
    EmbeddingCache(path).close()
    done.append(f"started an empty cache at {path}")
    return done
