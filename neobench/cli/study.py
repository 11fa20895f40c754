"""`neobench study run|status|table`: many models under one protocol, from one study file."""

from __future__ import annotations

from neobench.cli import commands
from neobench.cli.output import print_listing, say
from neobench.cli.report import cmd_table


def cmd_study_run(cfg: commands.StudyRunCommand) -> int:
    """run a study's pending jobs (or --dry-run: print its plan)"""
    from neobench.core.errors import check_choice
    from neobench.study import launch, report, slurm
    from neobench.study.plan import Job, build_plan

    check_choice("--launcher", cfg.launcher, commands.LAUNCHERS)
    plan = build_plan(cfg.file, cfg.output)
    if cfg.dry_run:
        print_listing(report.plan_listing(plan, report.slurm_queue(plan)))
    for line in report.summary(plan):
        say(line, markup=False)
    if cfg.dry_run:
        return 0

    def started(job: Job, what: str) -> None:
        if what != "done":
            say(f"{job.key}: {what} (log: {job.log})", markup=False)

    if cfg.launcher == "local":
        ran = launch.run_local(plan, started)
        say(f"[green]done[/]: {len(ran)} job(s) ran; table: {plan.job('table').output}")
        return 0
    submitted = slurm.submit(plan, started)
    say(f"{len(submitted)} job(s) submitted; `neobench study status {cfg.file}` follows them.")
    if cfg.wait:
        failed = slurm.wait(plan, plan.pending)
        if failed:
            raise slurm.failed_message(plan, failed)
        say(f"[green]done[/]: every job ended; table: {plan.job('table').output}")
    return 0


def cmd_study_status(cfg: commands.StudyStatusCommand) -> int:
    """per model and seed: each stage done, running, queued, failed or pending, with its log"""
    from neobench.study import report
    from neobench.study.plan import build_plan

    plan = build_plan(cfg.file, cfg.output)
    print_listing(report.status_listing(plan, report.slurm_queue(plan)))
    for line in report.summary(plan):
        say(line, markup=False)
    return 0


def cmd_study_table(cfg: commands.StudyTableCommand) -> int:
    """the study's table (with intervals where units were saved)"""
    from neobench.study.plan import build_plan, table_inputs

    plan = build_plan(cfg.file, cfg.output)
    given = table_inputs(plan.study, plan.jobs)
    units = next(plan.study.output.glob("results/**/predictions/*.units.json"), None)
    table = commands.TableCommand(**given, ci=units is not None, format=cfg.format, out=cfg.out)
    return cmd_table(table)
