"""The GLUE protocol as data: a versioned recipe file (glue_recipes/*.yaml) of tagged values, the
grids it searches (named in the file, or a YAML file of key: [values]), key=value overrides, and a
content hash (docs/glue.md). Every problem with a file, a grid or the overrides is reported at once,
with "did you mean".
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import typing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from neobench.core.errors import NeobenchError, find_yaml, read_yaml, unknown
from neobench.protocol.glue import HUB_REPO, HUB_REVISION
from neobench.protocol.recipe import coerce, value_problems
from neobench.protocol.recipe_values import Range, value
from neobench.protocol.sources import SOURCES

STANDARD_GLUE_RECIPE = "neobert-glue"
SELECT_ON = ("heldout", "validation")

_positive = Range(0, low_excluded=True)
_non_negative = Range(0)
_fraction = Range(0, 1, low_excluded=True)
_unit = Range(0, 1.000001)


@dataclass(frozen=True)
class GlueValues:
    """The keys of a GLUE recipe; a grid searches some of them."""

    learning_rate: float = value("peak learning rate", _positive)
    batch_size: int = value("examples per optimisation step", _positive)
    weight_decay: float = value("AdamW weight decay (not on biases and norms)", _non_negative)
    epochs: int = value("passes over the training rows", _positive)
    eval_steps_max: int = value(
        "evaluate every n = min(eval_steps_max, steps per epoch // evals_per_epoch) steps",
        _positive,
    )
    evals_per_epoch: int = value("see eval_steps_max", _positive)
    early_stopping_patience: int = value(
        "stop after this many evaluations without a better score (0: never)", _non_negative
    )
    warmup_ratio: float = value("share of the steps warming the learning rate up", Range(0, 1))
    lr_decay_fraction: float = value(
        "the linear decay ends at this share of the steps, then the rate stays at lr_floor", _unit
    )
    lr_floor: float = value("the rate the decay ends at, as a share of the peak", _unit)
    adam_beta1: float = value("AdamW beta1", Range(0, 1))
    adam_beta2: float = value("AdamW beta2", Range(0, 1))
    adam_epsilon: float = value("AdamW epsilon", _positive)
    max_grad_norm: float = value("gradient clipping threshold (0: no clipping)", _non_negative)
    max_seq_length: int = value("tokens per example (pair), truncated beyond", Range(8))
    mixed_precision: Literal["bf16", "fp32"] = value("bf16 autocast on CUDA; CPU runs in fp32")
    classifier_dropout: float = value("dropout of the task head", Range(0, 1))
    select_on: Literal["heldout", "validation"] = value(
        "what picks the checkpoint and the grid point: a held-out slice of the training split "
        "(the validation split is then reported once), or the validation split (the paper's way)"
    )
    heldout_fraction: float = value("share of the training rows held out for selection", _fraction)
    heldout_max_rows: int = value("at most this many rows held out", _positive)
    split_seed: int = value(
        "seed of the held-out draw (the same slice for every run)", _non_negative
    )
    train_rows: int = value(
        "train on the first n rows of a seeded shuffle of the training rows (0: all): CPU demos",
        _non_negative,
    )
    transfer_from_mnli: Literal[False] = value(
        "start RTE, STS-B, MRPC and QNLI from the best MNLI checkpoint (the paper's)"
    )


KEYS = {f.name: f for f in dataclasses.fields(GlueValues)}
TYPES = typing.get_type_hints(GlueValues)
ALIASES = {
    "lr": "learning_rate", "bs": "batch_size", "wd": "weight_decay", "epoch": "epochs",
    "num_train_epochs": "epochs", "max_length": "max_seq_length", "warmup": "warmup_ratio",
    "patience": "early_stopping_patience", "per_device_train_batch_size": "batch_size",
}  # fmt: skip


def _recipes_dir() -> Path:
    return Path(str(resources.files("neobench.protocol.glue_recipes")))


def list_glue_recipes() -> list[str]:
    return sorted(p.stem for p in _recipes_dir().glob("*.yaml"))


@dataclass(frozen=True)
class Grid:
    """The points a search runs: key -> the values tried, every combination once."""

    name: str
    values: dict[str, list[Any]]
    source: str = "neobench"
    note: str = ""

    def points(self) -> list[dict[str, Any]]:
        keys = sorted(self.values)
        return [
            dict(zip(keys, combo, strict=True))
            for combo in itertools.product(*(self.values[k] for k in keys))
        ]

    def record(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "values": self.values,
            "points": len(self.points()),
        }


def point_key(point: dict[str, Any]) -> str:
    """A point's folder name: its values, sorted by key (``batch_size=16,learning_rate=2e-05``)."""
    return ",".join(f"{k}={_text(point[k])}" for k in sorted(point)) or "recipe"


