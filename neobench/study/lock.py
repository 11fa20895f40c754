"""One runner per study: `study run` holds OUTPUT/neobench_runner.lock, an operating-system lock
naming its holder (core/flock.py; behaviour: docs/studies.md, "Launchers", "One runner per study").
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

from neobench.core import flock
from neobench.core.errors import NeobenchError

logger = logging.getLogger(__name__)

LOCK = "neobench_runner.lock"


@contextlib.contextmanager
def runner(output: Path, file: str) -> Iterator[None]:
    """Hold the study's lock for the block; refused (NeobenchError) while another runs it."""
    created = not output.exists()
    output.mkdir(parents=True, exist_ok=True)
    path = output / LOCK
    try:
        held = flock.acquire(path)
    except flock.Unsupported as error:
        raise NeobenchError(
            f"{error}, so two runners of one study could not be told apart. Give the study an "
            "--output on a local or NFS file system."
        ) from None
    except flock.Held as busy:
        raise NeobenchError(_held_message(path, busy.holder, file)) from None
    if (gone := held.previous) is not None:
        logger.warning("%s: taking over the lock of a runner that is gone (%s)", path, gone)
    try:
        yield
    finally:
        flock.release(held)  # a runner waiting on this file retries
        if created:  # a run refused before any work leaves no folder behind
            with contextlib.suppress(OSError):
                output.rmdir()  # only when empty


def _held_message(path: Path, holder: dict | None, file: str) -> str:
    if holder is None:
        who = "another `neobench study run` (starting at this moment)"
    else:
        who = f"another `neobench study run` ({flock.describe(holder)})"
    return (
        f"this study is being run by {who}: its jobs are not started twice. Follow it with "
        f"`neobench study status {file}`, or run again once it has ended (its lock, {path}, "
        "ends with its process)."
    )
