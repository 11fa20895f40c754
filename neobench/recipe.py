"""Recipes as data: a versioned YAML of tagged values, key=value overrides, and a content hash.

Defaults live in the recipe file alone; flags and overrides only override. Every problem with
the overrides is reported at once, with "did you mean".
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from neobench.errors import NeobenchError, find_yaml, read_yaml, unknown

SOURCES = frozenset({"paper", "authors-code", "neobench"})
# Values that change neither the method nor the numbers (seed: a run parameter reported beside
# the hash, like an lm-eval seed; checkpoints: bookkeeping).
NOT_HASHED = frozenset({"seed", "checkpoint_every", "keep_checkpoints"})
# Recipe-level keys that may also be overridden.
TOP_LEVEL = frozenset({"manifest"})
# Names other trainers use for recipe keys (transformers, sentence-transformers, torchtune CLI
# habits): offered as "did you mean", never applied silently.
ALIASES = {
    "lr": "learning_rate",
    "learning-rate": "learning_rate",
    "bs": "batch_size",
    "batch": "batch_size",
    "per_device_train_batch_size": "batch_size",
    "train_batch_size": "batch_size",
    "steps": "max_steps",
    "num_steps": "max_steps",
    "max_length": "max_seq_length",
    "seq_len": "max_seq_length",
    "wd": "weight_decay",
    "warmup": "warmup_ratio",
    "temp": "temperature",
    "tau": "temperature",
    "negatives": "max_hard_negatives",
    "hard_negatives": "max_hard_negatives",
    "alpha": "sampling_alpha",
    "dataset": "datasets",
    "grad_clip": "max_grad_norm",
    "clip": "max_grad_norm",
}


def list_recipes() -> list[str]:
    return sorted(p.stem for p in _recipes_dir().glob("*.yaml"))


def _recipes_dir() -> Path:
    return Path(str(resources.files("neobench.recipes")))


@dataclass
class Recipe:
    name: str
    version: int
    manifest: str
    values: dict[str, Any]
    sources: dict[str, str]
    overrides: dict[str, Any] = field(default_factory=dict)
    path: str = ""
    # The values as the recipe file has them, before any override (kept for the run card).
    defaults: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # why a value is what it is

    @property
    def sha256(self) -> str:
        hashed = {k: v for k, v in self.values.items() if k not in NOT_HASHED}
        canonical = json.dumps(
            {
                "name": self.name,
                "version": self.version,
                "manifest": self.manifest,
                "values": hashed,
            },
            sort_keys=True,
        )
        return hashlib.sha256(canonical.encode()).hexdigest()

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def _value_record(self, key: str, value: Any) -> dict[str, Any]:
        """An overridden value says so, with the recipe's own value and source beside it."""
        if key in self.overrides and key in self.defaults:
            return {
                "value": value,
                "source": "override",
                "recipe_value": self.defaults[key],
                "recipe_source": self.sources.get(key),
            }
        return {"value": value, "source": self.sources.get(key)}

    def record(self) -> dict[str, Any]:
        """What a run card stores: identity, hash, every value with its source, the overrides."""
        return {
            "name": self.name,
            "version": self.version,
            "file": self.path,
            "sha256": self.sha256,
            "manifest": self.manifest,
            "values": {k: self._value_record(k, v) for k, v in self.values.items()},
            "overrides": self.overrides,
        }


def load_recipe(name_or_path: str) -> Recipe:
    path = find_yaml(name_or_path, _recipes_dir(), "recipe")
    data = read_yaml(path, "recipe") or {}
    problems = recipe_problems(data, path.name)
    if problems:
        raise NeobenchError(problems)
    values = {k: spec["value"] for k, spec in data["values"].items()}
    sources = {k: spec["source"] for k, spec in data["values"].items()}
    return Recipe(
        data["name"],
        int(data["version"]),
        data["manifest"],
        values,
        sources,
        path=str(path),
        defaults=dict(values),
        notes={k: str(spec["note"]) for k, spec in data["values"].items() if spec.get("note")},
    )


def recipe_problems(data: object, where: str) -> list[str]:
    """Shape checks: every value is {value, source[, note]} with a known source."""
    if not isinstance(data, dict):
        return [f"{where}: a recipe is a mapping with name, version, manifest and values."]
    problems = [
        f"{where}: missing '{k}'."
        for k in ("name", "version", "manifest", "values")
        if k not in data
    ]
    for key, spec in (data.get("values") or {}).items():
        if not isinstance(spec, dict) or "value" not in spec:
            problems.append(f"{where}: {key}: write it as {{value: ..., source: ...}}.")
        elif spec.get("source") not in SOURCES:
            problems.append(
                f"{where}: {key}: source must be one of {sorted(SOURCES)}, "
                f"not {spec.get('source')!r}."
            )
    return problems


def parse_overrides(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    problems = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            problems.append(f"override {item!r}: expected key=value, e.g. max_steps=40.")
            continue
        out[key.strip()] = value.strip()
    if problems:
        raise NeobenchError(problems)
    return out


def apply_overrides(recipe: Recipe, overrides: dict[str, str]) -> Recipe:
    """A new recipe with the overrides applied, typed like the values they replace.

    Every problem is reported at once.
    """
    values = dict(recipe.values)
    manifest = recipe.manifest
    problems, applied = [], {}
    for key, text in overrides.items():
        if key in TOP_LEVEL:
            manifest = text
            applied[key] = text
            continue
        if key not in values:
            problems.append(_unknown_key(key, [*values, *TOP_LEVEL], recipe))
            continue
        try:
            values[key] = _coerce(text, values[key], key)
        except ValueError as error:
            problems.append(str(error))
            continue
        applied[key] = values[key]
    if problems:
        raise NeobenchError(problems)
    return Recipe(
        recipe.name,
        recipe.version,
        manifest,
        values,
        recipe.sources,
        {**recipe.overrides, **applied},
        recipe.path,
        recipe.defaults or dict(recipe.values),
        recipe.notes,
    )


def _unknown_key(key: str, keys: list[str], recipe: Recipe) -> str:
    alias = ALIASES.get(key.lower())
    if alias in keys:
        return f"Unknown recipe key {key!r}. Did you mean {alias!r}?"
    return unknown(
        "recipe key", key, keys, f"List them with `neobench ls keys --recipe {recipe.name}`."
    )


def _coerce(text: str, current: Any, key: str) -> Any:
    if key == "datasets":
        if text == "all":
            return "all"
        keys = [part.strip() for part in text.split(",") if part.strip()]
        if not keys:
            raise ValueError(
                f"override datasets={text}: names no dataset. Give manifest keys "
                "(datasets=STSBENCHMARK,ALLNLI; `neobench ls datasets` lists them) or all."
            )
        return keys
    try:
        if isinstance(current, bool):
            if text.lower() not in {"true", "false"}:
                raise ValueError
            return text.lower() == "true"
        if isinstance(current, int):
            return int(text)
        if isinstance(current, float):
            return float(text)
    except ValueError:
        raise ValueError(
            f"override {key}={text}: expected a {type(current).__name__} like {current!r}."
        ) from None
    return text
