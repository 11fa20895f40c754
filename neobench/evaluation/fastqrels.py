"""A retrieval task's relevance judgements read column-wise, while mteb evaluates.

mteb (2.26) ``RetrievalDatasetLoader._load_qrels`` loads the qrels split, casts its three columns
(ids to strings, scores to int32), converts it to polars and builds ``{query: {document:
score}}`` from ``group_by("query-id")``: one DataFrame made and sliced per query, about 0.15 ms
each. That was 0.26 of the 0.40 s SciFact and ArguAna spend loading data, and it is about a second
per load of a 7,000-query set such as MSMARCO's dev split: time in which a GPU waits.

``fast_qrels()`` replaces that method, for the duration of the block, by one that loads and casts
the same split the same way and then reads the three columns once each (datasets' own batch
formatting) and fills the dict in one pass. Same queries, documents and scores; a document
judged twice keeps its last score, as ``dict(zip(...))`` did. The queries come in the order of
their first row; mteb's ``group_by(maintain_order=False)`` defines no order, and what reads the
dict looks queries up by id (the scores are per-query means).
"""

from __future__ import annotations

import contextlib
from typing import Any

from datasets import Features, Value
from mteb.abstasks.retrieval_dataset_loaders import RetrievalDatasetLoader

from neobench.evaluation.patches import NestedPatch

COLUMNS = ("query-id", "corpus-id", "score")
FEATURES = Features(
    {"query-id": Value("string"), "corpus-id": Value("string"), "score": Value("int32")}
)


def qrels_config(loader: Any) -> str:
    """The qrels subset mteb reads: ``<config>-qrels``, else ``default``, else ``qrels``."""
    config = f"{loader.config}-qrels" if loader.config is not None else "default"
    if config == "default" and config not in loader.dataset_configs:
        if "qrels" not in loader.dataset_configs:
            raise ValueError(
                "No qrels or default config found. Please specify a valid config or ensure "
                "the dataset has qrels."
            )
        config = "qrels"
    return config


def load_qrels(loader: Any, num_proc: int | None) -> dict[str, dict[str, int]]:
    """``{query id: {document id: score}}`` of the loader's split (see the module doc)."""
    split = loader._load_dataset_split(qrels_config(loader), num_proc)
    split = split.select_columns(list(COLUMNS)).cast(FEATURES)
    queries, documents, scores = (split[name][:] for name in COLUMNS)
    qrels: dict[str, dict[str, int]] = {}
    for query, document, score in zip(queries, documents, scores, strict=True):
        judged = qrels.get(query)
        if judged is None:
            judged = qrels[query] = {}
        judged[document] = score
    return qrels


_QRELS = NestedPatch((RetrievalDatasetLoader, "_load_qrels", load_qrels))


def fast_qrels() -> contextlib.AbstractContextManager[None]:
    """mteb's qrels loader replaced by `load_qrels` while the block runs (nestable)."""
    return _QRELS.active()
