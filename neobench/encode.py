"""The evaluation encoder: length-sorted token-budget batches and a shared embedding cache.

Every text is looked up in the embedding cache (neobench/cache.py) under (model fingerprint,
prompt, text) first; only missing texts are encoded, deduplicated, longest first, in batches
bounded by a token budget rather than a fixed count. Features come from sentence-transformers'
own `preprocess`, called once per chunk of texts (tokenizing each text once, in the tokenizer's
thread pool), and the embedding from the model's own forward, so the numbers are those of
`SentenceTransformer.encode` (tested to 1e-5).
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from neobench.cache import EmbeddingCache
from neobench.config import DTYPE_ALIASES, default_token_budget
from neobench.stages import stage
from neobench.unpad import unpadded

logger = logging.getLogger(__name__)

MAX_BATCH = 512
# Texts tokenized in one call (and sorted by length together): large enough for the tokenizer's
# own thread pool and for near-global length sorting, small enough for host memory at 8k tokens.
TOKENIZE_CHUNK = 8_192


DTYPES = {"float32": None, "float16": torch.float16, "bfloat16": torch.bfloat16}


def resolve_dtype(name: str, device: str) -> str:
    """``auto``: float16 autocast on CUDA (what stock tools use there), float32 elsewhere."""
    name = DTYPE_ALIASES.get(name, name)
    if name == "auto":
        return "float16" if device.startswith("cuda") else "float32"
    return name


def auto_unpadded(mode: str, dtype: str) -> str:
    """``auto`` packs on CUDA in half precision only: the fused varlen kernels take fp16/bf16,
    and in float32 the per-sequence reference would be slower than padded SDPA."""
    return "off" if mode == "auto" and dtype == "float32" else mode


def token_budget_batches(
    lengths: list[int], budget: int, max_batch: int = MAX_BATCH
) -> list[list[int]]:
    """Indices grouped longest first so that (longest in batch) x (batch size) <= budget."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        longest = lengths[current[0]] if current else lengths[index]
        if current and (longest * (len(current) + 1) > budget or len(current) >= max_batch):
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


class FastEncoder:
    """Encodes texts for one model: cache first, then sorted token-budget batches."""

    def __init__(
        self,
        model: object,
        fingerprint: str,
        cache: EmbeddingCache | None,
        autocast: bool | torch.dtype = False,
        token_budget: int | None = None,
        packed: bool = False,
    ) -> None:
        self.model = model
        self.fingerprint = fingerprint
        self.cache = cache
        # True means float16 (the CUDA default); a dtype picks it (torch.bfloat16).
        self.autocast_dtype = torch.float16 if autocast is True else autocast or None
        # Padded tokens per forward batch; left out, the default of the model's device.
        self.token_budget = token_budget or default_token_budget(str(model.device))
        self.packed = packed  # real tokens only, variable-length attention (unpad.py)
        self.texts_encoded = 0  # texts that went through the network (not served by the cache)
        self.texts_requested = 0
        self.tokens_encoded = 0  # real (unpadded) tokens of the encoded texts
        self.forward_calls = 0

    def embed(self, texts: list[str], prompt: str | None) -> np.ndarray:
        with stage("batching"):  # what no finer stage below claims
            return self._embed(texts, prompt)

    def _embed(self, texts: list[str], prompt: str | None) -> np.ndarray:
        prompt = prompt or ""
        self.texts_requested += len(texts)
        with stage("cache keys"):
            keys = [EmbeddingCache.key(self.fingerprint, prompt, t) for t in texts]
        with stage("cache lookup"):
            known = self.cache.get_many(list(dict.fromkeys(keys))) if self.cache else {}
        with stage("dedup"):
            todo: dict[bytes, str] = {}
            for key, text in zip(keys, texts, strict=True):
                if key not in known and key not in todo:
                    todo[key] = text
        if todo:
            vectors = self._encode(list(todo.values()), prompt)
            fresh = dict(zip(todo, vectors, strict=True))
            if self.cache:
                with stage("cache insert"):
                    self.cache.put_many(fresh.items())
            known.update(fresh)
        with stage("assemble"):
            return np.stack([known[k] for k in keys]) if keys else np.zeros((0, 0), np.float32)

    def _encode(self, texts: list[str], prompt: str) -> list[np.ndarray]:
        model = self.model
        model.eval()
        out: list[np.ndarray] = []
        with unpadded(model, self.packed):
            # Padded features of a chunk take (texts x max length) ids: bound that for 8k models.
            step = max(64, min(TOKENIZE_CHUNK, 4_194_304 // max(1, int(model.max_seq_length))))
            for start in range(0, len(texts), step):
                out.extend(self._encode_chunk(texts[start : start + step], prompt))
        return out

    def _encode_chunk(self, texts: list[str], prompt: str) -> list[np.ndarray]:
        """One tokenizer call for the chunk (sentence-transformers' own preprocess, so the
        features are exactly those of ``encode``), then length-sorted batches cut from it."""
        model = self.model
        device = model.device
        with stage("tokenize"):
            features = model.preprocess(texts, prompt=prompt or None)
        mask = features["attention_mask"]
        lengths = mask.sum(dim=1).tolist()
        self.tokens_encoded += sum(lengths)
        # Cutting a batch to its longest row needs right padding (every encoder tokenizer here).
        right_padded = bool((mask[:, 1:] <= mask[:, :-1]).all())
        dtype = self.autocast_dtype
        done: list[tuple[list[int], torch.Tensor]] = []
        for batch in token_budget_batches(lengths, self.token_budget):
            if right_padded:
                batch_features = _rows(features, batch, max(lengths[i] for i in batch))
            else:
                batch_features = model.preprocess([texts[i] for i in batch], prompt=prompt or None)
            with stage("copy to device"):
                batch_features = {k: _to_device(v, device) for k, v in batch_features.items()}
            with (
                stage("forward"),
                torch.inference_mode(),
                torch.autocast(device.type, dtype or torch.float32, enabled=dtype is not None),
            ):
                embeddings = model(batch_features)["sentence_embedding"]
            # Kept on the device until the chunk is done: no host sync per batch, so the host
            # prepares the next batch while the device computes.
            done.append((batch, embeddings.float()))
            self.forward_calls += 1
            self.texts_encoded += len(batch)
        with stage("copy to host"):
            vectors: list[np.ndarray | None] = [None] * len(texts)
            for batch, embeddings in done:
                for i, vector in zip(batch, embeddings.cpu().numpy(), strict=True):
                    vectors[i] = vector
        return vectors  # type: ignore[return-value]


def _rows(features: dict, rows: list[int], length: int) -> dict:
    """The features of ``rows``, cut to ``length`` tokens; per-chunk values pass through."""
    n = features["input_ids"].shape[0]
    index = torch.as_tensor(rows)
    picked = {}
    for key, value in features.items():
        if isinstance(value, torch.Tensor) and value.ndim >= 1 and value.shape[0] == n:
            value = value[index]
            if value.ndim == 2:
                value = value[:, :length]
        picked[key] = value
    return picked


def _to_device(value: object, device: torch.device) -> object:
    if not isinstance(value, torch.Tensor):
        return value
    if device.type == "cuda":
        # Pinned host memory makes the copy asynchronous with respect to the host.
        return value.pin_memory().to(device, non_blocking=True)
    return value.to(device)
