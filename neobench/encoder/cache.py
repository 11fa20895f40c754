"""The shared embedding cache: vectors in SQLite (WAL), each checked against its checksum on read.

It only saves time: no state of its file may fail a task or change a score. Opening raises
NeobenchError only where no cache can be kept at the path (an unusable folder, a newer schema, a
damaged file that cannot be moved aside); after that, reads and writes warn and degrade. What
happens when, and why: docs/guide.md, `neobench eval`, "The embedding cache only saves time"; what
is stored, and the cap: docs/performance.md, "The embedding cache".
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import hashlib
import logging
import math
import os
import queue
import sqlite3
import struct
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from neobench.core.errors import NeobenchError
from neobench.core.home import CACHE_ENV as CACHE_ENV  # re-exported: callers read it here
from neobench.core.home import neobench_home
from neobench.core.stages import stage

logger = logging.getLogger(__name__)

READ_ENV = "NEOBENCH_CACHE_READ"  # other jobs' finished caches, read-only
CACHE_FILE = "embeddings.sqlite"
LOCATION_FIX = (
    "Pass --cache-dir with a writable folder (or set $NEOBENCH_CACHE), "
    "or --no-cache to run without the cache."
)
NO_EFFECT = "scores do not depend on the cache"


def cache_path(cache_dir: str | None) -> Path:
    """The cache file for a --cache-dir value (None: $NEOBENCH_CACHE, else ~/.cache/neobench)."""
    return (Path(cache_dir).expanduser() if cache_dir else neobench_home()) / CACHE_FILE


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


# A row: ``(key, vec, digest)``: the key names (model fingerprint, prompt, text), vec is the
# vector's float32 bytes, digest a checksum over both.
def text_keys(fingerprint: str, prompt: str, texts: Iterable[str]) -> list[bytes]:
    """Each text's key: SHA-256 of fingerprint, prompt and text joined by NUL characters. The hash
    state of fingerprint NUL prompt NUL is copied and fed each text (UTF-8 of a concatenation is
    the parts' UTF-8 joined): ~0.55 instead of ~0.8 µs a text."""
    prefix = hashlib.sha256(f"{fingerprint}\x00{prompt}\x00".encode())
    out = []
    for text in texts:
        digest = prefix.copy()
        digest.update(text.encode())
        out.append(digest.digest())
    return out


def vector_digest(key: bytes, vec: bytes) -> bytes:
    """BLAKE2b-128 over key, dimension and bytes: a flipped bit, a cut blob and a vector
    stored under another text's key all fail it (~5 µs per 768-dim vector)."""
    digest = hashlib.blake2b(key, digest_size=16)
    digest.update(struct.pack("<I", len(vec) // 4))
    digest.update(vec)
    return digest.digest()


def block_rows(keys: list[bytes], vectors: np.ndarray) -> list[tuple[bytes, bytes, bytes]]:
    """(key, vec, digest) rows of a (n, dim) block: each row's bytes cut from one float32 copy."""
    block = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(keys), -1)
    n, dim = block.shape
    whole, step = block.tobytes(), 4 * dim
    blobs = [whole[i : i + step] for i in range(0, n * step, step)]
    return [(key, vec, vector_digest(key, vec)) for key, vec in zip(keys, blobs, strict=True)]


def blobs_block(blobs: list[bytes], n: int, places: Iterable[int]) -> np.ndarray:
    """An (n, dim) float32 matrix of the equal-length blobs, the i-th at row ``places[i]``, zeros
    elsewhere; one copy per blob, ~3x faster than joining them and copying to make it writable."""
    size = len(blobs[0]) if blobs else 0
    out = np.zeros((n, size // 4), dtype=np.float32)
    if size:
        view = memoryview(out).cast("B")
        for i, blob in zip(places, blobs, strict=True):
            view[i * size : (i + 1) * size] = blob
    return out


def verify_rows(rows: list[tuple]) -> tuple[list[tuple], list[bytes]]:
    """The rows whose vector passes its checksum, and the keys of those that fail it."""
    checked = [
        (row, isinstance(row[1], bytes) and row[2] == vector_digest(*row[:2])) for row in rows
    ]
    return [row for row, ok in checked if ok], [row[0] for row, ok in checked if not ok]


# The SQLite file: ``emb(key, vec, digest, used)`` (``used``: last stored or read, in ms, indexed
# for eviction) and ``meta(name, value)`` (the last run's policy and cap). Nothing here warns or
# degrades: trouble is raised (Damaged: not a healthy cache of this schema); the store decides.
SCHEMA_VERSION = 3  # 1: emb(key, vec) without checksums (neobench 0.1.0); 2: no `used`, no meta
COLUMNS = ["key", "vec", "digest", "used"]
V2_COLUMNS = ["key", "vec", "digest"]
SIDE_FILES = ("-wal", "-shm")
ASIDE_TAGS = {"corrupt": "damaged", "v1": "outdated"}
# Page size of a new file: 16 KiB pages hold 10 rows of a 384-dim vector (4 KiB pages hold 2,
# leaving a quarter empty), and a batch writes 4x fewer pages: inserts 1.2-1.7x faster, lookups
# within noise (benchmarks/cache_throughput.py). A file of another page size is used as it is.
PAGE_SIZE = 16384
# Keys per SELECT ... IN (...): bounded by the connection's own variable limit (999 before
# SQLite 3.32, 32766 after); larger lists mean fewer statements, and SQLite sorts each list.
SELECT_CHUNK = 16384
# quick_check reads the whole file: ~1 s per GB warm, far more on a cold network disk.
QUICK_CHECK_MAX_BYTES = 2 * 1024**3
# Shards of one job share the cache and each holds the write lock for one batch at a time.
BUSY_TIMEOUT_S = 60.0


class Damaged(Exception):
    """The file is not a healthy cache of this schema; ``tag`` names the moved-aside copy."""

    def __init__(self, detail: str, tag: str = "corrupt") -> None:
        super().__init__(detail)
        self.tag = tag


def _code(error: BaseException) -> int:
    """SQLite's primary result code (sqlite3.SQLITE_*) of ``error``; 0 for other errors."""
    return (getattr(error, "sqlite_errorcode", None) or 0) & 0xFF


def is_damage(error: BaseException) -> bool:
    return _code(error) in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def read_schema(db: sqlite3.Connection, path: Path, migrate: bool = False) -> bool:
    """True for a cache of this schema, False for an empty file; else Damaged, or a NeobenchError
    for a newer schema (a newer neobench still uses it). A version 2 cache is migrated when
    ``migrate``, else accepted as it is (read-only readers select key, vec and digest only)."""
    version, tables, columns = _schema(db)
    if version > SCHEMA_VERSION:
        raise NeobenchError(
            f"embedding cache {path} has schema version {version}, newer than this neobench's "
            f"({SCHEMA_VERSION}): a newer neobench wrote it. Upgrade neobench, or pass "
            "--cache-dir with another folder, or --no-cache."
        )
    if not tables and version == 0:
        return False
    if tables == ["emb", "meta"] and columns == COLUMNS and version == SCHEMA_VERSION:
        return True
    if tables == ["emb"] and columns == V2_COLUMNS and version == 2:
        if migrate:
            # One write transaction; the version is read again under the lock (another shard may
            # have migrated first). The index is built by one scan of the table.
            with db:
                db.execute("BEGIN IMMEDIATE")
                if _schema(db)[0] == 2:
                    _create_v3(db)
        return True
    if tables == ["emb"] and columns == ["key", "vec"] and version == 0:
        raise Damaged("written by neobench 0.1.0, without checksums to verify it", tag="v1")
    raise Damaged(f"not a neobench embedding cache: tables {tables}, schema version {version}")


def _schema(db: sqlite3.Connection) -> tuple[int, list[str], list[str]]:
    (version,) = db.execute("PRAGMA user_version").fetchone()
    query = "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"
    tables = [name for (name,) in db.execute(query)]
    columns = [row[1] for row in db.execute("PRAGMA table_info(emb)")]
    return version, tables, columns


def _create_v3(db: sqlite3.Connection) -> None:
    """What version 3 adds to version 2's table; old rows get ``used`` 0 (first out under a cap)."""
    if "used" not in _schema(db)[2]:
        db.execute("ALTER TABLE emb ADD COLUMN used INTEGER NOT NULL DEFAULT 0")
    db.execute("CREATE INDEX IF NOT EXISTS emb_used ON emb (used)")
    db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def quick_check(db: sqlite3.Connection) -> None:
    found = [row[0] for row in db.execute("PRAGMA quick_check(3)")]
    if found != ["ok"]:
        # Rows may hold several lines under a "*** in database main ***" heading.
        lines = [line for row in found for line in row.splitlines() if not line.startswith("***")]
        raise Damaged("; ".join(lines[:3]))


def open_db(path: Path, full_check: bool) -> sqlite3.Connection:
    """A connection to a healthy cache at ``path``, created when the file is new or empty. Raises
    Damaged for a damaged or outdated file, NeobenchError where the path cannot be opened, and
    sqlite3.DatabaseError for any other trouble (busy, I/O, disk full)."""
    try:
        # check_same_thread off: the cache writer (CacheWriter) stores from its own thread,
        # never while another thread uses the connection.
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, check_same_thread=False)
    except sqlite3.DatabaseError as error:
        raise NeobenchError(
            f"embedding cache {path} cannot be opened ({error}). {LOCATION_FIX}"
        ) from None
    try:
        if read_schema(db, path, migrate=True):
            if full_check:
                quick_check(db)
        else:
            # Only takes effect on a file with no page yet (another shard's creation wins).
            db.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            db.execute("PRAGMA journal_mode=WAL")  # readers never wait for a writing shard
            with db:  # IF NOT EXISTS: another shard may be creating it at the same time
                db.execute(
                    "CREATE TABLE IF NOT EXISTS emb (key BLOB PRIMARY KEY, vec BLOB NOT NULL, "
                    "digest BLOB NOT NULL, used INTEGER NOT NULL DEFAULT 0)"
                )
                _create_v3(db)
        return db
    except BaseException as error:
        db.close()
        if is_damage(error):
            raise Damaged(str(error)) from None
        if _code(error) in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM):
            raise NeobenchError(
                f"embedding cache {path} cannot be opened ({error}). {LOCATION_FIX}"
            ) from None
        raise


def select_rows(db: sqlite3.Connection, keys: list[bytes], used: bool = False) -> list[tuple]:
    """The (key, vec, digest) rows of ``keys`` found in ``db``, unverified; with ``used``, the
    last-use stamp as a fourth column (version 3 only)."""
    chunk = min(SELECT_CHUNK, db.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))
    columns = "key, vec, digest, used" if used else "key, vec, digest"
    rows: list[tuple] = []
    for start in range(0, len(keys), chunk):
        part = keys[start : start + chunk]
        query = f"SELECT {columns} FROM emb WHERE key IN ({','.join('?' * len(part))})"
        rows += db.execute(query, part).fetchall()
    return rows


def used_bytes(db: sqlite3.Connection) -> int:
    """Bytes the database holds: (page_count - freelist_count) x page_size. The file is larger:
    pages freed by deletes stay in it, and the -wal holds transactions until a checkpoint."""
    (pages,) = db.execute("PRAGMA page_count").fetchone()
    (free,) = db.execute("PRAGMA freelist_count").fetchone()
    (size,) = db.execute("PRAGMA page_size").fetchone()
    return (pages - free) * size


def cache_files(path: Path) -> list[Path]:
    """The cache file and SQLite's side files that exist."""
    return [p for p in (path, *(Path(f"{path}{s}") for s in SIDE_FILES)) if p.exists()]


def cache_size(path: Path) -> int:
    return sum(p.stat().st_size for p in cache_files(path))


def file_identity(path: Path) -> tuple[int, int] | None:
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
    while cache_files(aside):
        aside, counter = path.with_name(f"{path.name}.{tag}-{stamp}-{counter}"), counter + 1
    for file in cache_files(path):
        file.rename(f"{aside}{file.name[len(path.name) :]}")
    return aside


def moved_aside(path: Path) -> list[Path]:
    """Earlier caches moved aside beside ``path`` (their -wal/-shm not listed)."""
    found = {p for tag in ASIDE_TAGS for p in path.parent.glob(f"{path.name}.{tag}-*")}
    return sorted(p for p in found if not p.name.endswith(SIDE_FILES))


# Least recently used out first (docs/performance.md, "The cap"). A read restamps a row only when
# its stamp is older than RESTAMP_MS (one UPDATE per lookup block), so shards sharing the file
# (WAL: one writer at a time) rarely wait on each other for stamps.
RESTAMP_MS = 60_000  # tests lower it
EVICT_TO = 0.9  # room for about a tenth of the cap before the next eviction
MAX_ROUNDS = 64  # rounds of deletes per eviction; the size is read again after each
# Bytes a row takes beyond key, vector and checksum, at least: its used stamp, the record and
# cell headers, and its entries in the key and used indexes.
ROW_OVERHEAD = 64


def evict(db: sqlite3.Connection, max_bytes: int) -> int:
    """Over ``max_bytes``: delete least recently used rows down to EVICT_TO x max_bytes; returns
    the rows deleted."""
    held = used_bytes(db)
    if held <= max_bytes:
        return 0
    target, deleted = int(max_bytes * EVICT_TO), 0
    for _ in range(MAX_ROUNDS):
        if held <= target:
            break
        # Each round deletes what the excess would hold at one row's payload plus ROW_OVERHEAD:
        # a row takes at least that, so a round never deletes more than needed.
        first = db.execute(
            "SELECT length(key) + length(vec) + length(digest) FROM emb ORDER BY used, rowid "
            "LIMIT 1"
        ).fetchone()
        if first is None:  # empty: what is left is the schema
            break
        count = max(1, math.ceil((held - target) / (first[0] + ROW_OVERHEAD)))
        with db:
            deleted += db.execute(
                "DELETE FROM emb WHERE rowid IN "
                "(SELECT rowid FROM emb ORDER BY used, rowid LIMIT ?)",
                (count,),
            ).rowcount
        held = used_bytes(db)
    return deleted


T = TypeVar("T")


class EmbeddingCache:
    """Embeddings on disk in SQLite (WAL): a killed run leaves every committed batch intact.
    Reads and writes never raise a database error (see the module docstring); they come per block
    (`keys`, `lookup`, `put`: no numpy call per vector) and per item (`get_many`, `put_many`)."""

    def __init__(
        self, path: Path, read_from: Iterable[Path] | None = None, max_bytes: int | None = None
    ) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes  # the cap on used_bytes(); None: no cap
        self.evicted = 0  # rows this process deleted to keep under the cap
        # Other jobs' caches, read on a miss in the order listed (None: $NEOBENCH_CACHE_READ),
        # each opened read-only at first use and skipped for the run at its first trouble.
        self.read_from = read_paths() if read_from is None else [Path(p) for p in read_from]
        self._others: dict[Path, sqlite3.Connection] | None = None  # still read; None: not opened
        self.events: list[str] = []  # the warnings given, for the run card
        self.bad_entries = 0  # cached vectors that failed their checksum
        self.stored = 0  # embeddings this process stored in the current file
        self.writable = True  # False once the disk was full
        self.db = self._open_or_replace()
        self._identity = file_identity(self.path)

    keys = staticmethod(text_keys)

    def lookup(self, keys: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """``(vectors, found)``: a writable (len(keys), dim) float32 matrix whose row i is key i's
        verified vector where the bool array ``found[i]``, zeros elsewhere (dim 0 when none is
        found). A vector of another length than the first found one's (only a damaged or foreign
        entry) counts as missing, so the caller encodes it again and overwrites it."""
        blobs = self._fetch(keys)
        size = len(next(iter(blobs.values()))) if blobs else 0
        if any(len(b) != size for b in blobs.values()):
            blobs = {k: b for k, b in blobs.items() if len(b) == size}
        found = np.fromiter((k in blobs for k in keys), dtype=bool, count=len(keys))
        places = np.flatnonzero(found).tolist()
        return blobs_block([blobs[keys[i]] for i in places], len(keys), places), found

    def get_many(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        """The verified vectors of ``keys`` found, as read-only float32 arrays (of any length)."""
        return {k: np.frombuffer(b, dtype=np.float32) for k, b in self._fetch(keys).items()}

    def put(self, keys: list[bytes], vectors: np.ndarray) -> None:
        """Store the (len(keys), dim) block ``vectors`` under ``keys`` in one transaction."""
        if self.db is not None and self.writable and keys:
            self._store(block_rows(keys, vectors))

    def put_many(self, items: Iterable[tuple[bytes, np.ndarray]]) -> None:
        """Store one batch of (key, vector) in one transaction: all of it or none of it."""
        if self.db is not None and self.writable:
            self._store([row for key, vector in items for row in block_rows([key], vector)])

    def held_bytes(self) -> int | None:
        """What the database holds now (the cap's measure); None without a database."""
        return self._guard("measuring", lambda: used_bytes(self.db), None)

    def record_settings(self, policy: str) -> None:
        """Write the run's policy and cap into the file, for `neobench cache info`; and apply
        the cap at once (it may be lower than what the file holds)."""
        if self.db is None or not self.writable:
            return
        cap = "" if self.max_bytes is None else str(self.max_bytes)
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        rows = [("policy", policy), ("max_bytes", cap), ("set_at", stamp)]
        sql = "INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)"
        self._guard("recording settings", lambda: self._many(sql, rows), None)
        if self.max_bytes is not None:
            self._guard("evicting", self._evict, None)

    def _fetch(self, keys: list[bytes]) -> dict[bytes, bytes]:
        """The verified vector bytes of ``keys`` found here, else in the other jobs' caches
        (copied into this one); damaged entries are dropped and counted. Rows found here are
        stamped as used (in one block, only those with a stale stamp)."""
        read = self._guard("reading", lambda: select_rows(self.db, keys, used=True), [])
        now = time.time_ns() // 1_000_000  # ms
        stale = [(now, row[0]) for row in read if row[3] < now - RESTAMP_MS]
        if stale and self.writable:
            sql = "UPDATE emb SET used = ? WHERE key = ?"
            self._guard("stamping", lambda: self._many(sql, stale), None)
        good, bad = verify_rows([row[:3] for row in read])
        if bad:
            self.bad_entries += len(bad)
            self._warn(
                f"embedding cache {self.path}: {len(bad)} cached embeddings failed their "
                "checksum (damaged on disk); dropped and encoded again."
            )
            if self.writable:
                rows = [(key,) for key in bad]
                sql = "DELETE FROM emb WHERE key = ?"
                self._guard("dropping damaged entries", lambda: self._many(sql, rows), None)
        found = {key: vec for key, vec, _ in good}
        missing = [key for key in dict.fromkeys(keys) if key not in found]
        if missing and self.read_from:
            copied = self._read_others(missing)
            self._store(copied)  # verified rows, checksums included: stored as they are
            found |= {key: vec for key, vec, _ in copied}
        return found

    def close(self) -> None:
        """Close the connections; the last one to close this file folds the WAL into it."""
        for db in [self.db, *(self._others or {}).values()]:
            with contextlib.suppress(sqlite3.Error):
                if db is not None:
                    db.close()
        self.db = self._others = None

    def _read_others(self, keys: list[bytes]) -> list[tuple]:
        """The verified rows of ``keys`` in the other jobs' caches, the first listed first."""
        if self._others is None:
            self._others = {}
            for path in self.read_from:
                self._open_other(path)
        found: dict[bytes, tuple] = {}
        for path, db in list(self._others.items()):
            wanted = [key for key in keys if key not in found]
            if not wanted:
                break
            try:
                got, bad = verify_rows(select_rows(db, wanted))
            except (sqlite3.DatabaseError, OSError) as error:
                self._skip_other(path, str(error))
                continue
            found |= {row[0]: row for row in got}
            if bad:  # its verified vectors are still right; the file is not to be trusted further
                self._skip_other(path, f"{len(bad)} cached embeddings failed their checksum")
        return list(found.values())

    def _open_other(self, path: Path) -> None:
        # Told apart at first use, not at start: this job's own folder is created meanwhile.
        path = path / CACHE_FILE if path.is_dir() else path
        if path.resolve() == self.path.resolve() or path in self._others:
            return  # this job's own cache, never read as another's (or listed twice)
        try:
            if not path.is_file():
                raise FileNotFoundError("no such file")
            # immutable: no locks, no -wal/-shm, so a file on a read-only or foreign disk opens
            # too; it does not see later writes, hence only caches whose writer has finished.
            uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
            db = self._others[path] = sqlite3.connect(uri, uri=True)
            if not read_schema(db, path):
                raise Damaged("an empty file, not a neobench embedding cache")
        except (Damaged, NeobenchError, sqlite3.DatabaseError, OSError) as error:
            self._skip_other(path, str(error))

    def _skip_other(self, path: Path, problem: str) -> None:
        """Stop reading another job's cache for this run; it is left as it is."""
        other = (self._others or {}).pop(path, None)
        with contextlib.suppress(sqlite3.Error):
            if other is not None:
                other.close()
        self._warn(
            f"embedding cache {path} (listed in ${READ_ENV}, read-only): {problem}; not read "
            f"again in this run, and left unchanged ({NO_EFFECT})."
        )

    def _store(self, rows: list[tuple[bytes, bytes, bytes]]) -> None:
        if rows and self.db is not None and self.writable:
            self._guard("storing", lambda: self._insert(rows), None)

    def _insert(self, rows: list[tuple[bytes, bytes, bytes]]) -> None:
        now = time.time_ns() // 1_000_000  # ms
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

    def _many(self, sql: str, rows: list[tuple]) -> None:
        with self.db:  # one transaction
            self.db.executemany(sql, rows)

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
        if _code(error) == sqlite3.SQLITE_FULL or getattr(error, "errno", None) == errno.ENOSPC:
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
        full_check = cache_size(self.path) <= QUICK_CHECK_MAX_BYTES
        try:
            return open_db(self.path, full_check)
        except Damaged as damage:
            try:
                aside = move_aside(self.path, damage.tag)
            except OSError as error:
                raise NeobenchError(
                    f"embedding cache {self.path} is {ASIDE_TAGS[damage.tag]} ({damage}) and "
                    f"could not be moved aside ({error}). Fix: neobench cache clear --cache-dir "
                    f"{self.path.parent}"
                ) from None
            self._warn(
                f"embedding cache {self.path} is {ASIDE_TAGS[damage.tag]} ({damage}): moved to "
                f"{aside} (with its -wal/-shm); starting a fresh cache. Delete the old file when "
                "you no longer need it (neobench cache clear does)."
            )
        except sqlite3.DatabaseError as error:
            return self._without_cache(error)
        try:
            return open_db(self.path, full_check=False)
        except (Damaged, sqlite3.DatabaseError) as error:  # another process got there first
            return self._without_cache(error)

    def _without_cache(self, error: Exception) -> None:
        self._warn(
            f"embedding cache {self.path}: {error}; this run continues without the cache "
            f"({NO_EFFECT})."
        )

    def _warn(self, message: str) -> None:
        self.events.append(message)
        logger.warning("%s", message)


# New embeddings stored by a thread of their own: checksums and SQLite writes cost about 37 µs a
# 768-dim vector (149 s of the main thread at 4 million documents, benchmarks/scale_rehearsal.py),
# seconds a GPU would wait; hashing and SQLite release the GIL for the bulk of it. The encoder
# flushes before it returns: a request's vectors are in the cache before the next lookup, and one
# thread at a time uses the connection. An exception in the thread (the cache's own warn and
# degrade) is raised again by the next `submit` or `flush`.
PENDING = 2  # chunks submitted and not yet stored, at most (2 x 8,192 x dim floats)
_STOP = object()


class CacheWriter:
    """One thread storing (keys, vectors) blocks into ``cache`` in submission order, one
    transaction each, with the cache's own `put`."""

    def __init__(self, cache: EmbeddingCache) -> None:
        self.cache = cache
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=PENDING)
        self._error: BaseException | None = None
        context = contextvars.copy_context()  # the stage clock, if one runs
        self._thread = threading.Thread(
            target=context.run, args=(self._run,), name="neobench-cache-writer", daemon=True
        )
        self._thread.start()

    def submit(self, keys: list[bytes], vectors: np.ndarray) -> None:
        """Store ``vectors`` (n, dim, the caller's copy) under ``keys`` in the thread; waits while
        PENDING wait."""
        self._raise()
        with stage("cache insert wait"):
            self._queue.put((keys, vectors))

    def flush(self) -> None:
        """Wait until everything submitted is stored (or failed: raised here)."""
        with stage("cache insert wait"):
            self._queue.join()
        self._raise()

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._queue.put(_STOP)
            self._thread.join()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                if self._error is None:  # after a failure, drain without storing
                    keys, vectors = item
                    with stage("cache insert"):
                        self.cache.put(keys, vectors)
            except BaseException as error:  # raised again in the encoder's thread
                self._error = error
            finally:
                self._queue.task_done()

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise RuntimeError(f"storing embeddings in the cache failed: {error}") from error


# `neobench cache info|clear`.


@dataclass
class CacheReport:
    """What `neobench cache info` shows."""

    path: Path
    state: str = "missing"  # missing | ok | corrupt | outdated | newer
    embeddings: int = 0
    bytes: int = 0  # the file with its -wal/-shm
    held: int = 0  # what the database holds: (page_count - freelist_count) x page_size
    # The last run's policy, cap (max_bytes, "" for none) and when set; {} before a v3 run.
    settings: dict[str, str] = field(default_factory=dict)
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
    """`neobench cache info|clear`: clear first when asked, then the state of the cache, read
    only (creates, moves and repairs nothing), with the full quick_check whatever the size."""
    path = cache_path(cache_dir)
    cleared = clear_cache(path) if action == "clear" else []
    if path.parent.exists() and not path.parent.is_dir():
        raise NeobenchError(
            f"embedding cache folder {path.parent} is a file, not a folder. Pass --cache-dir "
            "with the folder that holds embeddings.sqlite."
        )
    report = CacheReport(path, bytes=cache_size(path), aside=moved_aside(path), cleared=cleared)
    if not path.exists():
        return report
    clear = f"neobench cache clear --cache-dir {path.parent}"
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)) as db:
            if read_schema(db, path):  # else an empty file, which eval fills in
                quick_check(db)
                (report.embeddings,) = db.execute("SELECT COUNT(*) FROM emb").fetchone()
                report.held = used_bytes(db)
                if "meta" in _schema(db)[1]:  # v3
                    report.settings = dict(db.execute("SELECT name, value FROM meta").fetchall())
        report.state = "ok"
    except Damaged as damage:
        report.state = "outdated" if damage.tag == "v1" else "corrupt"
        report.problem, report.fix = str(damage), clear
    except NeobenchError as error:  # a newer schema: not ours to clear
        report.state, report.problem = "newer", error.problems[0]
    except sqlite3.DatabaseError as error:
        report.state, report.problem, report.fix = "corrupt", str(error), clear
    return report


def clear_cache(path: Path) -> list[str]:
    """Delete the cache (with its -wal/-shm) in whatever state and the caches moved aside beside
    it, then start an empty one; returns what was done, one line each. Removing the files rather
    than DELETE + VACUUM works on a damaged file and a full disk, and takes no time on a multi-GB
    cache; a run using the cache meanwhile sees its file replaced and carries on with the new one.
    """
    check_folder(path.parent)
    done = []
    for old in [path, *moved_aside(path)]:
        files = cache_files(old)
        if files:
            size = sum(f.stat().st_size for f in files)
            for file in files:
                file.unlink()
            done.append(f"removed {old} ({size / 1e6:.1f} MB, {len(files)} file(s))")
    EmbeddingCache(path).close()
    done.append(f"started an empty cache at {path}")
    return done
