"""One runner per study output: `study run` holds a lock file in the output folder while it runs
or submits jobs, so a second runner of the same study reports who runs it instead of running
every job again beside it.

The lock names its holder (host, pid, start time). A lock left by a process that no longer exists
on this host (killed with SIGKILL, or its machine rebooted) is taken over, with a warning; one
held on another host cannot be checked from here and is reported with how to clear it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path

from neobench.core.card_io import now
from neobench.core.errors import NeobenchError

logger = logging.getLogger(__name__)

LOCK = "neobench_runner.lock"


@contextlib.contextmanager
def runner(output: Path, file: str) -> Iterator[None]:
    """Hold the study's lock for the block; refused (NeobenchError) while another runs it."""
    created = not output.exists()
    output.mkdir(parents=True, exist_ok=True)
    path = output / LOCK
    mine = {"host": socket.gethostname(), "pid": os.getpid(), "started": now()}
    _acquire(path, mine, file)
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            if json.loads(path.read_text()) == mine:
                path.unlink()
        if created:  # a run refused before any work leaves no folder behind
            with contextlib.suppress(OSError):
                output.rmdir()  # only when empty


def _acquire(path: Path, mine: dict, file: str) -> None:
    for _ in range(2):  # a stale lock is removed once, then taken like a free one
        try:
            handle = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = _holder(path)
            if holder is not None and not _stale(holder):
                raise NeobenchError(_held_message(path, holder, file)) from None
            logger.warning("%s: taking over the lock of a runner that is gone (%s)", path, holder)
            path.unlink(missing_ok=True)
            continue
        with os.fdopen(handle, "w") as out:
            out.write(json.dumps(mine))
        return
    raise NeobenchError(f"{path}: another runner took the study's lock at the same moment.")


def _holder(path: Path) -> dict | None:
    """The lock's holder; None for an empty or unreadable lock (its writer died mid-write)."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and {"host", "pid"} <= found.keys() else None


def _stale(holder: dict) -> bool:
    """Held by a process of this host that no longer exists."""
    if holder["host"] != socket.gethostname():
        return False
    try:
        os.kill(int(holder["pid"]), 0)  # signal 0: an existence check
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _held_message(path: Path, holder: dict, file: str) -> str:
    where = "here" if holder["host"] == socket.gethostname() else f"on {holder['host']}"
    text = (
        f"this study is being run by another `neobench study run` (pid {holder['pid']} {where}, "
        f"since {holder.get('started', '?')}): its jobs are not started twice. Follow it with "
        f"`neobench study status {file}`, or run again once it has ended."
    )
    if where != "here":
        text += f" If that process is gone, delete {path}."
    return text
