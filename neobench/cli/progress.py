"""How the CLI shows progress: live rich bars in a terminal, plain flushed lines in a log file
(a rich live display writes nothing to a file until it stops). What each prints, and when:
docs/guide.md, "Progress in a terminal and in a log file".
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

HEARTBEAT_S = 60.0  # eval: a line at least this often while one task runs
STEP_INTERVAL_S = 30.0  # finetune: a line at least this often


def live(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (stderr by default) is a terminal that can show live bars."""
    stream = stream or sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


def clock(seconds: float) -> str:
    """0:01:02 style."""
    seconds = max(0, round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def plain(line: str, stream: TextIO | None = None) -> None:
    """One whole line, flushed now (a log file shows it while the run goes on)."""
    stream = stream or sys.stderr
    stream.write(line + "\n")
    stream.flush()


def _bar(console: Console, name: TextColumn, *after: TextColumn) -> Progress:
    """A started bar: name, bar, k/N, elapsed, then ``after``."""
    columns = (name, BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), *after)
    progress = Progress(*columns, console=console)
    progress.start()
    return progress


def task_line(outcome: Any) -> str:
    score = "" if outcome.main_score is None else f"{outcome.main_score:.4f}"
    timing = f"  ({outcome.seconds:.0f}s)" if outcome.status == "evaluated" else ""
    error = f"  {outcome.error}" if outcome.error else ""
    return f"{outcome.status:>9} {outcome.task:<40} {score:>8}{timing}{error}"


class EvalProgress:
    """The Reporter of `neobench eval`: a live bar, or plain lines with a heartbeat."""

    def __init__(self, console: Console, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.console = console
        self.live = live(console.file)
        self.heartbeat_s = heartbeat_s
        self.total = 0
        self.done = 0
        self.progress: Progress | None = None
        self.bar: Any = None
        self._task: tuple[str, float] | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def start(self, total: int, results_dir: Path) -> None:
        self.total = total
        if not self.live:
            plain(f"results: {results_dir}", self.console.file)
            self._beat = threading.Thread(target=self._heartbeat, daemon=True)
            self._beat.start()
            return
        self.console.print(f"results: {results_dir}", soft_wrap=True, highlight=False)
        self.progress = _bar(self.console, TextColumn("[bold]{task.description}"))
        self.bar = self.progress.add_task("tasks", total=total)

    def task_started(self, task: str) -> None:
        self._task = (task, time.monotonic())
        if self.progress is None:
            plain(f"  started {task} ({self.done + 1}/{self.total})", self.console.file)
        else:
            self.progress.update(self.bar, description=f"running {task}")

    def task_done(self, outcome: Any) -> None:
        self._task = None
        self.done += 1
        if self.progress is None:
            plain(task_line(outcome), self.console.file)
            return
        style = {"cached": "dim", "evaluated": "green", "failed": "red"}[outcome.status]
        self.progress.console.print(
            f"[{style}]{task_line(outcome)}[/]", highlight=False, soft_wrap=True
        )
        self.progress.advance(self.bar)

    def stop(self) -> None:
        self._stop.set()
        if self.progress is not None:
            self.progress.stop()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            running = self._task
            # Only for a task that has been running a while: a quick one gets no heartbeat.
            if running and time.monotonic() - running[1] >= self.heartbeat_s:
                task, since = running
                plain(f"  running {task}: {clock(time.monotonic() - since)}", self.console.file)


class StepProgress:
    """The on_step hook of `neobench finetune`: a live bar, or a plain line every ``every``
    steps or ``interval_s`` seconds (and at the last step)."""

    def __init__(self, console: Console, interval_s: float = STEP_INTERVAL_S) -> None:
        self.console = console
        self.live = live(console.file)
        self.interval_s = interval_s
        self.progress: Progress | None = None
        self.bar: Any = None
        self.last_line = 0.0
        self.started = time.monotonic()

    def __call__(self, entry: dict[str, Any]) -> None:
        step, total = entry["step"], entry.get("max_steps")
        rate = f"{entry['tokens_per_s']:,.0f} tok/s" if entry.get("tokens_per_s") else ""
        if self.live:
            if self.progress is None:
                name, loss = TextColumn("[bold]step"), TextColumn("{task.description}")
                self.progress = _bar(self.console, name, loss)
                self.bar = self.progress.add_task("", total=total)
            description = f"loss {entry['loss']:.4f}  {entry['dataset']}  {rate}"
            self.progress.update(self.bar, completed=step, description=description)
            return
        now = time.monotonic()
        every = max(1, (total or 0) // 50)
        due = step == 1 or step == total or step % every == 0
        if not (due or now - self.last_line >= self.interval_s):
            return
        self.last_line = now
        elapsed = entry.get("elapsed_s", now - self.started)
        eta = f"  ETA {clock(elapsed / step * (total - step))}" if total and step else ""
        plain(
            f"step {step}/{total or '?'}  loss {entry['loss']:.4f}  {entry['dataset']}  {rate}  "
            f"elapsed {clock(elapsed)}{eta}",
            self.console.file,
        )

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def silence_libraries(verbose: bool) -> None:
    """Library logs, warnings and progress bars off (on with -v): the CLI's own lines are what a
    person reads, and a log file should not fill with tqdm frames."""
    libraries = ("mteb", "sentence_transformers", "datasets", "transformers", "huggingface_hub")
    for name in (*libraries, "httpx"):
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.ERROR)
    if verbose:
        return
    warnings.filterwarnings("ignore")
    # Switches each library reads at import, so a command that never uses one (`ls`, `table`)
    # does not import it: tqdm's (mteb's scorers' bars would interleave with rich's), datasets'
    # (the user's 0 wins over disable_progress_bars() too); transformers starts with its bars off
    # when the hub's are. One already imported, or a hub switch the user set otherwise: its call.
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    if "datasets" in sys.modules:
        import datasets

        datasets.disable_progress_bars()
    hub_off = os.environ["HF_HUB_DISABLE_PROGRESS_BARS"].upper() in {"1", "ON", "YES", "TRUE"}
    if "transformers" in sys.modules or not hub_off:
        import transformers

        transformers.utils.logging.disable_progress_bar()
