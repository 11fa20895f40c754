"""Retrieval scoring as blocked matrix products with a running top-k, on the model's device,
instead of mteb's per-candidate heap pushes: docs/performance.md, "Retrieval without the heap
merge". Scores are mteb's (its similarity, float32, TF32 off); lists differ only in tied order.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator

import torch

logger = logging.getLogger(__name__)

Similarity = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

# Sizes of the blocks scored at once: (queries x documents) float32 scores, 256 MiB at the
# defaults, small enough for any GPU and for a CPU's caches to matter less than the matmul.
QUERY_BLOCK = 1_024
DOC_BLOCK = 65_536


@contextlib.contextmanager
def exact_float32() -> Iterator[None]:
    """Full float32 matmuls for the duration (TF32 would move scores in the 4th decimal)."""
    if not torch.cuda.is_available():
        yield
        return
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous


class RunningTopK:
    """The best ``k`` documents of every query, updated one corpus block at a time; each block
    is copied to the device once and scored against every query block."""

    def __init__(
        self,
        queries: torch.Tensor,
        k: int,
        similarity: Similarity,
        device: torch.device | str = "cpu",
        query_block: int = QUERY_BLOCK,
        doc_block: int = DOC_BLOCK,
    ) -> None:
        self.device = torch.device(device)
        self.queries = torch.as_tensor(queries).to(self.device, dtype=torch.float32)
        self.k = k
        self.similarity = similarity
        self.query_block = query_block
        self.doc_block = doc_block
        self.seen = 0  # documents added so far; the next block's indices start here
        n_blocks = -(-self.queries.shape[0] // query_block)
        self._values: list[torch.Tensor | None] = [None] * n_blocks
        self._indices: list[torch.Tensor | None] = [None] * n_blocks

    def add(self, docs: torch.Tensor) -> None:
        """Score a block of document embeddings (the next ``len(docs)`` corpus positions)."""
        docs = torch.as_tensor(docs)
        cuda = self.device.type == "cuda"
        with torch.inference_mode(), exact_float32():
            for d_start in range(0, docs.shape[0], self.doc_block):
                block = docs[d_start : d_start + self.doc_block]
                if cuda:  # pinned host memory: the copy does not stall the host
                    block = block.pin_memory()
                d = block.to(self.device, dtype=torch.float32, non_blocking=cuda)
                offset = self.seen + d_start
                for b, q_start in enumerate(range(0, self.queries.shape[0], self.query_block)):
                    q = self.queries[q_start : q_start + self.query_block]
                    scores = self.similarity(q, d)
                    values, indices = scores.topk(min(self.k, scores.shape[1]), dim=1)
                    indices += offset
                    if self._values[b] is not None:
                        values = torch.cat([self._values[b], values], dim=1)
                        indices = torch.cat([self._indices[b], indices], dim=1)
                        values, order = values.topk(min(self.k, values.shape[1]), dim=1)
                        indices = indices.gather(1, order)
                    self._values[b], self._indices[b] = values, indices
        self.seen += docs.shape[0]

    def result(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(scores, document indices), both (queries, min(k, documents)), best first, on the CPU."""
        n = self.queries.shape[0]
        if n == 0 or self.seen == 0 or self.k == 0:
            empty = torch.zeros((n, 0))
            return empty, empty.long()
        return (
            torch.cat([v.cpu() for v in self._values]),  # type: ignore[union-attr]
            torch.cat([i.cpu() for i in self._indices]),  # type: ignore[union-attr]
        )


def top_k(
    queries: torch.Tensor,
    docs: torch.Tensor,
    k: int,
    similarity: Similarity,
    device: torch.device | str = "cpu",
    query_block: int = QUERY_BLOCK,
    doc_block: int = DOC_BLOCK,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` best of ``docs`` for every query: (scores, indices), best first, on the CPU."""
    search = RunningTopK(queries, k, similarity, device, query_block, doc_block)
    search.add(docs)
    return search.result()
