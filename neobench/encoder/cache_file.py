"""The embedding cache's SQLite file: its schema, opening it (created when new, checked when
not), reading rows by key, and the file with its -wal/-shm on disk (size, identity, moving a
damaged or outdated file aside).

Tables ``emb(key, vec, digest, used)`` (``used``: when the row was last stored or read, in ms,
indexed for least-recently-used eviction, neobench/encoder/cache_lru.py) and ``meta(name,
value)`` (the last run's policy and cap, for `neobench cache info`); the schema version is
SQLite's ``user_version`` (SCHEMA_VERSION). A version 2 file (no ``used``, no ``meta``) is
migrated in place, in one transaction: its checksums cover key and vector only, so they stay
valid. Nothing here warns or degrades: trouble is raised, as Damaged for a file that
is not a healthy cache of this schema, and the store (neobench/encoder/cache.py) decides what a
run does about it.
"""

from __future__ import annotations

import errno
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from neobench.core.errors import NeobenchError
from neobench.encoder.cache_location import LOCATION_FIX

SCHEMA_VERSION = 3  # 1: emb(key, vec) without checksums (neobench 0.1.0); 2: no `used`, no meta
COLUMNS = ["key", "vec", "digest", "used"]
V2_COLUMNS = ["key", "vec", "digest"]
TABLES = ["emb", "meta"]
SIDE_FILES = ("-wal", "-shm")
ASIDE_TAGS = {"corrupt": "damaged", "v1": "outdated"}
# Page size of a new file: 16 KiB pages hold 10 rows of a 384-dim vector (4 KiB pages hold 2,
# leaving a quarter empty; a 1024-dim row would not fit one), and a batch dirties and writes
# 4x fewer pages to the WAL and through checkpoints: inserts 1.2-1.7x faster, lookups within
# noise (benchmarks/cache_throughput.py). A file made with another page size is used as it is.
PAGE_SIZE = 16384
# Keys per SELECT ... IN (...): bounded by the connection's own variable limit (999 before
# SQLite 3.32, 32766 after); larger lists mean fewer statements, and SQLite sorts each list.
SELECT_CHUNK = 16384
# SQLite primary result codes (sqlite3.Error.sqlite_errorcode & 0xFF).
SQLITE_PERM, SQLITE_READONLY, SQLITE_CORRUPT, SQLITE_FULL, SQLITE_CANTOPEN = 3, 8, 11, 13, 14
SQLITE_NOTADB = 26


class Damaged(Exception):
    """The file is not a healthy cache of this schema; ``tag`` names the moved-aside copy."""

    def __init__(self, detail: str, tag: str = "corrupt") -> None:
        super().__init__(detail)
        self.tag = tag


def _code(error: BaseException) -> int:
    return (getattr(error, "sqlite_errorcode", None) or 0) & 0xFF


def is_damage(error: BaseException) -> bool:
    return _code(error) in (SQLITE_CORRUPT, SQLITE_NOTADB)


def is_full(error: BaseException) -> bool:
    return _code(error) == SQLITE_FULL or getattr(error, "errno", None) == errno.ENOSPC


def read_schema(db: sqlite3.Connection, path: Path, migrate: bool = False) -> bool:
    """True for a cache of this schema, False for an empty file; else Damaged or, for a newer
    schema (which a newer neobench still uses), a NeobenchError. A version 2 cache is migrated
    when ``migrate``, and accepted as it is otherwise (read-only readers select key, vec and
    digest only)."""
    version, tables, columns = _schema(db)
    if version > SCHEMA_VERSION:
        raise NeobenchError(
            f"embedding cache {path} has schema version {version}, newer than this neobench's "
            f"({SCHEMA_VERSION}): a newer neobench wrote it. Upgrade neobench, or pass "
            "--cache-dir with another folder, or --no-cache."
        )
    if not tables and version == 0:
        return False
    if tables == TABLES and columns == COLUMNS and version == SCHEMA_VERSION:
        return True
    if tables == ["emb"] and columns == V2_COLUMNS and version == 2:
        if migrate:
            migrate_v2(db)
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
    """What version 3 adds to version 2's table (and what a new file gets after creating it).

    Old rows get ``used`` 0: least recently used of all, the first out under a cap."""
    if "used" not in [row[1] for row in db.execute("PRAGMA table_info(emb)")]:
        db.execute("ALTER TABLE emb ADD COLUMN used INTEGER NOT NULL DEFAULT 0")
    db.execute("CREATE INDEX IF NOT EXISTS emb_used ON emb (used)")
    db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def migrate_v2(db: sqlite3.Connection) -> None:
    """Version 2 -> 3 in one write transaction; another shard that migrated first wins (the
    version is read again under the lock). The index is built by one scan of the table."""
    db.execute("BEGIN IMMEDIATE")
    try:
        if _schema(db)[0] == 2:
            _create_v3(db)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def quick_check(db: sqlite3.Connection) -> None:
    found = [row[0] for row in db.execute("PRAGMA quick_check(3)")]
    if found != ["ok"]:
        # Rows may hold several lines under a "*** in database main ***" heading.
        lines = [line for row in found for line in row.splitlines() if not line.startswith("***")]
        raise Damaged("; ".join(lines[:3]))


def open_db(path: Path, full_check: bool, timeout: float) -> sqlite3.Connection:
    """A connection to a healthy cache at ``path``, created when the file is new or empty;
    ``timeout`` is how long a write waits for another writer's lock.

    Raises Damaged for a damaged or outdated file, NeobenchError where the path cannot be
    opened, and sqlite3.DatabaseError for any other trouble (busy, I/O, disk full).
    """
    try:
        # check_same_thread off: the cache writer (cache_writer.py) stores from its own thread,
        # never while another thread uses the connection.
        db = sqlite3.connect(path, timeout=timeout, check_same_thread=False)
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
    except sqlite3.DatabaseError as error:
        db.close()
        if is_damage(error):
            raise Damaged(str(error)) from None
        if _code(error) in (SQLITE_CANTOPEN, SQLITE_READONLY, SQLITE_PERM):
            raise NeobenchError(
                f"embedding cache {path} cannot be opened ({error}). {LOCATION_FIX}"
            ) from None
        raise
    except BaseException:
        db.close()
        raise


def open_read_only(path: Path) -> sqlite3.Connection:
    """A connection that cannot write ``path`` nor create a -wal/-shm beside it; raises
    Damaged, NeobenchError or sqlite3.DatabaseError for a file that is not a usable cache."""
    # immutable: no locks and no WAL index, so a file on a read-only or foreign disk opens too.
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        if not read_schema(db, path):
            raise Damaged("an empty file, not a neobench embedding cache")
        return db
    except BaseException:
        db.close()
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
    """Bytes the database holds: (page_count - freelist_count) x page_size. The file is at least
    this; pages freed by deletes stay in it (reused by later inserts), and the -wal beside it
    holds recent transactions until a checkpoint folds them in."""
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
