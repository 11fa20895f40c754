"""The cache's bulk paths (`keys`, `put`, `lookup`, and `get_many`/`put_many` built on them) store
and return exactly what the per-row code did: the same keys for real texts, the same rows on disk,
the same vectors back, and every damage still caught. The texts are STSBenchmark's test sentences
from the mirror; the per-row reference is the code the bulk paths replaced."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from neobench.encoder import cache as cache_module
from neobench.encoder.cache import CACHE_FILE, EmbeddingCache, vector_digest

STS_TEST = Path("mteb/stsbenchmark-sts/data/test-00000-of-00001.parquet")
FINGERPRINT = "sentence-transformers/all-MiniLM-L6-v2@abc123"


@pytest.fixture(scope="module")
def texts(mirror) -> list[str]:
    frame = pd.read_parquet(mirror / STS_TEST)
    return list(dict.fromkeys([*frame["sentence1"], *frame["sentence2"]]))  # 2,7xx distinct


def per_row_key(fingerprint: str, prompt: str, text: str) -> bytes:
    return hashlib.sha256("\x00".join((fingerprint, prompt, text)).encode()).digest()


def per_row_rows(keys: list[bytes], vectors: np.ndarray) -> list[tuple[bytes, bytes, bytes]]:
    """The rows the per-row put_many stored: tobytes and the checksum of each vector."""
    rows = []
    for key, vector in zip(keys, vectors, strict=True):
        vec = np.asarray(vector, dtype=np.float32).tobytes()
        rows.append((key, vec, vector_digest(key, vec)))
    return rows


def stored(path: Path) -> list[tuple[bytes, bytes, bytes]]:
    db = sqlite3.connect(path)
    rows = db.execute("SELECT key, vec, digest FROM emb ORDER BY key").fetchall()
    db.close()
    return rows


def vectors_for(n: int, dim: int = 384, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def test_bulk_keys_are_the_per_text_keys(texts):
    assert any(not t.isascii() for t in texts)  # accents and symbols: UTF-8 of several bytes
    for prompt in ("", "query: ", "Retrieve semantically similar text: "):
        expected = [per_row_key(FINGERPRINT, prompt, t) for t in texts]
        assert EmbeddingCache.keys(FINGERPRINT, prompt, texts) == expected


def test_bulk_rows_on_disk_are_the_per_row_rows(texts, tmp_path):
    keys = EmbeddingCache.keys(FINGERPRINT, "", texts)
    vectors = vectors_for(len(keys))
    cache = EmbeddingCache(tmp_path / "a" / CACHE_FILE, read_from=[])
    cache.put(keys[:1000], vectors[:1000])
    cache.put_many(zip(keys[1000:], vectors[1000:], strict=True))  # per-vector arrays
    assert cache.stored == len(keys)
    cache.close()
    assert stored(tmp_path / "a" / CACHE_FILE) == sorted(per_row_rows(keys, vectors))


def test_lookup_and_get_many_give_back_the_stored_vectors(texts, tmp_path):
    keys = EmbeddingCache.keys(FINGERPRINT, "", texts)
    vectors = vectors_for(len(keys))
    cache = EmbeddingCache(tmp_path / CACHE_FILE, read_from=[])
    cache.put(keys[::2], vectors[::2])  # every other text stored

    # In the encoder's order, with repeats and texts never stored.
    asked = keys[:50] + keys[:10] + EmbeddingCache.keys(FINGERPRINT, "other prompt", texts[:5])
    block, found = cache.lookup(asked)
    assert block.shape == (len(asked), 384) and block.dtype == np.float32
    assert block.flags.writeable and block.flags.c_contiguous
    expected_found = [i % 2 == 0 for i in range(50)] + [i % 2 == 0 for i in range(10)] + [False] * 5
    assert found.tolist() == expected_found
    for row, key, hit in zip(block, asked, found, strict=True):
        i = keys.index(key) if key in keys else None
        assert np.array_equal(row, vectors[i] if hit else np.zeros(384, np.float32))

    got = cache.get_many(asked)
    assert set(got) == {k for k, hit in zip(asked, found, strict=True) if hit}
    for key, vector in got.items():
        assert np.array_equal(vector, vectors[keys.index(key)]) and vector.dtype == np.float32

    none, missing = cache.lookup(EmbeddingCache.keys(FINGERPRINT, "never", texts[:3]))
    assert none.shape == (3, 0) and not missing.any()
    assert cache.get_many([]) == {} and cache.lookup([])[0].shape == (0, 0)
    cache.close()


def test_a_file_of_the_per_row_code_is_read_and_extended(texts, tmp_path):
    """A cache written before (schema 2, 4 KiB pages, per-row rows) keeps serving its vectors,
    migrated in place; new files get 16 KiB pages, old ones keep theirs."""
    path = tmp_path / CACHE_FILE
    keys = EmbeddingCache.keys(FINGERPRINT, "", texts)
    vectors = vectors_for(len(keys))
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    with db:
        db.execute(
            "CREATE TABLE emb (key BLOB PRIMARY KEY, vec BLOB NOT NULL, digest BLOB NOT NULL)"
        )
        db.execute("PRAGMA user_version = 2")  # what the per-row code wrote
        db.executemany("INSERT INTO emb VALUES (?, ?, ?)", per_row_rows(keys[:500], vectors[:500]))
    db.close()

    cache = EmbeddingCache(path, read_from=[])
    block, found = cache.lookup(keys[:600])
    assert found.tolist() == [True] * 500 + [False] * 100 and cache.bad_entries == 0
    assert np.array_equal(block[:500], vectors[:500])
    cache.put(keys[500:600], vectors[500:600])
    assert cache.db.execute("PRAGMA page_size").fetchone() == (4096,)
    cache.close()
    assert stored(path) == sorted(per_row_rows(keys[:600], vectors[:600]))

    fresh = EmbeddingCache(tmp_path / "new" / CACHE_FILE, read_from=[])
    assert fresh.db.execute("PRAGMA page_size").fetchone() == (cache_module.PAGE_SIZE,)
    fresh.close()


def test_every_damage_is_caught_by_the_bulk_lookup(texts, tmp_path, caplog):
    keys = EmbeddingCache.keys(FINGERPRINT, "", texts[:8])
    vectors = vectors_for(8)
    path = tmp_path / CACHE_FILE
    cache = EmbeddingCache(path, read_from=[])
    cache.put(keys, vectors)
    db = sqlite3.connect(path)
    (vec0,) = db.execute("SELECT vec FROM emb WHERE key = ?", (keys[0],)).fetchone()
    flipped = bytearray(vec0)
    flipped[100] ^= 0x01  # one bit
    rows = {k: (v, d) for k, v, d in db.execute("SELECT key, vec, digest FROM emb")}
    with db:
        db.execute("UPDATE emb SET vec = ? WHERE key = ?", (bytes(flipped), keys[0]))
        db.execute("UPDATE emb SET vec = substr(vec, 1, 1000) WHERE key = ?", (keys[1],))
        # Another text's vector with its own checksum, under this key.
        db.execute("UPDATE emb SET vec = ?, digest = ? WHERE key = ?", (*rows[keys[3]], keys[2]))
    db.close()

    block, found = cache.lookup(keys)
    assert found.tolist() == [False, False, False, True, True, True, True, True]
    assert cache.bad_entries == 3 and "3 cached embeddings failed their checksum" in caplog.text
    assert np.array_equal(block[3:], vectors[3:]) and not block[:3].any()
    assert cache.get_many(keys[:3]) == {}  # dropped from the file
    cache.close()


def test_a_vector_of_another_length_counts_as_missing(texts, tmp_path):
    keys = EmbeddingCache.keys(FINGERPRINT, "", texts[:4])
    cache = EmbeddingCache(tmp_path / CACHE_FILE, read_from=[])
    cache.put_many([(keys[0], np.ones(8)), (keys[1], np.ones(8)), (keys[2], np.full(4, 2.0))])
    block, found = cache.lookup(keys)
    assert block.shape == (4, 8) and found.tolist() == [True, True, False, False]
    got = cache.get_many(keys)  # the dict form holds each vector as it is
    assert [len(got[k]) for k in keys[:3]] == [8, 8, 4] and np.array_equal(got[keys[2]], [2] * 4)
    cache.close()


def test_rows_found_in_another_jobs_cache_are_copied_as_they_are(texts, tmp_path):
    keys = EmbeddingCache.keys(FINGERPRINT, "", texts[:300])
    vectors = vectors_for(300)
    job_a = EmbeddingCache(tmp_path / "a" / CACHE_FILE, read_from=[])
    job_a.put(keys[:200], vectors[:200])
    job_a.close()
    job_b = EmbeddingCache(tmp_path / "b" / CACHE_FILE, read_from=[tmp_path / "a"])
    job_b.put(keys[100:300], vectors[100:300])
    block, found = job_b.lookup(keys)
    assert found.all() and np.array_equal(block, vectors)
    assert job_b.stored == 300  # its own 200, and the 100 it found only in job A's
    job_b.close()
    assert stored(tmp_path / "b" / CACHE_FILE) == sorted(per_row_rows(keys, vectors))
