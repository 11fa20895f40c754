"""`neobench glue`: parse, run the grid, print the selection per task."""

from __future__ import annotations

import json
from pathlib import Path

from neobench.cli.commands import GlueCommand
from neobench.cli.output import say
from neobench.core.card_io import write_text_atomic
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
    if cfg.json and not Path(cfg.json).resolve().parent.is_dir():
        raise NeobenchError(f"--json {cfg.json}: its folder does not exist. Create it first.")
    overrides = parse_overrides(cfg.set)
    if cfg.select_on is not None:
        if overrides.get("select_on", cfg.select_on) != cfg.select_on:
            raise NeobenchError(
                f"--select-on {cfg.select_on} and --set select_on={overrides['select_on']} "
                "disagree. Give one of the two."
            )
        overrides["select_on"] = cfg.select_on
    summary = run_glue(
        cfg.model, cfg.tasks, cfg.output, grid=cfg.grid, seeds=seeds,
        overrides=overrides, recipe=cfg.recipe, data_dir=cfg.data_dir,
        model_name=cfg.model_name, device=cfg.device, dry_run=cfg.dry_run, point=cfg.point,
        trust_remote_code=cfg.trust_remote_code,
        say=lambda line: say(line, markup=False),
    )  # fmt: skip
    for task, chosen in summary.selected.items():
        scores = ", ".join(f"{s} {100 * v:.1f}" for s, v in summary.reported[task].items())
        left = f" ({chosen.missing} runs missing)" if chosen.missing else ""
        say(f"{task}: selected {chosen.key} (selection {100 * (chosen.score or 0):.1f}, seeds "
            f"{chosen.seeds}){left}; reported {scores}", markup=False)  # fmt: skip
    record = summary.record()
    if cfg.dry_run:
        from neobench.study.estimate import glue_estimate

        found = glue_estimate(cfg.model, summary.pending, cfg.calibration)
        for line in found.lines():
            say(line, markup=False)
        record["gpu_hours"] = {"card": found.card or None, "tasks": found.hours}
    else:
        say(f"runs: {summary.folder}", markup=False)
    if cfg.json:
        write_text_atomic(Path(cfg.json), json.dumps(record, indent=2) + "\n")
        say(f"wrote {cfg.json}", markup=False)
    return 0
