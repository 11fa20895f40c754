"""`neobench study run|status|table`: many models under one protocol, from one study file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from neobench.cli import commands
from neobench.cli.output import print_listing, say
from neobench.cli.report import cmd_table

if TYPE_CHECKING:
    from neobench.study.plan import Plan


def cmd_study_run(cfg: commands.StudyRunCommand) -> int:
    """run a study's pending jobs (or --dry-run: print its plan)"""
    from neobench.core.errors import NeobenchError
    from neobench.study import canary, estimate, launchers, lock, report, store
    from neobench.study.plan import build_plan

    launcher = launchers.launcher(cfg.launcher)
    plan = build_plan(cfg.file, cfg.output)
    found = None
    if cfg.dry_run:
        found = estimate.estimate_plan(plan, estimate.load_calibration(cfg.calibration))
        print_listing(report.plan_listing(plan, store.queues(plan), found))
        _print_sweep(plan)
    for line in report.summary(plan) + (report.estimate_lines(plan, found) if found else []):
        say(line, markup=False)
    for line in report.pilot_lines(plan) if cfg.dry_run else []:
        say(line, markup=False)
    if cfg.canary and cfg.no_canary:
        raise NeobenchError("--canary and --no-canary: choose one.")
    if not cfg.dry_run:
        with lock.runner(plan.study.output, cfg.file):  # one runner per study output
            if plan.pending and canary.wanted(plan, cfg.launcher, cfg.canary, cfg.no_canary):
                canary.run(plan, cfg.launcher, say)
            launcher.run(plan, say, file=cfg.file, wait=cfg.wait)
    return 0


def cmd_study_status(cfg: commands.StudyStatusCommand) -> int:
    """per model and seed: each stage done, running, queued, failed or pending, with its log"""
    from neobench.study import report, store
    from neobench.study.plan import build_plan

    plan = build_plan(cfg.file, cfg.output)
    listed = store.queues(plan)
    print_listing(report.status_listing(plan, listed))
    _print_sweep(plan)
    for line in report.summary(plan):
        say(line, markup=False)
    for line in report.failures(plan, listed):
        say(f"failed: {line}", markup=False)
    return 0


def cmd_study_table(cfg: commands.StudyTableCommand) -> int:
    """the study's table (with intervals where units were saved), or its GLUE table"""
    from neobench.core import results
    from neobench.core.errors import NeobenchError
    from neobench.study import plan as plans

    plan = plans.build_plan(cfg.file, cfg.output)
    if cfg.glue or plan.study.eval is None:  # a study of GLUE runs only has no other table
        if plan.study.glue is None:
            raise NeobenchError(
                f"study table --glue: {cfg.file} has no glue section. Leave out --glue for its "
                "MTEB table."
            )
        given = plans.glue_table_inputs(plan.study, plan.jobs)
        page = _page(cfg, plan.study.output / plans.GLUE_PAGE)
        glue = commands.TableCommand(**given, glue=True, ci=True, format=cfg.format, out=cfg.out,
                                     html=page)  # fmt: skip
        return cmd_table(glue)
    _print_sweep(plan)
    given = plans.table_inputs(plan.study, plan.jobs)
    units = any(results.has_units(folder) for folder in results.run_folders(plan.study.output))
    page = _page(cfg, plan.study.output / plans.PAGE_FILE)
    table = commands.TableCommand(**given, ci=units, format=cfg.format, out=cfg.out, html=page)
    return cmd_table(table)


def _page(cfg: commands.StudyTableCommand, default: Path) -> str:
    """Where the page goes: --html, else beside the table (--out's name as .html), else the
    study's own page file."""
    return cfg.html or str(Path(cfg.out).with_suffix(".html") if cfg.out else default)


def _print_sweep(plan: Plan) -> None:
    """The sweep's points and their dev metrics, for a study that has a sweep."""
    from neobench.study import report

    found = report.sweep_listing(plan)
    if found is not None:
        print_listing(found)
