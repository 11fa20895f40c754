"""The `neobench` command: the parser (flags from the config dataclasses, through flags.py), the
dispatch to each command group's handler, and the error handling."""

from __future__ import annotations

import argparse
import logging
import signal
import sys

from rich.logging import RichHandler
from rich.markup import escape

from neobench._version import __version__
from neobench.bench.config import BenchGpuCommand
from neobench.cli import commands, flags
from neobench.cli.bench import cmd_bench_gpu
from neobench.cli.data import (
    cmd_cache,
    cmd_check,
    cmd_ls,
    cmd_prefetch,
    cmd_validate,
    cmd_verify,
)
from neobench.cli.examples import EXAMPLES
from neobench.cli.glue import cmd_glue
from neobench.cli.output import console, say
from neobench.cli.progress import silence_libraries
from neobench.cli.publish import cmd_publish
from neobench.cli.report import cmd_compare, cmd_overlap, cmd_plan, cmd_table
from neobench.cli.reproduce import cmd_reproduce
from neobench.cli.run import cmd_eval, cmd_finetune
from neobench.cli.study import cmd_study_run, cmd_study_status, cmd_study_table
from neobench.core.errors import NeobenchError, os_error_message
from neobench.protocol import config
from neobench.publishing.config import PublishCommand
from neobench.reproduction.config import ReproduceCommand

# Every command: its words, the dataclass its flags come from, its handler (whose docstring is
# the command's one-line help) and its example. bench and data only group their sub-commands.
COMMANDS: list[flags.Command] = [
    (("eval",), config.EvalConfig, cmd_eval, EXAMPLES["eval"]),
    (("bench", "gpu"), BenchGpuCommand, cmd_bench_gpu, EXAMPLES["bench"]),
    (("cache",), commands.CacheCommand, cmd_cache, EXAMPLES["cache"]),
    (("data", "prefetch"), commands.PrefetchCommand, cmd_prefetch, EXAMPLES["prefetch"]),
    (("data", "verify"), commands.VerifyCommand, cmd_verify, EXAMPLES["verify"]),
    (("data", "check"), commands.DataCheckCommand, cmd_check, EXAMPLES["check"]),
    (("finetune",), config.FinetuneConfig, cmd_finetune, EXAMPLES["finetune"]),
    (("reproduce",), ReproduceCommand, cmd_reproduce, EXAMPLES["reproduce"]),
    (("glue",), commands.GlueCommand, cmd_glue, EXAMPLES["glue"]),
    (("table",), commands.TableCommand, cmd_table, EXAMPLES["table"]),
    (("compare",), commands.CompareCommand, cmd_compare, EXAMPLES["compare"]),
    (("plan",), config.PlanOptions, cmd_plan, EXAMPLES["plan"]),
    (("overlap",), commands.OverlapCommand, cmd_overlap, EXAMPLES["overlap"]),
    (("publish",), PublishCommand, cmd_publish, EXAMPLES["publish"]),
    (("ls",), commands.LsCommand, cmd_ls, EXAMPLES["ls"]),
    (("validate",), None, cmd_validate, EXAMPLES["validate"]),
    (("study", "run"), commands.StudyRunCommand, cmd_study_run, EXAMPLES["study"]),
    (("study", "status"), commands.StudyStatusCommand, cmd_study_status, EXAMPLES["study"]),
    (("study", "table"), commands.StudyTableCommand, cmd_study_table, EXAMPLES["study"]),
]
# A group word: the metavar of its sub-commands, its help and its example.
GROUPS = {
    "bench": ("WHAT", "the GPU path's checks on this machine", None),
    "data": ("ACTION", "training and eval data: prefetch, verify, check", EXAMPLES["data"]),
    "study": ("ACTION", "many models under one protocol: run, status, table", EXAMPLES["study"]),
}


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
    parser = argparse.ArgumentParser(
        prog="neobench",
        description="Fine-tune and evaluate text encoders under one recorded protocol.",
        epilog=EXAMPLES["main"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"neobench {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log library details")
    flags.add_commands(parser, COMMANDS, GROUPS)
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
    """SIGTERM (scancel, preemption, `kill`) or SIGUSR2 (Slurm's notice before a time limit),
    raised where the process is, so the clean-up of Ctrl-C runs (cards marked interrupted, staging
    folders removed). A fine-tune stops at a step end instead (neobench/train/stop.py)."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__()
        self.signum = signum


def _on_signal(signum: int, frame: object) -> None:
    # The first signal ends the run; a repeat (under Slurm the notice comes from slurmstepd and
    # from the job's wrapper) must not cut its clean-up short. `main` restores the handlers.
    for ending in ENDING:
        signal.signal(ending, signal.SIG_IGN)
    raise Terminated(signum)


# The signals that end a run cleanly (SIGUSR2 does not exist on Windows).
ENDING = tuple(s for s in (signal.SIGTERM, getattr(signal, "SIGUSR2", None)) if s is not None)


def main(argv: list[str] | None = None, *, then_ignore: bool = False) -> int:
    """The command line. ``then_ignore`` (the process's own entry point, neobench/__main__.py):
    SIGTERM and SIGUSR2 are ignored from the run's end on, instead of given back their default
    action (which would kill the process in the instant before it exits with its code)."""
    previous = {signum: signal.getsignal(signum) for signum in ENDING}
    for signum, handler in previous.items():
        if handler is signal.SIG_DFL:  # an embedding application's own handler is left alone
            signal.signal(signum, _on_signal)
    try:
        return _run(argv)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_IGN if then_ignore else handler)


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
        # A file-system failure no check foresaw: one line naming the path (-v logs the traceback).
        logging.getLogger(__name__).debug("unexpected OS error", exc_info=True)
        say(f"[bold red]error:[/] {escape(os_error_message(error))}")
        return 1
    except KeyboardInterrupt as stop:
        if isinstance(stop, Terminated):
            say(
                f"terminated ({signal.Signals(stop.signum).name}): finished tasks are saved; "
                "re-run the same command to resume."
            )
            return 128 + stop.signum
        say("interrupted: finished tasks are saved; re-run the same command to resume.")
        return 130


if __name__ == "__main__":
    sys.exit(main())
