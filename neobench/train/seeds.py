"""`neobench finetune --seeds 0,1,2`: one run of the recipe per seed, and the name they share."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from neobench.core import results
from neobench.core.errors import NeobenchError
from neobench.protocol.config import FinetuneConfig
from neobench.train import output as run_folder

logger = logging.getLogger(__name__)


def default_name(output: str) -> str:
    """The name results are filed under without --model-name: neobench/<folder>. The runs of
    --seeds share it (their folder without -seed<N>), so their evaluations land side by side
    as seed replicates, told apart by revision (neobench/report/replicates.py)."""
    return f"neobench/{Path(output).expanduser().name}"


SEED_SUFFIX = "-seed"


def seed_configs(cfg: FinetuneConfig) -> list[FinetuneConfig]:
    """One config per run: ``[cfg]`` without --seeds; with --seeds 0,1,2 one per seed, into
    sibling folders <output>-seed<N> under one model name, every folder checked before the
    first run. With --resume a complete run is skipped (a requeued cluster job that finished
    as its notice came asks this), an unfinished one resumed, a missing one started."""
    if cfg.seeds is None:
        if cfg.resume and results.finetune_finished(Path(cfg.output).expanduser()):
            return []
        return [cfg]
    seeds = _parse_seeds(cfg)
    base = Path(cfg.output).expanduser().resolve()
    runs, problems = [], []
    each = replace(cfg, seeds=None, model_name=cfg.model_name or default_name(str(base)))
    for seed in seeds:
        output = base.with_name(f"{base.name}{SEED_SUFFIX}{seed}")
        resume = cfg.resume and not _fresh(output)
        if cfg.resume and results.finetune_finished(output):
            logger.warning("%s: seed %d is complete; skipped", output, seed)
            continue
        problems += run_folder.output_problems(output, resume)
        runs.append(replace(each, output=str(output), seed=seed, resume=resume))
    if problems:
        raise NeobenchError(problems)
    return runs


def _parse_seeds(cfg: FinetuneConfig) -> list[int]:
    if cfg.seed is not None:
        raise NeobenchError(
            f"--seed {cfg.seed} and --seeds {','.join(cfg.seeds or [])}: give one of them "
            "(--seeds 0,1,2 runs the recipe once per seed; --seed N runs it once)."
        )
    if any(item.split("=", 1)[0].strip() == "seed" for item in cfg.overrides):
        raise NeobenchError(
            f"--seeds {','.join(cfg.seeds or [])} and the override seed=...: give the seeds "
            "once, with --seeds."
        )
    bad = [s for s in cfg.seeds or [] if not s.isdigit()]
    if bad or not cfg.seeds:
        raise NeobenchError(
            f"--seeds {','.join(cfg.seeds or []) or repr('')}: expected comma-separated "
            "non-negative whole numbers, e.g. --seeds 0,1,2."
        )
    seeds = [int(s) for s in cfg.seeds]
    if len(set(seeds)) != len(seeds):
        raise NeobenchError(
            f"--seeds {','.join(cfg.seeds)}: a seed is repeated; each seed runs once."
        )
    return seeds


def _fresh(output: Path) -> bool:
    """Nothing to resume: no folder, an empty one, or a run that stopped before a checkpoint."""
    if not output.is_dir() or not any(output.iterdir()):
        return True
    return run_folder.unfinished_without_checkpoint(output)
