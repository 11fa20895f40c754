"""Measured contamination: which evaluation texts occur in a manifest's training data, exactly
after normalisation or as near-duplicates (docs/guide.md, "Measured contamination").

Texts are compared normalised: lower case, only letters and digits kept (so case, whitespace and
punctuation do not count). A near-duplicate is a training text whose set of character 5-grams
(of the normalised text) has a Jaccard similarity of at least NEAR with the evaluation text's,
found by MinHash (PERMUTATIONS hashes, BANDS bands) and then checked exactly. The training side
is what a fine-tune on the manifest trains on: each row built as `neobench finetune` builds it
(filters applied), its query, positive and negatives. Measurements are cached per manifest (its
sha256) and task under <neobench home>/overlap.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neobench.core.card_io import write_text_atomic
from neobench.core.home import neobench_home

FORMAT = 1
NEAR = 0.8  # Jaccard of character 5-grams: a near-duplicate
SHINGLE = 5
PERMUTATIONS = 64
BANDS = 16  # of PERMUTATIONS / BANDS rows each: candidates at Jaccard ~0.5 and above
_PRIME = (1 << 31) - 1
_RNG = np.random.default_rng(20261203)
_A = _RNG.integers(1, _PRIME, PERMUTATIONS, dtype=np.uint64)
_B = _RNG.integers(0, _PRIME, PERMUTATIONS, dtype=np.uint64)


def normalize(text: str) -> str:
    """The text as compared: lower case, letters and digits only."""
    return "".join(c for c in str(text).lower() if c.isalnum())


def shingles(normalized: str) -> np.ndarray:
    """The sorted distinct crc32 hashes of the text's character 5-grams (the whole text when
    shorter)."""
    grams = {normalized[i : i + SHINGLE] for i in range(max(1, len(normalized) - SHINGLE + 1))}
    return np.unique(np.fromiter((zlib.crc32(g.encode()) for g in grams), dtype=np.uint64))


def signature(hashes: np.ndarray) -> np.ndarray:
    """The MinHash signature of a shingle set: per permutation, its smallest hash."""
    return ((_A[:, None] * hashes[None, :] + _B[:, None]) % _PRIME).min(axis=1)


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    shared = np.intersect1d(a, b, assume_unique=True).size
    return shared / (a.size + b.size - shared)


class TrainingTexts:
    """A manifest's training texts, normalised, with the pairs its rows train on and a MinHash
    index for near-duplicates."""

    def __init__(self, pairs: Iterable[tuple[str, ...]]) -> None:
        self.texts: set[str] = set()
        self.pairs: set[frozenset[str]] = set()
        for row in pairs:
            kept = [normalize(t) for t in row if t]
            self.texts.update(k for k in kept if k)
            self.pairs.update(frozenset((kept[0], other)) for other in kept[1:])
        self.texts.discard("")
        self._shingles = {text: shingles(text) for text in self.texts}
        self._bands: dict[tuple[int, bytes], list[str]] = defaultdict(list)
        for text, hashes in self._shingles.items():
            for key in _band_keys(signature(hashes)):
                self._bands[key].append(text)

    def __len__(self) -> int:
        return len(self.texts)

    def exact(self, text: str) -> bool:
        return normalize(text) in self.texts

    def near(self, text: str) -> bool:
        """An exact match, or a training text of Jaccard >= NEAR on character 5-grams."""
        found = normalize(text)
        if not found or found in self.texts:
            return bool(found)
        hashes = shingles(found)
        candidates = {t for key in _band_keys(signature(hashes)) for t in self._bands.get(key, [])}
        return any(jaccard(hashes, self._shingles[t]) >= NEAR for t in candidates)

    def pair(self, a: str, b: str) -> bool:
        """Whether the two texts are, in either order, a pair a training row trains on."""
        return frozenset((normalize(a), normalize(b))) in self.pairs


def _band_keys(sig: np.ndarray) -> list[tuple[int, bytes]]:
    rows = PERMUTATIONS // BANDS
    return [(b, sig[b * rows : (b + 1) * rows].tobytes()) for b in range(BANDS)]


@dataclass
class TaskOverlap:
    """One evaluation task against one manifest's training data."""

    task: str
    type: str
    unit: str  # what a unit is: pair, item, query
    units: int
    texts: int  # distinct normalised test texts (queries, documents, sentences, items)
    exact_texts: int
    near_texts: int
    exact_units: int  # units that occur in training (a pair as a training pair; a text as is)
    near_units: int  # units whose every text is a near-duplicate of a training text
    # "subset/split" -> the ids of the units that occur in training (exact), as in units files
    contaminated: dict[str, list[str]] = field(default_factory=dict)

    def share(self, count: int, total: int) -> float:
        return count / total if total else 0.0

    @property
    def summary(self) -> dict[str, Any]:
        """What a run card keeps: the shares, not the ids."""
        return {
            "units": self.units,
            "exact_units": self.share(self.exact_units, self.units),
            "near_units": self.share(self.near_units, self.units),
            "exact_texts": self.share(self.exact_texts, self.texts),
            "near_texts": self.share(self.near_texts, self.texts),
        }


def manifest_digest(path: str | Path, data_dir: str | Path | None) -> str:
    """The manifest file's sha256 and the data it reads: what a measurement is cached under."""
    found = hashlib.sha256(Path(path).read_bytes())
    found.update(str(Path(data_dir).resolve() if data_dir else "hub").encode())
    return found.hexdigest()


def cache_path(digest: str, task: str) -> Path:
    return neobench_home() / "overlap" / digest[:16] / f"{task}.json"


def read_cached(digest: str, task: str) -> TaskOverlap | None:
    try:
        data = json.loads(cache_path(digest, task).read_text())
    except (OSError, ValueError):
        return None
    if data.pop("format", None) != FORMAT:
        return None
    try:
        return TaskOverlap(**data)
    except TypeError:
        return None


def write_cached(digest: str, found: TaskOverlap) -> None:
    body = {"format": FORMAT, **asdict(found)}
    write_text_atomic(cache_path(digest, found.task), json.dumps(body) + "\n")


def cached_summaries(digest: str) -> dict[str, dict[str, Any]]:
    """Every task measured against this manifest so far: task -> its shares."""
    folder = neobench_home() / "overlap" / digest[:16]
    found = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        measured = read_cached(digest, path.stem)
        if measured is not None:
            found[measured.task] = measured.summary
    return found
