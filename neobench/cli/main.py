"""The `neobench` command: parse flags into a config, call one library function, render it.

Only this module decides how output looks (rich on a terminal, plain whole lines in a log); the
flags come from the config dataclasses (neobench/protocol/config.py, through neobench/cli/flags.py).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from neobench import __version__
from neobench.cli import commands, flags
from neobench.cli.examples import EXAMPLES
from neobench.cli.progress import EvalProgress, StepProgress, silence_libraries
from neobench.core.errors import NeobenchError, os_error_message
from neobench.protocol import config, listing

console = Console(stderr=True)
out = Console()

# data verify's statuses, on a terminal.
STATUS_COLORS = {"ok": "green", "present": "green", "other-revision": "yellow"}
STATUS_COLORS |= dict.fromkeys(("missing", "load-failed"), "red")


def say(text: str, markup: bool = True) -> None:
    """One line on stderr, never wrapped, so a path in it stays whole and can be copied."""
    console.print(text, highlight=False, soft_wrap=True, markup=markup)


def print_listing(found: listing.Listing) -> None:
    """A listing on stdout: on a terminal a table that wraps long names to fit (never an
    ellipsis); in a pipe or a file plain padded columns, as wide as the widest row needs."""
    if out.is_terminal:
        table = Table(title=found.title)
        for column in found.columns:
            table.add_column(column, overflow="fold")
        for row in found.rows:
            table.add_row(*(Text(cell, style=STATUS_COLORS.get(cell, "")) for cell in row))
        out.print(table)
        return
    lines = [found.columns, *found.rows]
    widths = [max(len(cell) for cell in column) for column in zip(*lines, strict=True)]
    out.print(found.title, markup=False, highlight=False, soft_wrap=True)
    for line in lines:
        text = "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        out.print(text.rstrip(), markup=False, highlight=False, soft_wrap=True)


def cmd_eval(cfg: config.EvalConfig) -> int:
    """evaluate an encoder on MTEB"""
    from neobench.evaluate.runner import run_eval

    reporter = EvalProgress(console)
    try:
        summary = run_eval(cfg, reporter)
    finally:
        reporter.stop()
    print_listing(listing.outcomes(summary))
    if summary.run_card:
        say(f"run card: {summary.run_card}", markup=False)
    if summary.texts_requested:
        say(
            f"texts: {summary.texts_requested} requested, {summary.texts_encoded} encoded, "
            f"{summary.texts_requested - summary.texts_encoded} from the embedding cache"
        )
    if summary.failed:
        say(f"[red]{len(summary.failed)} task(s) failed[/]; re-run the same command to retry them.")
        return 1
    return 0


def cmd_finetune(cfg: config.FinetuneConfig) -> int:
    """fine-tune an encoder with the standard recipe"""
    from neobench.train.finetune import finetune
    from neobench.train.seeds import seed_configs

    runs = seed_configs(cfg)  # --seeds: one run per seed, every folder checked first
    if cfg.seeds is not None and not runs:
        say(f"every seed of --seeds {','.join(cfg.seeds)} is complete; nothing to resume.")
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
    return 0


def cmd_bench(cfg: commands.BenchEncodeCommand) -> int:
    """encoding tokens/s of neobench's encoder vs stock encode"""
    from neobench.bench import encode as bench

    out.print(bench.encode_report(cfg), highlight=False, markup=False, soft_wrap=True)
    return 0


def cmd_bench_host(cfg: commands.BenchHostCommand) -> int:
    """host seconds per stage of the eval path, with a null forward pass"""
    from neobench.bench import host as hostbench

    runs = hostbench.run_host_bench(cfg)
    out.print(hostbench.report(runs), highlight=False, markup=False, soft_wrap=True)
    if cfg.json:
        from neobench.core.card_io import write_text_atomic

        write_text_atomic(Path(cfg.json), hostbench.to_json(runs, cfg))
        say(f"wrote {cfg.json}", markup=False)
    return 0


def cmd_cache(cfg: commands.CacheCommand) -> int:
    """the shared embedding cache: size, clear"""
    from neobench.encoder.cache import cache_command

    report = cache_command(cfg.cache_dir, cfg.action)
    for line in report.cleared:
        say(line, markup=False)
    if report.state == "missing":
        say(f"{report.path}: no cache yet (neobench eval creates it)", markup=False)
    elif report.ok:
        size = f"{report.embeddings} embeddings, {report.bytes / 1e6:.1f} MB, checked ok"
        say(f"{report.path}: {size}", markup=False)
    else:
        say(f"[bold red]{report.state}:[/] {escape(f'{report.path}: {report.problem}')}")
        if report.fix:
            say(f"fix: {report.fix}", markup=False)
    if report.aside:
        names = ", ".join(p.name for p in report.aside)
        say(
            f"{len(report.aside)} damaged or outdated cache(s) moved aside, "
            f"{report.aside_mb:.1f} MB: {names} (neobench cache clear deletes them)",
            markup=False,
        )
    return 0 if report.ok else 1


