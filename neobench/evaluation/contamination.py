"""`neobench overlap`: each evaluation task's test texts against a manifest's training data, per
unit as the units files name them (protocol/contamination.py compares the texts).

What a unit's texts are, per task type: STS and PairClassification a pair of sentences (the unit
occurs in training when the pair is one a training row trains on, in either order);
Classification an item's text; Retrieval and Reranking a query (the documents count as texts,
not units). Other types are measured on their texts only.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neobench.core.errors import NeobenchError
from neobench.evaluation.units.spec import data_split
from neobench.protocol import contamination, mirror
from neobench.protocol.contamination import TaskOverlap, TrainingTexts
from neobench.protocol.data import build_dataset
from neobench.protocol.manifest import declared_negatives, load_manifest

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

PAIRS = ("STS", "PairClassification")
QUERIES = ("Retrieval", "Reranking")


@dataclass
class Measured:
    manifest: str  # its name
    digest: str  # what the measurements are cached under
    training_texts: int
    tasks: list[TaskOverlap]
    cached: list[str]  # the tasks read from the cache, not measured now


def training_texts(manifest: str, data_dir: str | Path | None) -> TrainingTexts:
    """What a fine-tune on ``manifest`` trains on: each row built as `neobench finetune` builds
    it (filters applied), its query, positive and negatives."""
    found = load_manifest(manifest)
    folder = mirror.resolve_data_dir(data_dir)
    rows = []
    for row in found.rows.values():
        built = build_dataset(row, folder, declared_negatives(row)).dataset
        columns = built.column_names
        rows += [tuple(record[c] for c in columns) for record in built]
    return TrainingTexts(rows)


def measure(
    manifest: str,
    tasks: list[AbsTask],
    benchmark: str,
    data_dir: str | Path | None = None,
    train_data_dir: str | Path | None = None,
) -> Measured:
    """Each task's overlap with the manifest's training data, from the cache where measured:
    the tasks read from ``data_dir`` (as `neobench eval --data-dir`), the manifest's rows from
    ``train_data_dir`` (as `neobench finetune --data-dir`; default ``data_dir``)."""
    train_data_dir = train_data_dir or data_dir
    found_manifest = load_manifest(manifest)
    digest = contamination.manifest_digest(
        found_manifest.path, mirror.resolve_data_dir(train_data_dir)
    )
    cached = {t.metadata.name: contamination.read_cached(digest, t.metadata.name) for t in tasks}
    left = [copy.deepcopy(t) for t in tasks if cached[t.metadata.name] is None]
    training = None
    if left:
        mirror.locate(left, data_dir, benchmark)
        training = training_texts(manifest, train_data_dir)
    measured = {}
    for task in left:
        assert training is not None
        measured[task.metadata.name] = task_overlap(task, training)
        contamination.write_cached(digest, measured[task.metadata.name])
    found = [measured.get(t.metadata.name) or cached[t.metadata.name] for t in tasks]
    size = len(training) if training is not None else -1
    return Measured(
        found_manifest.name, digest, size, [f for f in found if f is not None],
        [name for name, hit in cached.items() if hit is not None],
    )  # fmt: skip


def task_overlap(task: AbsTask, training: TrainingTexts) -> TaskOverlap:
    """One task's test units and texts against ``training`` (the task is loaded here)."""
    task.load_data()
    kind = task.metadata.type
    units = exact_units = near_units = 0
    texts: set[str] = set()
    contaminated: dict[str, list[str]] = {}
    for subset in task.hf_subsets:
        for split in task.metadata.eval_splits:
            found = _units(task, subset, split)
            hits = []
            for unit_id, unit_texts, documents in found:
                units += 1
                texts.update(unit_texts + documents)
                if _occurs(kind, unit_texts, training):
                    exact_units += 1
                    hits.append(unit_id)
                if unit_texts and all(training.near(t) for t in unit_texts):
                    near_units += 1
            if hits:
                contaminated[f"{subset}/{split}"] = hits
    normalized = {contamination.normalize(t) for t in texts} - {""}
    exact = sum(1 for t in normalized if t in training.texts)
    near = sum(1 for t in normalized if training.near(t))
    unit = "pair" if kind in PAIRS else "query" if kind in QUERIES else "item"
    return TaskOverlap(task.metadata.name, kind, unit, units, len(normalized), exact, near,
                       exact_units, near_units, contaminated)  # fmt: skip


def _occurs(kind: str, unit_texts: list[str], training: TrainingTexts) -> bool:
    if kind in PAIRS:
        return len(unit_texts) == 2 and training.pair(*unit_texts)
    return bool(unit_texts) and all(training.exact(t) for t in unit_texts)


def _units(task: AbsTask, subset: str, split: str) -> list[tuple[str, list[str], list[str]]]:
    """(unit id, the unit's texts, other texts it brings: a retrieval split's documents)."""
    kind = task.metadata.type
    if kind in QUERIES:
        return _query_units(task, subset, split)
    rows = data_split(task, subset, split)
    columns = rows.column_names
    if kind == "STS":
        return [(str(i), [r["sentence1"], r["sentence2"]], []) for i, r in enumerate(rows)]
    if kind == "PairClassification":  # one row holding the split's lists (mteb's v1 layout)
        first, second = _pair_columns(columns)
        if len(rows) == 1 and isinstance(rows[0][first], list):
            pairs = zip(rows[0][first], rows[0][second], strict=True)
        else:
            pairs = ((r[first], r[second]) for r in rows)
        return [(str(i), [a, b], []) for i, (a, b) in enumerate(pairs)]
    text = "text" if "text" in columns else columns[0]
    if kind == "Classification":
        return [(str(i), [r[text]], []) for i, r in enumerate(rows)]
    # other types: their texts, each its own "unit" for the text counts, none decontaminable
    values = [v for r in rows for v in _flatten(r[text])]
    return [(str(i), [v], []) for i, v in enumerate(values)]


def _pair_columns(columns: list[str]) -> tuple[str, str]:
    for first, second in (("sentence1", "sentence2"), ("sent1", "sent2")):
        if first in columns and second in columns:
            return first, second
    raise NeobenchError(f"no sentence pair columns among {columns}")


def _query_units(task: AbsTask, subset: str, split: str) -> list[tuple[str, list[str], list[str]]]:
    task.convert_v1_dataset_format_to_v2(num_proc=None)
    data = task.dataset[subset][split]
    queries, corpus = data["queries"], data["corpus"]
    documents = [_document_text(d) for d in corpus]
    out = [(str(q["id"]), [_query_text(q)], []) for q in queries]
    if out:  # the documents are texts of the split, counted once
        out[0] = (out[0][0], out[0][1], documents)
    return out


def _query_text(query: dict[str, Any]) -> str:
    text = query.get("text")
    return " ".join(map(str, text)) if isinstance(text, list) else str(text or "")


def _document_text(document: dict[str, Any]) -> str:
    return " ".join(str(document.get(k) or "") for k in ("title", "text")).strip()


def _flatten(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]
