"""Embedding cache: keys, inserts and lookups per second, the code before the bulk paths vs now.

N random float32 vectors under N text keys, stored in batches (one transaction each, as the
encoder stores each call's new embeddings), then looked up all found (a warm cache) and half
missing. "before" is the per-row code this module replaced, kept here as the reference: a key
from one joined string, ``tobytes`` + BLAKE2b + a tuple per vector, ``IN`` lists of 500 keys,
one ``np.frombuffer`` per found row, on a file of SQLite's default 4 KiB pages. "now" is
`encoder.cache.EmbeddingCache` (`keys`, `put`/`put_many`, `lookup`/`get_many`). Both store the
same rows, checksums included, and the benchmark checks that both give back the same vectors.

    python benchmarks/cache_throughput.py --n 80000 --dim 384
    python benchmarks/cache_throughput.py --n 40000 --dim 768 --batch 1000
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from neobench.encoder.cache import EmbeddingCache, vector_digest


def old_key(fingerprint: str, prompt: str, text: str) -> bytes:
    return hashlib.sha256("\x00".join((fingerprint, prompt, text)).encode()).digest()


def old_open(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    with db:
        db.execute(
            "CREATE TABLE emb (key BLOB PRIMARY KEY, vec BLOB NOT NULL, digest BLOB NOT NULL)"
        )
        db.execute("PRAGMA user_version = 2")
    return db


def old_put_many(db: sqlite3.Connection, items: list[tuple[bytes, np.ndarray]]) -> None:
    rows = []
    for key, vector in items:
        vec = np.asarray(vector, dtype=np.float32).tobytes()
        rows.append((key, vec, vector_digest(key, vec)))
    with db:
        db.executemany("INSERT OR REPLACE INTO emb (key, vec, digest) VALUES (?, ?, ?)", rows)


def old_get_many(db: sqlite3.Connection, keys: list[bytes]) -> dict[bytes, np.ndarray]:
    rows: list[tuple] = []
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows += db.execute(
            f"SELECT key, vec, digest FROM emb WHERE key IN ({marks})", chunk
        ).fetchall()
    found = {}
    for key, vec, digest in rows:
        if isinstance(vec, bytes) and digest == vector_digest(key, vec):
            found[key] = np.frombuffer(vec, dtype=np.float32)
    return found


def timed(label: str, n: int, work: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    out = work()
    seconds = time.perf_counter() - start
    print(f"  {label:34s} {seconds:7.3f} s  {n / seconds / 1e3:8.1f}k texts/s", flush=True)
    return out, seconds


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=80_000, help="texts (5 MTEB tasks: ~86k)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--batch", type=int, default=4_096, help="texts per stored batch")
    parser.add_argument("--folder", default=None, help="where the files go (default: a temp dir)")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    texts = [f"text {i}: " + "word " * int(rng.integers(5, 80)) for i in range(args.n)]
    vectors = rng.standard_normal((args.n, args.dim)).astype(np.float32)
    n, batches = args.n, range(0, args.n, args.batch)
    with tempfile.TemporaryDirectory(dir=args.folder) as tmp:
        print(f"{n} texts, {args.dim}-dim float32, batches of {args.batch}, in {tmp}")
        print("before")
        keys, _ = timed("keys", n, lambda: [old_key("fp", "query: ", t) for t in texts])
        db = old_open(Path(tmp) / "before.sqlite")
        timed(
            "insert",
            n,
            lambda: [
                old_put_many(
                    db,
                    list(zip(keys[s : s + args.batch], vectors[s : s + args.batch], strict=True)),
                )
                for s in batches
            ],
        )
        half = keys[: n // 2] + [old_key("fp", "other", t) for t in texts[: n // 2]]
        old_all, _ = timed("lookup, all found", n, lambda: old_get_many(db, keys))
        timed("lookup, half missing", n, lambda: old_get_many(db, half))
        db.close()

        print("now")
        new_keys, _ = timed("keys", n, lambda: EmbeddingCache.keys("fp", "query: ", texts))
        cache = EmbeddingCache(Path(tmp) / "now" / "embeddings.sqlite", read_from=[])
        timed(
            "insert (put)",
            n,
            lambda: [
                cache.put(keys[s : s + args.batch], vectors[s : s + args.batch]) for s in batches
            ],
        )
        (block, found), _ = timed("lookup, all found (lookup)", n, lambda: cache.lookup(keys))
        new_all, _ = timed("lookup, all found (get_many)", n, lambda: cache.get_many(keys))
        timed("lookup, half missing (lookup)", n, lambda: cache.lookup(half))
        timed("lookup, half missing (get_many)", n, lambda: cache.get_many(half))
        cache.close()

    same = (
        new_keys == keys
        and bool(found.all())
        and np.array_equal(block, vectors)
        and old_all.keys() == new_all.keys()
        and all(np.array_equal(old_all[k], new_all[k]) for k in keys)
    )
    print("same keys and vectors as before:", same)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