def cmd_prefetch(cfg: commands.PrefetchCommand) -> int:
    """snapshot the benchmark's datasets at mteb's pinned revisions"""
    from neobench.protocol import mirror

    lock = mirror.prefetch_mirror(cfg.benchmark, cfg.tasks, cfg.out, cfg.recipe)
    say(f"{len(lock)} dataset repos in {cfg.out} (lock: {mirror.LOCK_FILE})", markup=False)
    return 0


def cmd_verify(cfg: commands.VerifyCommand) -> int:
    """offline: which tasks are present, missing, and loadable"""
    from neobench.protocol import mirror

    report = mirror.verify_mirror(cfg.dir, cfg.benchmark, cfg.tasks, cfg.recipe, not cfg.no_load)
    print_listing(listing.verified(report))
    say(", ".join(f"{n} {status}" for status, n in report.counts.items()))
    if report.missing:
        say(f"to complete it, on a connected machine: {report.fix}", markup=False)
    return 0 if report.ok else 1


def cmd_table(cfg: commands.TableCommand) -> int:
    """leaderboard table of evaluated models"""
    from neobench.core.card_io import write_text_atomic
    from neobench.report import table as tables
    from neobench.report.render import table as render

    fmt = render.output_format(cfg.format, cfg.out, cfg.plot)
    table = tables.leaderboard(
        cfg.results,
        cfg.benchmark,
        models=cfg.models,
        reference=cfg.reference,
        per_task=cfg.per_task,
        strict=cfg.strict,
        ci=cfg.ci,
        baseline=cfg.baseline,
        resamples=cfg.resamples,
        seed=cfg.seed,
        over=cfg.over,
        zero_shot_only=cfg.zero_shot_only,
    )
    text = {"md": render.to_markdown, "csv": render.to_csv, "latex": render.to_latex}
    if fmt == "rich":
        render.print_rich(table, out)
    elif cfg.out:
        replaced = Path(cfg.out).exists()
        write_text_atomic(Path(cfg.out), text[fmt](table))
        say(f"{'replaced' if replaced else 'wrote'} {cfg.out}", markup=False)
    else:
        out.print(text[fmt](table), markup=False, highlight=False, soft_wrap=True)
    if cfg.plot:
        render.plot(table, Path(cfg.plot))
        say(f"wrote {cfg.plot}", markup=False)
    return 0


def cmd_compare(cfg: commands.CompareCommand) -> int:
    """paired comparison with a baseline: differences, intervals, p-values"""
    from neobench.core.card_io import write_text_atomic
    from neobench.report import compare

    if cfg.out:
        compare.check_out(cfg.out)  # before the work, not after it
    found = compare.compare(
        cfg.results,
        cfg.baseline,
        benchmark=cfg.benchmark,
        models=cfg.models,
        tasks=cfg.tasks,
        resamples=cfg.resamples,
        seed=cfg.seed,
        zero_shot_only=cfg.zero_shot_only,
    )
    if cfg.out:
        write_text_atomic(Path(cfg.out), compare.output_text(found, cfg.out))
        say(f"wrote {cfg.out}", markup=False)
        return 0
    print_listing(listing.Listing(f"compared with {found.baseline}", compare.COLUMNS, [
        compare.cells(r) for r in found.rows
    ]))  # fmt: skip
    for line in [compare.legend(found), *found.notes]:
        say(line, markup=False)
    return 0


def cmd_ls(cfg: commands.LsCommand) -> int:
    """list tasks, profiles, recipes, keys or datasets"""
    print_listing(listing.listing(cfg.what, cfg.recipe, cfg.benchmark))
    return 0


def cmd_validate(cfg: None) -> int:
    """check every shipped recipe, manifest and instruction profile offline"""
    from neobench.protocol.validate import validate_all

    checked, problems = validate_all()
    if problems:
        raise NeobenchError(problems)
    say(f"[green]ok[/]: {checked}")
    return 0


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


