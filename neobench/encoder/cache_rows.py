"""What one row of the embedding cache holds, and how rows meet numpy blocks.

A row is ``(key, vec, digest)``: the key names (model fingerprint, prompt, text), the vector is
float32 bytes, and the digest is a checksum over both, so a vector damaged on disk or stored
under another text's key is caught on read. Blocks of rows go to and from one (n, dim) float32
matrix without a numpy call per vector.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable

import numpy as np


def text_key(fingerprint: str, prompt: str, text: str) -> bytes:
    """SHA-256 of fingerprint, prompt and text joined by NUL characters: one text's key."""
    return hashlib.sha256("\x00".join((fingerprint, prompt, text)).encode()).digest()


def text_keys(fingerprint: str, prompt: str, texts: Iterable[str]) -> list[bytes]:
    """`text_key` of each text, in order: the hash state of fingerprint NUL prompt NUL, copied and
    fed each text (UTF-8 encodes a concatenation as the concatenation of the parts'
    encodings, so the keys are `text_key`'s), ~0.55 instead of ~0.8 µs a text."""
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
    """(key, vec, digest) rows of a (n, dim) block: one float32 copy of the whole block, and
    each row's bytes cut from it (what ``tobytes`` of each vector gives, without a numpy call
    per vector)."""
    block = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(keys), -1)
    n, dim = block.shape
    whole, step = block.tobytes(), 4 * dim
    blobs = [whole[i : i + step] for i in range(0, n * step, step)]
    return [(key, vec, vector_digest(key, vec)) for key, vec in zip(keys, blobs, strict=True)]


def blobs_block(blobs: list[bytes], n: int, places: Iterable[int] | None = None) -> np.ndarray:
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


def verify_rows(rows: list[tuple]) -> tuple[list[tuple], list[bytes]]:
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
