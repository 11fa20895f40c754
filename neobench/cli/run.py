"""`neobench eval` and `neobench finetune`: the commands that run a model, with live progress."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

from neobench.cli.output import console, print_listing, say
from neobench.cli.progress import EvalProgress, StepProgress
from neobench.protocol import config, listing
from neobench.protocol.tasks import build_registry

if TYPE_CHECKING:
    from neobench.evaluation.outcomes import EvalSummary


def cmd_eval(cfg: config.EvalConfig) -> int:
    """evaluate an encoder on MTEB"""
    build_registry()
    from neobench.evaluation.runner import run_eval

    reporter = EvalProgress(console)
    try:
        summary = run_eval(cfg, reporter)
    finally:
        reporter.stop()
    print_listing(listing.outcomes(summary))
    if summary.run_card:
        say(f"run card: {summary.run_card}", markup=False)
    if summary.texts_requested:
        say(_texts_line(summary), markup=False)
    if summary.failed:
        say(f"[red]{len(summary.failed)} task(s) failed[/]; re-run the same command to retry them.")
        return 1
    return 0


def _texts_line(summary: EvalSummary) -> str:
    """What the encoder did: texts requested and encoded, and where the others came from (with
    the cache off, only from repeats of a text in one request, which are encoded once)."""
    requested, encoded = summary.texts_requested, summary.texts_encoded
    line = f"texts: {requested} requested, {encoded} encoded"
    if summary.embedding_cache is not None:
        return f"{line}, {requested - encoded} from the embedding cache"
    repeats = f", {requested - encoded} repeats encoded once" if requested > encoded else ""
    return f"{line}{repeats} (embedding cache off: nothing read from it or stored in it)"


def cmd_finetune(cfg: config.FinetuneConfig) -> int:
    """fine-tune an encoder with the standard recipe"""
    if cfg.dry_run:
        return _finetune_dry_run(cfg)
    build_registry()  # the saved model's prompts name the benchmarks' tasks
    from neobench.train.finetune import finetune, seed_configs

    runs = seed_configs(cfg)  # --seeds: one run per seed, every folder checked first
    if cfg.seeds is not None and not runs:
        say(f"every seed of --seeds {','.join(cfg.seeds)} is complete; nothing to resume.")
    elif not runs:
        say(f"{cfg.output} holds a complete run; nothing to resume.", markup=False)
    for i, run in enumerate(runs):
        if cfg.seeds is not None:
            say(f"seed {run.seed} ({i + 1}/{len(runs)}): {run.output}", markup=False)
        progress = StepProgress(console)
        try:
            summary = finetune(run, on_step=progress)
        finally:
            progress.stop()
        loss = "n/a" if summary.final_loss is None else f"{summary.final_loss:.4f}"
        say(
            f"[green]done[/]: {summary.steps} steps, final loss {loss}, recipe sha256 "
            f"{summary.recipe_sha256[:12]}. Model: {escape(str(summary.output))}"
        )
        if summary.dev is not None:
            say(
                f"dev MRR@10 {summary.dev:.4f} (held-out slice, mean over datasets; per "
                "dataset in the run card)",
                markup=False,
            )
        if run.report_to == "tensorboard":
            from neobench.train.tracking import logdir

            say(f"TensorBoard: tensorboard --logdir {logdir(summary.output)}", markup=False)
    return 0


def _finetune_dry_run(cfg: config.FinetuneConfig) -> int:
    """Each dataset's heaviest step and its memory per device; nothing trains. Exit 1 when a
    step does not fit the budget even one text at a time (the run would stop there)."""
    from neobench.study.estimate import finetune_estimate

    found, lines, fits = finetune_estimate(cfg)
    print_listing(found)
    for line in lines:
        say(line, markup=False)
    return 0 if fits else 1