# Every command: its words, the dataclass its flags come from, its handler (whose docstring is
# the command's one-line help) and its example. bench and data only group their sub-commands.
COMMANDS: list[flags.Command] = [
    (("eval",), config.EvalConfig, cmd_eval, EXAMPLES["eval"]),
    (("bench", "encode"), commands.BenchEncodeCommand, cmd_bench, EXAMPLES["bench"]),
    (("bench", "host"), commands.BenchHostCommand, cmd_bench_host, EXAMPLES["bench"]),
    (("cache",), commands.CacheCommand, cmd_cache, EXAMPLES["cache"]),
    (("data", "prefetch"), commands.PrefetchCommand, cmd_prefetch, EXAMPLES["prefetch"]),
    (("data", "verify"), commands.VerifyCommand, cmd_verify, EXAMPLES["verify"]),
    (("finetune",), config.FinetuneConfig, cmd_finetune, EXAMPLES["finetune"]),
    (("table",), commands.TableCommand, cmd_table, EXAMPLES["table"]),
    (("compare",), commands.CompareCommand, cmd_compare, EXAMPLES["compare"]),
    (("ls",), commands.LsCommand, cmd_ls, EXAMPLES["ls"]),
    (("validate",), None, cmd_validate, EXAMPLES["validate"]),
    (("study", "run"), commands.StudyRunCommand, cmd_study_run, EXAMPLES["study"]),
    (("study", "status"), commands.StudyStatusCommand, cmd_study_status, EXAMPLES["study"]),
    (("study", "table"), commands.StudyTableCommand, cmd_study_table, EXAMPLES["study"]),
]
# A group word: the metavar of its sub-commands, its help and its example.
GROUPS = {
    "bench": ("WHAT", "throughput measurements", None),
    "data": ("ACTION", "offline mirror: prefetch and verify", EXAMPLES["data"]),
    "study": ("ACTION", "many models under one protocol: run, status, table", EXAMPLES["study"]),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="neobench",
        description="Fine-tune and evaluate text encoders under one recorded protocol.",
        epilog=EXAMPLES["main"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"neobench {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log library details")
    flags.add_commands(parser, COMMANDS, GROUPS)
    return parser


class _PlainFormatter(logging.Formatter):
    """``warning: message``: one line a log file keeps whole (no time or level columns)."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {super().format(record)}"


def _quiet_libraries(verbose: bool) -> None:
    """Logs through rich's handler on a terminal; in a log file as plain lines (StreamHandler
    flushes each), because rich would pad them into columns and wrap them at 80 characters."""
    handler: logging.Handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_PlainFormatter("%(message)s"))
    if console.is_terminal:
        handler = RichHandler(console=console)
    level = logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(message)s", handlers=[handler])
    silence_libraries(verbose)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line. ``finetune`` takes key=value overrides anywhere after the
    command word, also between options (argparse alone stops at the first option)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "finetune":
        stray = [item for item in extra if item.startswith("-") or "=" not in item]
        if stray:
            parser.error(f"unrecognized arguments: {' '.join(stray)}")
        args.overrides = [*args.overrides, *extra]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


class Terminated(KeyboardInterrupt):
    """SIGTERM (Slurm's notice before SIGKILL at a time limit or scancel, `kill`): raised where
    the process is, so the same clean-up as Ctrl-C runs (cards marked interrupted, staging
    folders removed) instead of Python dying without running any `finally`."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated


def main(argv: list[str] | None = None) -> int:
    previous = signal.getsignal(signal.SIGTERM)
    if previous is signal.SIG_DFL:  # an embedding application's own handler is left alone
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return _run(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(argv: list[str] | None) -> int:
    try:
        args = parse_args(argv)
        _quiet_libraries(args.verbose)
        cfg = flags.config_from_args(args.config_class, args) if args.config_class else None
        return args.handler(cfg)
    except NeobenchError as error:
        for problem in error.problems:
            say(f"[bold red]error:[/] {escape(problem)}")
        return error.exit_code
    except OSError as error:
        # The last guard for a file-system failure no check foresaw: one line that names the
        # path, not a traceback (-v logs the traceback).
        logging.getLogger(__name__).debug("unexpected OS error", exc_info=True)
        say(f"[bold red]error:[/] {escape(os_error_message(error))}")
        return 1
    except KeyboardInterrupt as stop:
        how = "terminated (SIGTERM)" if isinstance(stop, Terminated) else "interrupted"
        say(f"{how}: finished tasks are saved; re-run the same command to resume.")
        return 143 if isinstance(stop, Terminated) else 130


if __name__ == "__main__":
    sys.exit(main())
