"""Manifest rows -> datasets with query / positive / negative_1..k columns (hub or mirror).
Everything a row needs is declared in the manifest; this module only interprets it."""

from __future__ import annotations

import logging
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neobench.core.errors import NeobenchError
from neobench.protocol.manifest import TEMPLATE_FIELD, Row, declared_negatives

if TYPE_CHECKING:
    from datasets import Dataset

logger = logging.getLogger(__name__)

TOKEN = re.compile(r"\[(\d+|\*)\]|\.?([A-Za-z_][\w-]*)")
# Clustering-style pairs are drawn with their own fixed seed so a dataset's content does not
# change with the training seed.
PAIRING_SEED = 0


@dataclass
class BuiltDataset:
    """One manifest row built for training (with its row: no caller looks it up again)."""

    row: Row
    dataset: Dataset
    rows_raw: int
    num_negatives: int
    source: str  # hub | mirror:<dir> | local:<dir>

    @property
    def key(self) -> str:
        return self.row.key


def extract(expression: str, record: dict[str, Any]) -> Any:
    """Evaluate a column expression on one raw record: a path, a [*] expansion or a template."""
    if TEMPLATE_FIELD.search(expression):
        return TEMPLATE_FIELD.sub(
            lambda m: as_text(extract(m.group(1).strip(), record)), expression
        ).strip()
    values: list[Any] = [record]
    expanded = False
    for index, name in TOKEN.findall(expression):
        if name:
            values = [v.get(name) if isinstance(v, dict) else None for v in values]
        elif index == "*":
            values = [item for v in values for item in (v or [])]
            expanded = True
        else:
            values = [
                v[int(index)] if isinstance(v, list | tuple) and len(v) > int(index) else None
                for v in values
            ]
    return values if expanded else values[0]


