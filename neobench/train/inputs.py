"""Step 1 of the recipe: the recipe with its overrides, the model id, the device, the output
folder, the manifest and the instruction profiles, checked together before any data or model
loads, so one error lists every problem at once.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from neobench.core.errors import NeobenchError, check_choice, collect, unknown
from neobench.models import attention
from neobench.models.load import check_spec, resolve_device
from neobench.models.memory import budget_problems
from neobench.protocol.config import (
    PADDING_CHOICES,
    REPORT_TO_CHOICES,
    TRACKERS,
    FinetuneConfig,
)
from neobench.protocol.instructions import (
    InstructionProfile,
    TrainProfile,
    load_profile,
    load_train_instructions,
)
from neobench.protocol.manifest import (
    Manifest,
    Row,
    dataset_keys,
    declared_negatives,
    load_manifest,
    validate_manifest,
)
from neobench.protocol.recipe import Recipe, apply_overrides, load_recipe, parse_overrides
from neobench.train import output as run_folder
from neobench.train.dev_slice import split_problems
from neobench.train.devices import world_size


@dataclass
class Inputs:
    """Everything step 1 resolves and checks before any data or model loads."""

    recipe: Recipe
    output: Path
    manifest: Manifest
    rows: list[Row]  # the manifest rows the recipe trains on
    train_profile: TrainProfile
    eval_profile: InstructionProfile
    world: int  # processes
    report_to: str = "none"  # --report-to (its package checked: installed)


def resolve_recipe(cfg: FinetuneConfig) -> Recipe:
    """The recipe with the overrides and --seed applied; every value is checked on the way."""
    overrides = parse_overrides(cfg.overrides)
    if cfg.seed is not None:
        overrides["seed"] = str(cfg.seed)
    return apply_overrides(load_recipe(cfg.recipe), overrides)


def check_inputs(cfg: FinetuneConfig) -> Inputs:
    """The checked inputs of one run; every problem is reported at once, as one NeobenchError."""
    problems: list[str] = []
    recipe = collect(problems, resolve_recipe, cfg)
    collect(problems, check_spec, cfg.model)
    collect(problems, resolve_device, cfg.device)
    collect(problems, attention.check, cfg.attn_implementation)
    collect(problems, check_choice, "--padding", cfg.padding, PADDING_CHOICES)
    problems += tracker_problems(cfg.report_to)
    problems += budget_problems(cfg.memory_budget)
    output = Path(cfg.output).expanduser().resolve()
    problems += run_folder.output_problems(output, cfg.resume)
    if recipe is None:
        raise NeobenchError(problems)
    values = recipe.values
    manifest = collect(problems, load_manifest, recipe.manifest)
    train_profile = collect(problems, load_train_instructions, values.instructions)
    eval_profile = collect(problems, load_profile, values.eval_instructions)
    rows: list[Row] = []
    if manifest and train_profile:
        if train_profile.instructions:  # an empty profile ('none') turns instructions off
            problems += validate_manifest(manifest, set(train_profile.instructions))
        keys = dataset_keys(manifest, values.datasets)
        problems += [
            unknown(f"dataset key in manifest {manifest.name!r}", key, manifest.rows)
            for key in keys
            if key not in manifest.rows
        ]
        rows = [manifest.rows[k] for k in keys if k in manifest.rows]
    world = world_size()
    if values.batch_size % world:
        problems.append(
            f"batch_size={values.batch_size} is not divisible by the {world} processes."
        )
    problems += _negatives_problems(values.batch_size, values.max_hard_negatives, rows)
    problems += split_problems(rows, values.dev_rows)
    if problems:
        raise NeobenchError(problems)
    return Inputs(recipe, output, manifest, rows, train_profile, eval_profile, world, cfg.report_to)


def tracker_problems(report_to: str) -> list[str]:
    """--report-to names a tracker whose package is installed (the trainer would only fail
    once training starts)."""
    if report_to == "none":
        return []
    if report_to not in TRACKERS:
        return [unknown("--report-to value", report_to, REPORT_TO_CHOICES)]
    package = TRACKERS[report_to]
    if importlib.util.find_spec(package) is None:
        return [
            f"--report-to {report_to}: the {package} package is not installed. Install it "
            f"(pip install {package}), or choose another --report-to "
            f"({', '.join(c for c in REPORT_TO_CHOICES if c != report_to)})."
        ]
    return []


def _negatives_problems(batch_size: int, max_hard_negatives: int, rows: list[Row]) -> list[str]:
    """InfoNCE's negatives are the other queries' positives in the global batch and the query's
    hard negatives: a batch of one query without hard negatives has a loss of 0 at every step."""
    bare = [r.key for r in rows if min(max_hard_negatives, declared_negatives(r)) == 0]
    if batch_size > 1 or not bare:
        return []
    return [
        f"batch_size=1 with {', '.join(bare)} (no hard negatives"
        + (", max_hard_negatives=0" if max_hard_negatives == 0 else "")
        + "): InfoNCE would have no negative to rank the positive against, so the loss is 0 "
        "and nothing trains. Use batch_size=2 or more (in-batch negatives), or datasets with "
        "hard negatives."
    ]
