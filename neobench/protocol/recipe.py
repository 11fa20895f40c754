"""Recipes as data: a versioned YAML of tagged values (the keys: `recipe_values.RecipeValues`),
key=value overrides, and a content hash (docs/recipe.md). Every problem with a file or with the
overrides is reported at once, with "did you mean".
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types
import typing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from neobench.core.errors import NeobenchError, find_yaml, read_yaml, unknown
from neobench.protocol.instructions import yaml_names
from neobench.protocol.recipe_values import NOT_HASHED, RecipeValues, is_off
from neobench.protocol.sources import SOURCES

# Recipe-level keys that may also be overridden.
TOP_LEVEL = frozenset({"manifest"})
# Names other trainers use for recipe keys (transformers, sentence-transformers, torchtune CLI
# habits): offered as "did you mean", never applied silently.
ALIASES = {
    alias: key
    for key, aliases in {
        "learning_rate": ("lr", "learning-rate"),
        "batch_size": ("bs", "batch", "per_device_train_batch_size", "train_batch_size"),
        "max_steps": ("steps", "num_steps"),
        "max_seq_length": ("max_length", "seq_len"),
        "weight_decay": ("wd",),
        "warmup_ratio": ("warmup",),
        "temperature": ("temp", "tau"),
        "max_hard_negatives": ("negatives", "hard_negatives"),
        "sampling_alpha": ("alpha",),
        "datasets": ("dataset",),
        "max_grad_norm": ("grad_clip", "clip"),
    }.items()
    for alias in aliases
}
KEYS = {f.name: f for f in dataclasses.fields(RecipeValues)}
TYPES = typing.get_type_hints(RecipeValues)


def list_recipes() -> list[str]:
    return yaml_names(_recipes_dir())


def _recipes_dir() -> Path:
    return Path(str(resources.files("neobench.protocol.recipes")))


@dataclass(frozen=True)
class Evaluation:
    """The evaluation a recipe's results are compared on: an mteb benchmark, optionally narrowed
    to some of its tasks (None = all of them)."""

    benchmark: str
    tasks: list[str] | None = None
    note: str = ""

    def describe(self) -> str:
        tasks = "all tasks" if self.tasks is None else f"{len(self.tasks)} tasks"
        return f"{self.benchmark}: {tasks}"


@dataclass
class Recipe:
    name: str
    version: int
    manifest: str
    values: RecipeValues
    sources: dict[str, str]  # key -> a tag of SOURCES
    overrides: dict[str, Any] = field(default_factory=dict)
    path: str = ""
    defaults: dict[str, Any] = field(default_factory=dict)  # the file's values, for the run card
    notes: dict[str, str] = field(default_factory=dict)  # why a value is what it is
    # What the recipe is for and what it is compared on: not hashed (not the training it runs).
    purpose: str = ""
    evaluation: Evaluation | None = None

    def as_dict(self) -> dict[str, Any]:
        """key -> value, in the order of recipe_values.RecipeValues."""
        return dataclasses.asdict(self.values)

    @property
    def sha256(self) -> str:
        """Over the identity, the hashed values and the data: the revision of every manifest row
        the recipe trains on (null where unpinned), so other data is another recipe."""
        hashed = {
            k: v for k, v in self.as_dict().items() if k not in NOT_HASHED and not is_off(k, v)
        }
        identity = {"name": self.name, "version": self.version, "manifest": self.manifest}
        canonical = json.dumps(
            {**identity, "values": hashed, "revisions": self.revisions()}, sort_keys=True
        )
        return hashlib.sha256(canonical.encode()).hexdigest()

    def revisions(self) -> dict[str, str | None]:
        """Row key -> pinned revision, for the manifest rows the recipe trains on (a key the
        manifest lacks is left to the checks that name it)."""
        from neobench.protocol.manifest import dataset_keys, load_manifest

        manifest = load_manifest(self.manifest)
        keys = dataset_keys(manifest, self.values.datasets)
        return {k: manifest.rows[k].revision for k in keys if k in manifest.rows}

    def _value_record(self, key: str, value: Any) -> dict[str, Any]:
        """An overridden value says so, with the recipe's own value and source beside it."""
        if key not in self.overrides or key not in self.defaults:
            return {"value": value, "source": self.sources.get(key)}
        recipe = {"recipe_value": self.defaults[key], "recipe_source": self.sources.get(key)}
        return {"value": value, "source": "override", **recipe}

    def record(self) -> dict[str, Any]:
        """What a run card stores: identity, hash, every value with its source, the overrides."""
        return {
            "name": self.name,
            "version": self.version,
            "file": self.path,
            "sha256": self.sha256,
            "manifest": self.manifest,
            "values": {
                k: self._value_record(k, v) for k, v in self.as_dict().items() if not is_off(k, v)
            },
            "overrides": self.overrides,
        }