def _text(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


@dataclass(frozen=True)
class GlueRecipe:
    name: str
    version: int
    values: GlueValues
    sources: dict[str, str]
    notes: dict[str, str]
    grids: dict[str, Grid]
    path: str = ""
    overrides: dict[str, Any] = field(default_factory=dict)

    def at(self, point: dict[str, Any]) -> GlueValues:
        """The values one grid point trains with."""
        return dataclasses.replace(self.values, **point)

    def sha256(self, values: GlueValues | None = None) -> str:
        """Over the identity, every value (a point's, when given) and the hub data's revision."""
        body = {
            "name": self.name,
            "version": self.version,
            "values": dataclasses.asdict(values or self.values),
            "data": f"{HUB_REPO}@{HUB_REVISION}",
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()

    def record(self) -> dict[str, Any]:
        """What a run card stores: identity, hash, every value with its source, the overrides."""
        values = {}
        for key, v in dataclasses.asdict(self.values).items():
            source = "override" if key in self.overrides else self.sources.get(key, "neobench")
            values[key] = {"value": v, "source": source}
        return {
            "name": self.name,
            "version": self.version,
            "file": self.path,
            "sha256": self.sha256(),
            "values": values,
            "overrides": self.overrides,
        }

    def grid(self, name_or_path: str) -> Grid:
        """A grid the recipe names, or a YAML file of ``key: [values]``; every problem at once."""
        if name_or_path in self.grids:
            return self.grids[name_or_path]
        path = Path(name_or_path)
        if path.suffix not in {".yaml", ".yml"}:
            raise NeobenchError(
                unknown(
                    "--grid",
                    name_or_path,
                    list(self.grids),
                    "Or pass a YAML file of key: [values].",
                )
            )
        if not path.is_file():
            raise NeobenchError(f"--grid {path}: no such file.")
        data = read_yaml(path, "grid")
        if isinstance(data, dict) and isinstance(data.get("values"), dict):
            data = data["values"]
        data = yaml_numbers(data)
        problems = grid_problems(data, f"--grid {path}")
        if problems:
            raise NeobenchError(problems)
        return Grid(path.stem, {k: list(v) for k, v in data.items()}, "file", str(path))


def yaml_numbers(data: Any) -> Any:
    """A grid as YAML gives it, with the numbers YAML 1.1 reads as text (``1e-5``: no dot)
    made floats where the key is a float (`grid_problems` then checks what is left)."""
    if not isinstance(data, dict):
        return data

    def number(key: Any, v: Any) -> Any:
        if TYPES.get(key) is float and isinstance(v, str):
            try:
                return float(v)
            except ValueError:
                return v
        return v

    return {k: [number(k, v) for v in vs] if isinstance(vs, list) else vs for k, vs in data.items()}


def grid_problems(data: object, where: str) -> list[str]:
    if not isinstance(data, dict) or not data:
        return [
            f"{where}: a grid maps recipe keys to lists of values (learning_rate: [1e-5, 2e-5])."
        ]
    problems = []
    for key, values in data.items():
        if key not in KEYS:
            problems.append(f"{where}: {_unknown_key(str(key))}")
            continue
        if not isinstance(values, list) or not values:
            problems.append(f"{where}: {key}: give a non-empty list of values, e.g. {key}: [...].")
            continue
        for v in values:
            problems += [f"{where}: {p}" for p in value_problems(key, v, KEYS, TYPES)]
        if len(set(map(repr, values))) < len(values):
            problems.append(f"{where}: {key}: a value is listed twice.")
    return problems


def _unknown_key(key: str) -> str:
    alias = ALIASES.get(key.lower())
    if alias:
        return f"unknown GLUE recipe key {key!r}. Did you mean {alias!r}?"
    return unknown("GLUE recipe key", key, list(KEYS), 'The keys: docs/glue.md, "The recipe".')


def load_glue_recipe(name_or_path: str = STANDARD_GLUE_RECIPE) -> GlueRecipe:
    path = find_yaml(name_or_path, _recipes_dir(), "GLUE recipe")
    data = read_yaml(path, "GLUE recipe") or {}
    problems = glue_recipe_problems(data, path.name)
    if problems:
        raise NeobenchError(problems)
    specs = data["values"]
    grids = {
        name: Grid(
            name,
            {k: list(v) for k, v in g["values"].items()},
            g.get("source", "neobench"),
            str(g.get("note", "")),
        )
        for name, g in (data.get("grids") or {}).items()
    }
    return GlueRecipe(
        name=str(data["name"]),
        version=int(data["version"]),
        values=GlueValues(**{k: s["value"] for k, s in specs.items()}),
        sources={k: s["source"] for k, s in specs.items()},
        notes={k: str(s["note"]) for k, s in specs.items() if s.get("note")},
        grids=grids,
        path=str(path),
    )


def glue_recipe_problems(data: object, where: str) -> list[str]:
    if not isinstance(data, dict):
        return [f"{where}: a GLUE recipe is a mapping with name, version, values and grids."]
    problems = [f"missing '{k}'." for k in ("name", "version", "values") if k not in data]
    specs = data.get("values") or {}
    if not isinstance(specs, dict):
        return [f"{where}: 'values' maps each key to {{value: ..., source: ...}}."]
    for key, spec in specs.items():
        if key not in KEYS:
            problems.append(_unknown_key(str(key)))
        elif not isinstance(spec, dict) or "value" not in spec:
            problems.append(f"{key}: write it as {{value: ..., source: ...}}.")
        elif spec.get("source") not in SOURCES:
            problems.append(
                f"{key}: source must be one of {sorted(SOURCES)}, not {spec.get('source')!r}."
            )
        else:
            problems += value_problems(key, spec["value"], KEYS, TYPES)
    problems += [
        f"missing GLUE recipe key {k!r} ({f.metadata['help']})."
        for k, f in KEYS.items()
        if k not in specs
    ]
    for name, grid in (data.get("grids") or {}).items():
        if not isinstance(grid, dict) or "values" not in grid:
            problems.append(f"grid {name}: write it as {{source: ..., values: {{key: [values]}}}}.")
        else:
            problems += grid_problems(grid["values"], f"grid {name}")
    return [f"{where}: {p}" for p in problems]


def apply_glue_overrides(recipe: GlueRecipe, overrides: dict[str, str]) -> GlueRecipe:
    """The recipe with ``key=value`` overrides applied (``--set``), each read as its key's type
    and checked like a value of the file; every problem at once."""
    problems: list[str] = []
    applied: dict[str, Any] = {}
    for key, text in overrides.items():
        if key not in KEYS:
            problems.append(f"--set {key}={text}: {_unknown_key(key)}")
            continue
        try:
            v = coerce(text, key, getattr(recipe.values, key), TYPES[key])
        except ValueError as error:
            problems.append(str(error))
            continue
        found = value_problems(key, v, KEYS, TYPES)
        problems += found
        if not found:
            applied[key] = v
    if problems:
        raise NeobenchError(problems)
    return dataclasses.replace(
        recipe,
        values=dataclasses.replace(recipe.values, **applied),
        overrides={**recipe.overrides, **applied},
    )
