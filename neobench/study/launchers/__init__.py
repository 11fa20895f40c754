"""Where a study's jobs run: the registry of launchers, by name (adding one: docs/architecture.md,
"Adding things"). Each is one module, imported only when a study names it, with:

    run(plan, tell, *, file, wait)  run or submit the pending jobs; ``tell(text, markup=True)``
                                    says what happens; ``wait`` (a queue) blocks until they end
    queue()                         its scheduler's queue, job id -> state ({} when none)
    job_state(rec, listed)          running | queued | failed for a launched, not-done job
    why(plan, job, rec)             for a failed job: how it ended and the log line saying why
    TITLE, CANCEL                   its name in a message, how its jobs are stopped
"""

from __future__ import annotations

import importlib
import signal
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from neobench.core.errors import NeobenchError, unknown

if TYPE_CHECKING:
    from neobench.study.plan import Job

# name -> (its module, absolute or relative to this package; what `--launcher NAME` does)
LAUNCHERS: dict[str, tuple[str, str]] = {
    "local": (".local", "one after another, on this machine"),
    "slurm": (".slurm", "submitted through submitit, with afterok dependencies"),
}


def launcher_help() -> str:
    """The --launcher flag's help: every launcher and what it does."""
    each = " | ".join(f"{name} ({what})" for name, (_, what) in LAUNCHERS.items())
    return f"where the jobs run: {each}"


def launcher(name: str) -> ModuleType:
    """The module of the launcher ``name``; an unknown name is refused with the closest ones."""
    if name not in LAUNCHERS:
        raise NeobenchError(unknown("--launcher value", name, LAUNCHERS))
    return importlib.import_module(LAUNCHERS[name][0], __name__)


def progress(tell: Callable[..., None]) -> Callable[[Job, str], None]:
    """The ``on_job(job, what)`` callback of a run: each job started or submitted, its log."""

    def on_job(job: Job, what: str) -> None:
        if what != "done":
            tell(f"{job.key}: {what} (log: {job.log})", markup=False)

    return on_job


def signalled(returncode: int | None) -> str | None:
    """The signal a job's exit code names, in words, or None: a negative code is the kernel's
    word (killed by it, no handler ran), 128 + N the command's own (it stopped on signal N and
    said so by its exit code, as a shell does: 130 for Ctrl-C, 143 for SIGTERM)."""
    if returncode is None:
        return None
    if returncode < 0:
        return f"killed by {signal_name(-returncode)}"
    if returncode - 128 in _SIGNALS:
        return f"stopped by {signal_name(returncode - 128)}"
    return None


def signal_name(signum: int) -> str:
    """SIGINT, SIGTERM, ...; "signal N" for a number this platform does not name."""
    return signal.Signals(signum).name if signum in _SIGNALS else f"signal {signum}"


_SIGNALS = {s.value for s in signal.Signals}
