"""Checks before `neobench eval` loads anything heavy: every cheap input (flags, profile, shard,
results folder, task selection) checked before one problem is reported.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from neobench.core.errors import NeobenchError, check_choice, collect, writable_folder_problems
from neobench.encoder.tokenpool import resolve_workers
from neobench.models import attention
from neobench.models.load import check_spec, parse_max_seq_length, resolve_device
from neobench.protocol import config
from neobench.protocol.config import UNPADDED_CHOICES, EvalConfig
from neobench.protocol.instructions import (
    InstructionProfile,
    all_mteb_task_names,
    load_profile,
    validate_profile,
)
from neobench.protocol.tasks import load_benchmark, parse_shard, select_tasks, shard

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask


@dataclass(frozen=True)
class EvalInputs:
    """An eval's inputs once checked: this shard's tasks, the instruction profile, the shard."""

    tasks: list[AbsTask]
    profile: InstructionProfile
    shard: tuple[int, int]  # (K, N) of --shard K/N


def prepare_tasks(cfg: EvalConfig) -> EvalInputs:
    """Validate every cheap input at once; this shard's tasks, the profile and the shard."""
    problems: list[str] = []
    collect(problems, check_spec, cfg.model)  # the model first: what the run is of
    benchmark = collect(problems, load_benchmark, cfg.benchmark)
    profile = collect(problems, load_profile, cfg.instructions)
    shard_kn = collect(problems, parse_shard, cfg.shard)
    collect(problems, parse_max_seq_length, cfg.max_seq_length)
    collect(problems, resolve_device, cfg.device)
    collect(problems, check_choice, "--dtype", cfg.dtype, config.DTYPE_CHOICES)
    collect(problems, check_choice, "--unpadded", cfg.unpadded, list(UNPADDED_CHOICES))
    collect(problems, check_choice, "--cache-policy", cfg.cache_policy, config.CACHE_POLICIES)
    if cfg.cache_max_gb is not None and not 0 < cfg.cache_max_gb < float("inf"):
        problems.append(
            f"--cache-max-gb {cfg.cache_max_gb:g}: must be a positive number of GB (e.g. 25); "
            "leave it out for no cap, or pass --cache-policy off to store nothing."
        )
    collect(problems, attention.check, cfg.attn_implementation)
    collect(problems, resolve_workers, cfg.tokenize_workers)
    if cfg.batch_size < 1:
        problems.append(f"--batch-size {cfg.batch_size}: must be a positive number of texts.")
    if cfg.token_budget is not None and cfg.token_budget < 1:
        problems.append(
            f"--token-budget {cfg.token_budget}: must be a positive number of tokens "
            "(or leave it out for the device's default)."
        )
    if profile is not None:
        problems += validate_profile(profile, all_mteb_task_names())
    problems += writable_folder_problems(
        Path(cfg.results), "--results", "Pass a folder you can write, e.g. --results runs/eval."
    )
    # A type given to --tasks is pointed at --types, which eval takes.
    pick = functools.partial(select_tasks, types_flag="--types")
    selected = collect(problems, pick, benchmark, cfg.tasks, cfg.types) if benchmark else None
    if problems:
        raise NeobenchError(problems)
    k, n = shard_kn
    # mteb hands out the same task objects on every call; copies keep our path edits local.
    return EvalInputs([copy.deepcopy(t) for t in shard(selected, k, n)], profile, (k, n))
