"""Least recently used out first: the last-use stamps of the cache's rows and the cap on its size.

Each row's ``used`` is the time (ms) it was stored or last read. Keeping it costs writes, so
they are few and in blocks: a row stored gets the time with its insert (same statement); a row
read is stamped again only when its stamp is older than RESTAMP_MS, in one UPDATE per lookup
block, inside the lookup's own short write transaction. A row read over and over during a task
is written at most once a minute, and a lookup that finds only fresh rows writes nothing, so
shards sharing the file (WAL: one writer at a time) rarely wait on each other for stamps.

The cap applies to the bytes the database holds, (page_count - freelist_count) x page_size
(cache_file.used_bytes), not to the file: pages freed by evictions stay in the file and are
reused by the next inserts, so the file settles near the cap (plus the -wal, until a checkpoint).
When a store takes the database over its cap, the rows with the oldest stamps (ties: the oldest
inserted, by rowid) are deleted until it holds at most EVICT_TO of the cap, so an eviction runs
once per tenth of the cap stored, not after every batch. Evicting never changes a score: a text
evicted is encoded again when it is asked for.
"""

from __future__ import annotations

import math
import sqlite3
import time
from datetime import UTC, datetime

from neobench.encoder.cache_file import used_bytes

# A read row is stamped again when its stamp is older than this (tests lower it).
RESTAMP_MS = 60_000
# Evicting down to this fraction of the cap leaves room for about a tenth of it before the next.
EVICT_TO = 0.9
# Rounds of deletes per eviction; the size is read again after each.
MAX_ROUNDS = 64
# Bytes a row takes beyond key, vector and checksum, at least: its used stamp, the record and
# cell headers, and its entries in the key and used indexes.
ROW_OVERHEAD = 64


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def restamp(db: sqlite3.Connection, found: list[tuple[bytes, int]]) -> int:
    """Stamp the (key, used) rows just read whose stamp is stale; returns how many."""
    now = now_ms()
    stale = [(now, key) for key, used in found if used < now - RESTAMP_MS]
    if stale:
        with db:
            db.executemany("UPDATE emb SET used = ? WHERE key = ?", stale)
    return len(stale)


def evict(db: sqlite3.Connection, max_bytes: int) -> int:
    """Delete least recently used rows until the database holds at most EVICT_TO x max_bytes
    when it holds more than max_bytes. Returns the rows deleted."""
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
            gone = db.execute(
                "DELETE FROM emb WHERE rowid IN "
                "(SELECT rowid FROM emb ORDER BY used, rowid LIMIT ?)",
                (count,),
            ).rowcount
        deleted += gone
        held = used_bytes(db)
    return deleted


def write_settings(db: sqlite3.Connection, policy: str, max_bytes: int | None) -> None:
    """The policy and cap of the run now using the cache, for `neobench cache info`."""
    values = {
        "policy": policy,
        "max_bytes": "" if max_bytes is None else str(max_bytes),
        "set_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    with db:
        db.executemany("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", values.items())


def read_settings(db: sqlite3.Connection) -> dict[str, str]:
    """What the last run wrote with `write_settings` ({} before any run)."""
    return dict(db.execute("SELECT name, value FROM meta").fetchall())