def load_recipe(name_or_path: str) -> Recipe:
    path = find_yaml(name_or_path, _recipes_dir(), "recipe")
    data = read_yaml(path, "recipe") or {}
    problems = recipe_problems(data, path.name)
    if problems:
        raise NeobenchError(problems)
    specs, evaluation = data["values"], data.get("evaluation")
    if evaluation is not None:
        tasks = evaluation.get("tasks")  # [] stays empty: validate reports it
        tasks = None if tasks is None else list(tasks)
        evaluation = Evaluation(str(evaluation["benchmark"]), tasks, evaluation.get("note", ""))
    values = RecipeValues(**{k: spec["value"] for k, spec in specs.items()})
    # A key the file leaves out takes the dataclass default: a neobench decision.
    sources = {k: specs[k]["source"] if k in specs else "neobench" for k in KEYS}
    return Recipe(
        data["name"],
        int(data["version"]),
        data["manifest"],
        values,
        sources,
        path=str(path),
        defaults=dataclasses.asdict(values),
        notes={k: str(spec["note"]) for k, spec in specs.items() if spec.get("note")},
        purpose=str(data.get("purpose", "")),
        evaluation=evaluation,
    )


def recipe_problems(data: object, where: str) -> list[str]:
    """Every problem of a recipe file: its shape ({value, source[, note]} per key), then each
    value against recipe_values.RecipeValues (missing, unknown, type, range)."""
    if not isinstance(data, dict):
        return [f"{where}: a recipe is a mapping with name, version, manifest and values."]
    problems = [
        f"missing '{k}'." for k in ("name", "version", "manifest", "values") if k not in data
    ]
    specs = data.get("values") or {}
    if not isinstance(specs, dict):
        problems.append("'values' maps each key to {value: ..., source: ...}.")
        return [f"{where}: {p}" for p in problems]
    for key, spec in specs.items():
        if not isinstance(spec, dict) or "value" not in spec:
            problems.append(f"{key}: write it as {{value: ..., source: ...}}.")
        elif spec.get("source") not in SOURCES:
            source = spec.get("source")
            problems.append(f"{key}: source must be one of {sorted(SOURCES)}, not {source!r}.")
    # `purpose`, `evaluation`: optional here; `neobench validate` requires them of shipped recipes.
    if "purpose" in data and not isinstance(data["purpose"], str):
        problems.append("'purpose' is one sentence saying what the recipe is for.")
    if "evaluation" in data and not _evaluation_ok(data["evaluation"]):
        problems.append(
            "'evaluation' is {benchmark: an mteb benchmark, tasks: [mteb task names] (optional, "
            "default all), note: text (optional)}."
        )
    problems += [
        f"missing recipe key {key!r} ({f.metadata['help']})."
        for key, f in KEYS.items()
        if key not in specs and f.default is dataclasses.MISSING
    ]
    for key, spec in specs.items():
        if key not in KEYS:
            problems.append(_unknown_key(key, list(KEYS), "`neobench ls keys`"))
        elif isinstance(spec, dict) and "value" in spec:
            problems += value_problems(key, spec["value"])
    return [f"{where}: {p}" for p in problems]


def _evaluation_ok(spec: object) -> bool:
    if not isinstance(spec, dict) or not set(spec) <= {"benchmark", "tasks", "note"}:
        return False
    tasks = spec.get("tasks")
    names_ok = tasks is None or (isinstance(tasks, list) and all(isinstance(t, str) for t in tasks))
    return isinstance(spec.get("benchmark"), str) and names_ok


