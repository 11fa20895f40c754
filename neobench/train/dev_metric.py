"""The dev metric: MRR@10 (and accuracy@1) of each held-out query's positive among its dev
slice's own texts, macro-averaged over datasets (the definition: docs/recipe.md, "The dev slice",
"The metric"). A tie counts against the model, so a collapsed model scores 0.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from neobench.train.dev_slice import DevSlice

if TYPE_CHECKING:
    from collections.abc import Callable

    import torch

logger = logging.getLogger(__name__)

CUTOFF = 10  # MRR@10
ENCODE_BATCH = 64
QUERY_CHUNK = 1024  # queries scored at once: a (chunk x candidates) score matrix


def dev_scores(
    model: Any,
    slices: dict[str, DevSlice],
    prompts: dict[str, str],
    stopped: Callable[[], bool] = lambda: False,
) -> dict[str, Any]:
    """{"value": macro MRR@10, "per_dataset": {key: {mrr@10, accuracy@1, queries,
    candidates}}}; ``prompts`` maps a dataset key to its query prompt (absent: none). When
    ``stopped()`` turns true the remaining datasets are not scored and the value is None: a
    mean over some datasets would not be comparable with another run's."""
    per_dataset: dict[str, dict[str, Any]] = {}
    for key, dev in slices.items():
        if stopped():
            return {"value": None, "per_dataset": per_dataset}
        if dev.ids:  # a dataset too small to give a query (under ten distinct ones)
            per_dataset[key] = _score_slice(model, dev, prompts.get(key))
    values = [d["mrr@10"] for d in per_dataset.values()]
    value = round(sum(values) / len(values), 6) if values else None
    return {"value": value, "per_dataset": per_dataset}


def _texts(dev: DevSlice) -> tuple[list[str], list[str], list[set[int]]]:
    """(distinct queries, distinct candidates, per query the indices of its positives)."""
    data = dev.dataset
    negative_columns = [c for c in data.column_names if c.startswith("negative_")]
    queries: dict[str, int] = {}
    candidates: dict[str, int] = {}
    relevant: list[set[int]] = []
    for row in data:
        q = queries.setdefault(row["query"], len(queries))
        if q == len(relevant):
            relevant.append(set())
        for text in (row["positive"], *(row[c] for c in negative_columns)):
            candidates.setdefault(text, len(candidates))
        relevant[q].add(candidates[row["positive"]])
    return list(queries), list(candidates), relevant


def _score_slice(model: Any, dev: DevSlice, prompt: str | None) -> dict[str, Any]:
    import torch

    queries, candidates, relevant = _texts(dev)
    q = _encode(model, queries, prompt)  # (queries, dim), unit length
    c = _encode(model, candidates, None)  # (candidates, dim)
    ranks = []
    for start in range(0, len(queries), QUERY_CHUNK):
        chunk = relevant[start : start + QUERY_CHUNK]
        mask = torch.zeros(len(chunk), len(candidates), dtype=torch.bool)
        for i, positives in enumerate(chunk):
            mask[i, list(positives)] = True
        ranks.append(_ranks(q[start : start + QUERY_CHUNK] @ c.T, mask))
    rank = torch.cat(ranks).double()
    reciprocal = torch.where(rank <= CUTOFF, 1.0 / rank, torch.zeros_like(rank))
    return {
        "mrr@10": round(float(reciprocal.mean()), 6),
        "accuracy@1": round(float((rank == 1).double().mean()), 6),
        "queries": len(queries),
        "candidates": len(candidates),
    }


def _ranks(scores: torch.Tensor, relevant: torch.Tensor) -> torch.Tensor:
    """scores, relevant: (queries, candidates) -> (queries,) rank of the best relevant one."""
    best = scores.masked_fill(~relevant, float("-inf")).max(dim=1).values
    return 1 + ((scores >= best[:, None]) & ~relevant).sum(dim=1)


def _encode(model: Any, texts: list[str], prompt: str | None) -> torch.Tensor:
    return (
        model.encode(
            texts,
            prompt=prompt,
            batch_size=ENCODE_BATCH,
            convert_to_tensor=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        .float()
        .cpu()
    )