def as_text(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(map(str, value))
    return "" if value is None else str(value)


def _load_raw(row: Row, data_dir: Path | None, config: str | None, split: str) -> Dataset:
    from datasets import load_dataset

    if row.data_files:
        if data_dir is None:
            raise NeobenchError(
                f"{row.key}: reads local files ({row.data_files}); pass --data-dir."
            )
        files = [row.data_files] if isinstance(row.data_files, str) else row.data_files
        return load_dataset("parquet", data_files=[str(data_dir / f) for f in files], split="train")
    path = str(data_dir / row.hf_id) if data_dir else row.hf_id
    return load_dataset(path, name=config, split=split, revision=None if data_dir else row.revision)


def _beir_records(row: Row, data_dir: Path | None) -> list[dict[str, Any]]:
    """qrels (config 'default', the row's split) joined with the corpus and queries configs."""
    qrels = _load_raw(row, data_dir, row.config or "default", row.split)
    qrels = qrels.filter(lambda r: float(r.get("score", 1)) > 0)
    wanted_docs = set(map(str, qrels["corpus-id"]))
    queries = {str(r["_id"]): r for r in _load_raw(row, data_dir, "queries", "queries")}
    corpus = {
        str(r["_id"]): r
        for r in _load_raw(row, data_dir, "corpus", "corpus")
        if str(r["_id"]) in wanted_docs
    }
    out = []
    for pair in qrels:
        query, doc = queries.get(str(pair["query-id"])), corpus.get(str(pair["corpus-id"]))
        if query and doc:
            texts = {"query": extract(row.query, query), "positive": extract(row.positive, doc)}
            out.append({**texts, "negatives": []})
    return out


def _records(row: Row, data_dir: Path | None) -> tuple[list[dict[str, Any]], int]:
    """(query/positive/negatives records, raw row count) before pairing and the negatives cap."""
    if row.join == "beir":
        records = _beir_records(row, data_dir)
        return records, len(records)
    out, raw = [], 0
    for part in row_parts(row):
        dataset = _load_raw(row, data_dir, part.get("config"), row.split)
        raw += len(dataset)
        _check_columns(row, dataset.column_names, part)
        for record in dataset:
            derive(row, record)
            if not _keep(record, row.filters):
                continue
            out.append(
                {
                    "query": as_text(extract(part["query"], record)),
                    "positive": as_text(extract(part["positive"], record)),
                    "negatives": negatives_of(row, record),
                    "group": record.get(row.pair_by) if row.pair_by else None,
                }
            )
    return out, raw


def derive(row: Row, record: dict[str, Any]) -> None:
    """Add the row's derived columns to one raw record (in place)."""
    for name, rule in row.derive.items():
        record[name] = record[rule["pick"][int(record[rule["by"]])]]


def negatives_of(row: Row, record: dict[str, Any]) -> list[str]:
    """The non-empty hard negatives the row's expressions give for one raw record, in order."""
    negatives: list[str] = []
    for expression in row.negatives:
        value = extract(expression, record)
        negatives += [as_text(v) for v in value] if isinstance(value, list) else [as_text(value)]
    return [n for n in negatives if n]


def columns_of(*expressions: str) -> set[str]:
    """The top-level columns some column expressions read."""
    needed = set()
    for expression in expressions:
        fields = TEMPLATE_FIELD.findall(expression) or [expression]
        needed |= {TOKEN.match(f.strip()).group(2) for f in fields}
    return needed


def needed_columns(row: Row, part: dict[str, str]) -> set[str]:
    """Every column of the raw data one config (``part``) of the row reads: its expressions,
    filters, group and the inputs of its derived columns."""
    needed = columns_of(part["query"], part["positive"], *row.negatives)
    needed |= set(row.filters) | ({row.pair_by} if row.pair_by else set())
    needed -= set(row.derive)
    for rule in row.derive.values():
        needed |= {*rule["pick"], rule["by"]}
    return needed


def row_parts(row: Row) -> list[dict[str, str]]:
    """The configs a (non-beir) row reads, each with its query and positive expressions."""
    return row.parts or [{"config": row.config, "query": row.query, "positive": row.positive}]


def _check_columns(row: Row, columns: list[str], part: dict[str, str]) -> None:
    missing = sorted(needed_columns(row, part) - set(columns))
    where = f" config {part['config']}" if part.get("config") else ""
    if missing:
        raise NeobenchError(
            f"manifest row {row.key}: column(s) {missing} do not exist in {row.repo_id}"
            f"{where} (it has {columns}). "
            "Fix the row's column expressions in the manifest."
        )


def _keep(record: dict[str, Any], filters: dict[str, Any]) -> bool:
    for column, rule in filters.items():
        value = record.get(column)
        if rule == "nonempty":
            if value is None or not str(value).strip():
                return False
            continue
        if value is None or ("min" in rule and float(value) < rule["min"]):
            return False
        if "max" in rule and float(value) > rule["max"]:
            return False
    return True


def _pair_within_groups(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Positive of each text = the next text of its group in a fixed-seed shuffle (a cycle)."""
    groups: dict[Any, list[int]] = {}
    for i, record in enumerate(records):
        groups.setdefault(record["group"], []).append(i)
    rng = random.Random(PAIRING_SEED)
    out = []
    for group in sorted(groups, key=str):
        members = groups[group]
        if len(members) < 2:
            continue
        rng.shuffle(members)
        for position, index in enumerate(members):
            partner = records[members[(position + 1) % len(members)]]
            out.append({**records[index], "positive": partner["query"]})
    return out


def build_dataset(row: Row, data_dir: Path | None, max_negatives: int) -> BuiltDataset:
    """One manifest row as a Dataset with columns query, positive, negative_1..k (k fixed)."""
    from datasets import Dataset

    records, raw = _records(row, data_dir)
    if row.pair_by:
        records = _pair_within_groups(records)
    k = min(max_negatives, declared_negatives(row))
    columns: dict[str, list[str]] = {"query": [], "positive": []}
    columns.update({f"negative_{i + 1}": [] for i in range(k)})
    for record in records:
        if not record["query"] or not record["positive"] or len(record["negatives"]) < k:
            continue
        columns["query"].append(record["query"])
        columns["positive"].append(record["positive"])
        for i in range(k):
            columns[f"negative_{i + 1}"].append(record["negatives"][i])
    source = f"local:{data_dir}" if row.data_files else f"mirror:{data_dir}" if data_dir else "hub"
    return BuiltDataset(row, Dataset.from_dict(columns), raw, k, source)