def value_problems(
    key: str, value: Any, keys: dict[str, Any] = KEYS, hints: dict[str, Any] = TYPES
) -> list[str]:
    """What is wrong with one value of a known key: its type, its range, or a value this version
    does not implement (a `Literal` type). ``keys``/``hints``: the fields and type hints of the
    recipe's values dataclass (the contrastive recipe's by default)."""
    hint, valid = hints[key], keys[key].metadata.get("valid")
    if typing.get_origin(hint) is Literal:
        if value not in typing.get_args(hint):
            return [
                f"recipe value {key}={value!r}: this neobench version implements "
                f"{_type_name(hint)} only."
            ]
    elif not _matches(value, hint):
        return [f"recipe value {key}={value!r}: expected {_type_name(hint)}."]
    elif valid is not None and not valid(value):
        return [f"recipe value {key}={value!r} is out of range (it must be {valid})."]
    return []


def _matches(value: Any, hint: Any) -> bool:
    """isinstance for the types recipe keys use; an int is a valid float, a bool is neither."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in args)
    if origin is list:
        return isinstance(value, list) and all(_matches(v, args[0]) for v in value)
    if isinstance(value, bool):
        return hint is bool
    if hint is float:
        return isinstance(value, int | float)
    return isinstance(value, hint)


def _type_name(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return " or ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is list:
        return f"a list of {_type_name(args[0])}"
    return hint.__name__


def parse_overrides(items: list[str]) -> dict[str, str]:
    pairs = [item.partition("=") for item in items]
    problems = [
        f"override {item!r}: expected key=value, e.g. max_steps=40."
        for item, (key, sep, _) in zip(items, pairs, strict=True)
        if not sep or not key.strip()
    ]
    if problems:
        raise NeobenchError(problems)
    return {key.strip(): value.strip() for key, _, value in pairs}


def apply_overrides(recipe: Recipe, overrides: dict[str, str]) -> Recipe:
    """A new recipe with the overrides applied, each read as its key's type and checked like a
    value of the file; every problem at once."""
    problems: list[str] = []
    applied: dict[str, Any] = {}
    for key, text in overrides.items():
        if key in TOP_LEVEL:
            applied[key] = text
        elif key not in KEYS:
            hint = f"`neobench ls keys --recipe {recipe.name}`"
            problems.append(_unknown_key(key, [*KEYS, *TOP_LEVEL], hint))
        else:
            try:
                value = coerce(text, key, getattr(recipe.values, key))
            except ValueError as error:
                problems.append(str(error))
                continue
            found = value_problems(key, value)
            problems += found
            if not found:
                applied[key] = value
    if problems:
        raise NeobenchError(problems)
    values = {k: v for k, v in applied.items() if k not in TOP_LEVEL}
    return dataclasses.replace(
        recipe,
        manifest=applied.get("manifest", recipe.manifest),
        values=dataclasses.replace(recipe.values, **values),
        overrides={**recipe.overrides, **applied},
        defaults=recipe.defaults or recipe.as_dict(),
    )


def _unknown_key(key: str, keys: list[str], listing: str) -> str:
    alias = ALIASES.get(key.lower())
    if alias in keys:
        return f"Unknown recipe key {key!r}. Did you mean {alias!r}?"
    return unknown("recipe key", key, keys, f"List them with {listing}.")


def coerce(text: str, key: str, current: Any, hint: Any = None) -> Any:
    """An override's text as a value of the key's declared type ``hint`` (the contrastive
    recipe's by default), not of the current value's."""
    hint = TYPES[key] if hint is None else hint
    if typing.get_origin(hint) is typing.Literal:  # the text of one allowed value, else as given
        for allowed in typing.get_args(hint):
            if str(allowed).lower() == text.strip().lower():
                return allowed
        return text
    if hint == str | list[str]:  # `all`, or a comma-separated list of manifest keys
        keys = [part.strip() for part in text.split(",") if part.strip()]
        if text != "all" and not keys:
            raise ValueError(
                f"override {key}={text}: names no dataset. Give manifest keys "
                "(datasets=STSBENCHMARK,ALLNLI; `neobench ls datasets` lists them) or all."
            )
        return "all" if text == "all" else keys
    if hint is bool:
        if text.lower() not in {"true", "false"}:
            raise ValueError(f"override {key}={text}: expected true or false.")
        return text.lower() == "true"
    if hint in (int, float):
        try:
            return hint(text)
        except ValueError:
            raise ValueError(
                f"override {key}={text}: expected a {hint.__name__} like {current!r}."
            ) from None
    return text
