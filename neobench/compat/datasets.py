"""neobench's uses of datasets' private names: the "column-cache" patch (compat/patches.py) and
a dataset's fingerprint. What the patch replaces and saves: docs/performance.md, "Library
patches".

"column-cache": a datasets 5 ``Column`` in the plain case converts its whole column once, on first
element access or iteration, with datasets' own batch formatting (``column[:]``: the same
formatter and feature decoding as a row), and keeps the list, tied to the dataset's fingerprint
(renewed on every change). Anything else (a nested Column, a formatted or transformed dataset, a
feature that needs decoding, a non-int key, a column too large to hold twice) takes datasets' path.
The class is patched (not instances), so mteb's internal datasets are covered too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from datasets import Dataset
from datasets.arrow_dataset import Column
from datasets.features.features import require_decoding

# Cached: up to MAX_CACHED_ROWS, or longer up to MAX_CACHED_BYTES of Arrow data: a long label
# column (AmazonPolarity's 3.6 M) is small as a list; a long text column would be held twice.
MAX_CACHED_ROWS = 2_000_000
MAX_CACHED_BYTES = 64 * 2**20
_CACHE = "_neobench_listed"  # attribute of a Column instance: (fingerprint, values)

_STOCK_ITER = Column.__iter__
_STOCK_GETITEM = Column.__getitem__


def plain_source(column: Column) -> Dataset | None:
    """The dataset under ``column`` when datasets' row and batch formatting give the same
    values (python formatting of this column, no transform, no feature to decode); else None."""
    source = column.source
    if not isinstance(source, Dataset):
        return None  # a nested Column: datasets' own path
    if source._format_type is not None:
        return None
    # A map() lists every column as formatted; a column left out of the format is not plain.
    if source._format_columns is not None and column.column_name not in source._format_columns:
        return None
    if require_decoding(column.features):
        return None
    return source


def listed(column: Column) -> list[Any] | None:
    """The column's values as one list (cached on the column), or None outside the plain case."""
    cached = column.__dict__.get(_CACHE)
    # A column's source and feature never change; its dataset's formatting can only change in
    # place with a new fingerprint. So a cache of this fingerprint is still the plain case.
    if cached is not None and cached[0] == getattr(column.source, "_fingerprint", None):
        return cached[1]
    source = plain_source(column)
    if source is None or (len(source) > MAX_CACHED_ROWS and _nbytes(column) > MAX_CACHED_BYTES):
        return None
    # datasets' own batch path: one table slice formatted by the same formatter as a row.
    values = _STOCK_GETITEM(column, slice(None)) if len(source) else []
    column.__dict__[_CACHE] = (source._fingerprint, values)
    return values


def _nbytes(column: Column) -> int:
    """The Arrow bytes of the column's whole table column (a selection's upper bound)."""
    return int(column.source.data.column(column.column_name).nbytes)


def _iter(self: Column) -> Iterator[Any]:
    values = listed(self)
    return iter(values) if values is not None else _STOCK_ITER(self)


def _getitem(self: Column, key: Any) -> Any:
    if type(key) is int or (isinstance(key, int) and not isinstance(key, bool)):
        # mteb's undersampling reads ``labels[i]`` 100,000 times per classification task:
        # listed()'s cache test is inlined here.
        cached = self.__dict__.get(_CACHE)
        if cached is not None and cached[0] == getattr(self.source, "_fingerprint", None):
            values = cached[1]
        else:
            values = listed(self)
        if values is not None:
            try:
                return values[key]
            except IndexError:  # datasets' own message and type
                raise IndexError(
                    f"Invalid key: {key} is out of bounds for size {len(values)}"
                ) from None
    return _STOCK_GETITEM(self, key)


def column_changes() -> list[tuple[Any, str, Any]]:
    """The "column-cache" patch: Columns convert once and keep their values (the module doc)."""
    return [(Column, "__iter__", _iter), (Column, "__getitem__", _getitem)]


def fingerprint(dataset: Dataset) -> str:
    """The dataset's fingerprint: datasets renews it on every change, so two equal fingerprints
    are the same rows in the same state (a run card records it)."""
    return str(dataset._fingerprint)
