"""The texts mteb's data loaders would yield, read column-wise: the "mteb-texts" patch
(docs/performance.md, "Library patches"; the adapter takes mteb's loaders when the gate is off).

The functions return the same texts, in the same order, from one column read
(``dataset["text"][:]``), or None (the caller then takes mteb's path) outside the plain case:
other modalities, conversations, instructions, extra columns, a formatted or transformed dataset,
a null anywhere (mteb's collate raises on None), a sampler or collate other than mteb's own.
"""

from __future__ import annotations

from typing import Any

from datasets import Dataset, Value

# Arrow string types a text column can have; ids and titles are strings in mteb's formats.
STRING_TYPES = {"string", "large_string"}
# default_collate turns these Values into a tensor (numbers) or a list (strings); anything else
# (dates, nested lists of varying length...) could make mteb's collate raise.
INTEGER_TYPES = {f"{sign}int{bits}" for sign in ("", "u") for bits in (8, 16, 32, 64)}
COLLATABLE_TYPES = STRING_TYPES | INTEGER_TYPES | {"bool", "float16", "float32", "float64"}


def _plain(dataset: Any, allowed: set[str]) -> bool:
    """A datasets.Dataset with python formatting, every column a Value of an allowed type and
    no null anywhere (null counts of the underlying table: an upper bound under an indices
    mapping, so a null outside the selection only costs the fast path)."""
    if not isinstance(dataset, Dataset) or len(dataset) == 0:
        return False
    # python formatting of every column (datasets may list them in another order after a map)
    columns = set(dataset.format["columns"])
    if dataset.format["type"] is not None or columns != set(dataset.column_names):
        return False
    features = dataset.features
    if not all(isinstance(f, Value) and f.dtype in allowed for f in features.values()):
        return False
    table = dataset.data
    return all(table.column(name).null_count == 0 for name in features)


def document_texts(corpus: Any, modalities: list[str]) -> list[str] | None:
    """mteb's document texts: ``(title + " " + text).strip()`` when the title is not empty,
    else ``text.strip()`` (mteb._create_dataloaders._corpus_to_dict). None outside the plain
    case: a text-only task, columns id/title/text, strings, no null."""
    if modalities != ["text"] or not _plain(corpus, STRING_TYPES):
        return None
    if "text" not in corpus.column_names or not set(corpus.column_names) <= {"id", "title", "text"}:
        return None
    texts = corpus["text"][:]
    if "title" not in corpus.column_names:
        return [text.strip() for text in texts]
    titles = corpus["title"][:]
    return [
        (title + " " + text).strip() if len(title) > 0 else text.strip()
        for title, text in zip(titles, texts, strict=True)
    ]


def query_texts(queries: Any, modalities: list[str]) -> list[str] | None:
    """mteb's query texts: the text column as it is, when there is no instruction to append
    and no conversation to flatten (mteb._create_dataloaders._prepare_dataset). None outside
    the plain case: a text-only task, columns id/text, strings, no null."""
    if modalities != ["text"] or not _plain(queries, STRING_TYPES):
        return None
    if "text" not in queries.column_names or not set(queries.column_names) <= {"id", "text"}:
        return None
    return queries["text"][:]


def loader_texts(loader: Any) -> list[str] | None:
    """Every ``batch["text"]`` of iterating ``loader``, concatenated, read from its dataset's
    column at once; None unless the loader is mteb's plain sequential case (its own collate or
    torch's default, a SequentialSampler, batches without drop_last, plain columns)."""
    from mteb._create_dataloaders import _custom_collate_fn
    from torch.utils.data import BatchSampler, SequentialSampler, default_collate

    if loader.collate_fn not in (default_collate, _custom_collate_fn):
        return None
    if type(loader.sampler) is not SequentialSampler:
        return None
    batches = loader.batch_sampler
    if (
        type(batches) is not BatchSampler
        or batches.drop_last
        or batches.sampler is not loader.sampler
    ):
        return None
    dataset = loader.dataset
    if not _plain(dataset, COLLATABLE_TYPES) or "text" not in dataset.column_names:
        return None
    if dataset.features["text"].dtype not in STRING_TYPES:
        return None
    return dataset["text"][:]
