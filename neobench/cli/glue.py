"""`neobench glue`: parse, run the grid, print the selection per task."""

from __future__ import annotations

from neobench.cli.commands import GlueCommand
from neobench.cli.output import say
from neobench.core.errors import NeobenchError
from neobench.protocol.recipe import parse_overrides


def cmd_glue(cfg: GlueCommand) -> int:
    """fine-tune and score a model on GLUE under the paper's protocol"""
    from neobench.glue.grid import run_glue

    try:
        seeds = [int(s) for s in cfg.seeds] if cfg.seeds is not None else None
    except ValueError:
        raise NeobenchError(
            f"--seeds {','.join(cfg.seeds or [])}: give integers, e.g. 0,1,2."
        ) from None
    summary = run_glue(
        cfg.model, cfg.tasks, cfg.output, grid=cfg.grid, seeds=seeds,
        overrides=parse_overrides(cfg.set), recipe=cfg.recipe, data_dir=cfg.data_dir,
        model_name=cfg.model_name, device=cfg.device, dry_run=cfg.dry_run,
        say=lambda line: say(line, markup=False),
    )  # fmt: skip
    for task, chosen in summary.selected.items():
        scores = ", ".join(f"{s} {100 * v:.1f}" for s, v in summary.reported[task].items())
        left = f" ({chosen.missing} runs missing)" if chosen.missing else ""
        say(f"{task}: selected {chosen.key} (selection {100 * (chosen.score or 0):.1f}, seeds "
            f"{chosen.seeds}){left}; reported {scores}", markup=False)  # fmt: skip
    if not cfg.dry_run:
        say(f"runs: {summary.folder}", markup=False)
    return 0
