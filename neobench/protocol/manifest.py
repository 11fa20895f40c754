"""Training datasets as data (datasets_manifest/*.yaml): parse and validate rows offline."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from neobench.core.errors import NeobenchError, did_you_mean, find_yaml, read_yaml, shipped, unknown
from neobench.protocol.sources import SOURCES

PATH = re.compile(r"^[A-Za-z_][\w-]*(\[(\d+|\*)\]|\.[A-Za-z_][\w-]*)*$")
TEMPLATE_FIELD = re.compile(r"\{([^{}]+)\}")
REVISION = re.compile(r"^[0-9a-f]{40}$")


def manifests_dir() -> Path:
    return shipped("datasets_manifest")


@dataclass(frozen=True)
class Row:
    key: str
    instruction: str
    licence: str
    source: str
    query: str = ""  # empty when `parts` give per-config expressions
    positive: str = ""
    hf_id: str | None = None
    config: str | None = None
    split: str = "train"
    revision: str | None = None
    pin: str = ""  # with revision null: what is known of the commit, and that prefetch resolves it
    data_files: str | list[str] | None = None
    negatives: list[str] = field(default_factory=list)
    num_negatives: int | None = None
    filters: dict[str, Any] = field(default_factory=dict)
    parts: list[dict[str, str]] = field(default_factory=list)
    join: str | None = None
    pair_by: str | None = None
    derive: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    in_domain: list[str] = field(default_factory=list)

    @property
    def repo_id(self) -> str:
        return self.hf_id or f"local:{self.data_files}"


FIELDS = frozenset(f.name for f in fields(Row)) - {"key"}  # what a manifest row may give


@dataclass
class Manifest:
    name: str
    path: str
    rows: dict[str, Row]


def load_manifest(name_or_path: str) -> Manifest:
    path = find_yaml(name_or_path, manifests_dir(), "dataset manifest")
    data = read_yaml(path, "manifest") or {}
    problems: list[str] = []
    rows = {}
    for key, spec in (data.get("datasets") or {}).items():
        row_problems = row_shape_problems(key, spec or {})
        problems += [f"{path.name}: {p}" for p in row_problems]
        if not row_problems:
            rows[key] = Row(key=key, **{k: v for k, v in spec.items() if v is not None})
    if not rows and not problems:
        problems.append(f"{path.name}: no datasets.")
    if problems:
        raise NeobenchError(problems)
    return Manifest(str(data.get("name", path.stem)), str(path), rows)


def row_shape_problems(key: str, spec: dict[str, Any]) -> list[str]:
    """Everything checkable without data: fields, expressions, revision format, source tags."""
    problems = []
    for name in spec:
        if name not in FIELDS:
            problems.append(f"{key}: unknown field {name!r}.{did_you_mean(name, FIELDS)}")
    if not spec.get("hf_id") and not spec.get("data_files"):
        problems.append(f"{key}: needs hf_id (a hub dataset) or data_files (local parquet).")
    for name in ("query", "positive", "instruction", "licence", "source"):
        if not spec.get(name) and not (name in ("query", "positive") and spec.get("parts")):
            problems.append(f"{key}: missing {name!r}.")
    if spec.get("source") and spec["source"] not in SOURCES:
        problems.append(f"{key}: source {spec['source']!r} is not one of {sorted(SOURCES)}.")
    revision = spec.get("revision")
    if revision is not None and not REVISION.match(str(revision)):
        problems.append(
            f"{key}: revision {revision!r} is not a 40-hex commit (or null). Fix: write the full "
            "commit id, or null with a `pin:` note saying what is known (a short id, say)."
        )
    pin = spec.get("pin")
    if pin is not None and not (isinstance(pin, str) and pin.strip()):
        problems.append(f"{key}: pin must be a sentence saying why the revision is null.")
    elif pin and revision is not None:
        problems.append(
            f"{key}: pin explains a null revision, but the row pins {revision}. Fix: drop `pin:` "
            "(or move the remark to `note:`)."
        )
    expressions = [spec.get("query"), spec.get("positive"), *(spec.get("negatives") or [])]
    for part in spec.get("parts") or []:
        expressions += [part.get("query"), part.get("positive")]
        if not part.get("config"):
            problems.append(f"{key}: every part needs a config.")
    for expression in filter(None, expressions):
        if not expression_ok(str(expression)):
            problems.append(f"{key}: cannot parse column expression {expression!r}.")
    if spec.get("join") not in (None, "beir"):
        problems.append(f"{key}: join {spec['join']!r}: only 'beir' is known.")
    for column, rule in (spec.get("filters") or {}).items():
        if rule != "nonempty" and not (isinstance(rule, dict) and set(rule) <= {"min", "max"}):
            problems.append(
                f"{key}: filter on {column!r} must be 'nonempty' or {{min: x, max: y}}."
            )
    for column, rule in (spec.get("derive") or {}).items():
        if not (isinstance(rule, dict) and set(rule) == {"pick", "by"}):
            problems.append(
                f"{key}: derive {column!r} must be {{pick: [columns], by: index column}}."
            )
    return problems


def expression_ok(expression: str) -> bool:
    found = TEMPLATE_FIELD.findall(expression)
    if found:
        return all(PATH.match(f.strip()) for f in found)
    return bool(PATH.match(expression))


def declared_negatives(row: Row) -> int:
    """Hard negatives a row provides (before the recipe's max_hard_negatives caps them)."""
    return row.num_negatives if row.num_negatives is not None else len(row.negatives)


def dataset_keys(manifest: Manifest, datasets: str | list[str]) -> list[str]:
    """The manifest keys the recipe's ``datasets`` value names ('all': every row)."""
    if datasets == "all":
        return list(manifest.rows)
    return [datasets] if isinstance(datasets, str) else list(datasets)


def pin_problems(manifest: Manifest) -> list[str]:
    """A shipped manifest's hub rows are pinned: a 40-hex revision, or null with a `pin:` note."""
    return [
        f"{manifest.name}: {row.key}: revision null without a `pin:` note. Fix: pin the 40-hex "
        "commit, or say in `pin:` what is known of it (`neobench data prefetch` resolves it)."
        for row in manifest.rows.values()
        if row.hf_id and row.revision is None and not row.pin
    ]


def validate_manifest(manifest: Manifest, instruction_keys: set[str]) -> list[str]:
    """Cross-checks: every row's instruction exists in the training instruction profile."""
    problems = []
    for row in manifest.rows.values():
        if row.instruction not in instruction_keys:
            problems.append(
                f"{manifest.name}: {row.key}: "
                + unknown("training instruction", row.instruction, instruction_keys)
            )
    return problems
