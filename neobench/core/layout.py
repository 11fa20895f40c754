"""The results folder, as `neobench eval` writes it: where every file of a run lives.

    <root>/results/<org__model>/<revision>/[experiments/<conditions>/]   a run folder
        <Task>.json                       mteb's result of one task
        model_meta.json                   mteb's ModelMeta of the evaluated model
        neobench/run-*.yaml               neobench's run cards (one per `neobench eval` call)
        predictions/<Task>.units.json     per-item units of one task (neobench/evaluation/units)

mteb's own layout (its ResultCache reads it); every reader of a results root goes through here.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

RESULTS = "results"
EXPERIMENTS = "experiments"
CARDS = "neobench"
UNITS = "predictions"
META = "model_meta.json"


def model_folder(root: Path, model_name: str) -> Path:
    """Where mteb writes a model's results under ``root``: its name with "/" as "__" (and
    spaces as "_", as mteb's ModelMeta.model_name_as_path does)."""
    return Path(root) / RESULTS / model_name.replace("/", "__").replace(" ", "_")


def run_folders(root: Path) -> list[Path]:
    """Every folder under ``root`` that holds task results, standard and experiment ones."""
    base = Path(root) / RESULTS
    folders = {p.parent for p in base.glob("*/*/*.json")}
    folders |= {p.parent for p in base.glob(f"*/*/{EXPERIMENTS}/*/*.json")}
    return sorted(folders)


def identity(root: Path, folder: Path) -> tuple[str, str, str | None]:
    """(model name as the folder spells it, revision, experiment or None) of a run folder."""
    rel = folder.relative_to(Path(root) / RESULTS).parts
    experiment = rel[3] if len(rel) == 4 and rel[2] == EXPERIMENTS else None
    return rel[0].replace("__", "/"), rel[1], experiment


def task_files(folder: Path) -> list[Path]:
    """The task result files of a run folder (``model_meta.json`` is not one)."""
    return [p for p in sorted(Path(folder).glob("*.json")) if p.name != META]


def card_paths(folder: Path) -> list[Path]:
    """The eval run cards of a run folder, oldest first (their names start with the time)."""
    return sorted((Path(folder) / CARDS).glob("run-*.yaml"))


def all_card_paths(root: Path) -> list[Path]:
    """The eval run cards of every run folder under ``root``."""
    base = Path(root) / RESULTS
    standard = base.glob(f"*/*/{CARDS}/run-*.yaml")
    return [*standard, *base.glob(f"*/*/{EXPERIMENTS}/*/{CARDS}/run-*.yaml")]


def digest(path: Path) -> str:
    """The first 16 hex digits of a file's sha256 (what run cards record of a units file)."""
    hashed = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            hashed.update(block)
    return hashed.hexdigest()[:16]


def has_units(folder: Path) -> bool:
    """Whether a run folder holds the per-item units of any task."""
    return next((Path(folder) / UNITS).glob("*.units.json"), None) is not None


def units_path(folder: Path, task: str) -> Path:
    """Where the per-item units of ``task`` live in a run folder (present or not)."""
    return Path(folder) / UNITS / f"{task}.units.json"
