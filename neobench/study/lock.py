"""One runner per study: `study run` holds a flock on OUTPUT/neobench_runner.lock (behaviour:
docs/studies.md, "Launchers", "One runner per study"). Over NFS Linux makes flock a record lock,
which closing any handle on the file drops: the holder never opens the file twice.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
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
_BUSY = (errno.EACCES, errno.EAGAIN)


@contextlib.contextmanager
def runner(output: Path, file: str) -> Iterator[None]:
    """Hold the study's lock for the block; refused (NeobenchError) while another runs it."""
    created = not output.exists()
    output.mkdir(parents=True, exist_ok=True)
    path = output / LOCK
    mine = {"host": socket.gethostname(), "pid": os.getpid(), "started": now()}
    handle = _acquire(path, mine, file)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()  # still holding the lock: a runner waiting on this file retries
        os.close(handle)  # releases the lock
        if created:  # a run refused before any work leaves no folder behind
            with contextlib.suppress(OSError):
                output.rmdir()  # only when empty


def _acquire(path: Path, mine: dict, file: str) -> int:
    """The open, locked lock file, its holder written in it."""
    for _ in range(20):
        handle = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(handle)
            if error.errno not in _BUSY:
                raise NeobenchError(
                    f"{path}: this file system cannot lock files ({error.strerror}), so two "
                    "runners of one study could not be told apart. Give the study an --output "
                    "on a local or NFS file system."
                ) from None
            raise NeobenchError(_held_message(path, _holder(path), file)) from None
        # The holder may have unlinked the file between our open and our lock: then this lock
        # is on a file nobody else will open; start again on the one at the path.
        try:
            same = os.fstat(handle).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            os.close(handle)
            continue
        # Read through this handle: no second open of the locked file.
        before = _parse(os.pread(handle, 4096, 0).decode(errors="replace"))
        if before is not None:
            logger.warning("%s: taking over the lock of a runner that is gone (%s)", path, before)
        os.ftruncate(handle, 0)
        os.write(handle, json.dumps(mine).encode())
        return handle
    raise NeobenchError(f"{path}: the study's lock changed hands too often; run again.")


def _holder(path: Path) -> dict | None:
    """The lock's holder; None for an empty or unreadable file (its holder is writing it)."""
    try:
        return _parse(path.read_text())
    except OSError:
        return None


def _parse(text: str) -> dict | None:
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) and {"host", "pid"} <= found.keys() else None


def _held_message(path: Path, holder: dict | None, file: str) -> str:
    if holder is None:
        who = "another `neobench study run` (starting at this moment)"
    else:
        where = "here" if holder["host"] == socket.gethostname() else f"on {holder['host']}"
        since = holder.get("started", "?")
        who = f"another `neobench study run` (pid {holder['pid']} {where}, since {since})"
    return (
        f"this study is being run by {who}: its jobs are not started twice. Follow it with "
        f"`neobench study status {file}`, or run again once it has ended (its lock, {path}, "
        "ends with its process)."
    )
