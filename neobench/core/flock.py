"""A lock file that names its holder: an operating-system lock (flock) on a file holding the
holder's host, pid and start time, so one process at a time holds it and the lock ends with its
process however that ends (SIGKILL too): a holder that is gone never blocks the next one. Its
users: one runner per study (study/lock.py), one evaluator per task of a run folder
(evaluation/claims.py).

Over NFS Linux makes flock a record lock, which closing any handle on the file drops: the holder
never opens the file twice. A forked child (the tokenizer processes) closes its copies of the
held handles at once, so a child never keeps a lock its parent has let go of.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import itertools
import json
import os
import socket
from pathlib import Path

from neobench.core.card_io import now

_BUSY = (errno.EACCES, errno.EAGAIN)
_held: set[int] = set()  # the handles this process holds, closed in a forked child
_fork_hook = False


class Held(Exception):
    """Another live process holds the lock; ``holder`` is what its file says (None while that
    process is still writing it)."""

    def __init__(self, path: Path, holder: dict | None) -> None:
        self.path, self.holder = path, holder
        super().__init__(f"{path}: held by {describe(holder)}")


class Unsupported(Exception):
    """The file system cannot lock files (some network and FUSE file systems)."""

    def __init__(self, path: Path, why: str) -> None:
        self.path, self.why = path, why
        super().__init__(f"{path}: this file system cannot lock files ({why})")


@dataclasses.dataclass
class Lock:
    path: Path
    handle: int  # the open, locked file
    previous: dict | None  # the holder a process that is gone left in the file (taken over)


def acquire(path: Path, *, wait: bool = False) -> Lock:
    """Lock ``path`` (created if missing) and write this process in it as the holder. Without
    ``wait``, raises Held while another process holds it; with it, blocks until it is free (a
    signal handler that raises, Ctrl-C's included, ends the wait). A file that cannot be created
    raises OSError; a file system that cannot lock, Unsupported."""
    _register_fork_hook()
    # Each retry follows a holder that let go (waiting: any number of them, in turn).
    for _ in itertools.count() if wait else range(20):
        handle = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BaseException as error:
            os.close(handle)
            if not isinstance(error, OSError):
                raise  # an interrupt while waiting
            if error.errno not in _BUSY:
                with contextlib.suppress(OSError):  # no lock here for anyone: none to keep
                    path.unlink()
                raise Unsupported(path, error.strerror or str(error)) from None
            raise Held(path, holder(path)) from None
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
        mine = {"host": socket.gethostname(), "pid": os.getpid(), "started": now()}
        with contextlib.suppress(OSError):  # a full disk: held all the same, its holder unnamed
            os.ftruncate(handle, 0)
            os.write(handle, json.dumps(mine).encode())
        _held.add(handle)
        return Lock(path, handle, before)
    # Taken and let go twenty times between our open and our lock: someone holds it now.
    raise Held(path, holder(path))


def release(lock: Lock) -> None:
    """Unlink the file while still holding it (a process waiting on it then retries on a new
    one), then close it, which ends the lock."""
    with contextlib.suppress(OSError):
        lock.path.unlink()
    _held.discard(lock.handle)
    os.close(lock.handle)


def holder(path: Path) -> dict | None:
    """The lock's holder as its file names it; None for an empty or unreadable file."""
    try:
        return _parse(path.read_text())
    except OSError:
        return None


def describe(found: dict | None) -> str:
    """``pid 123 here, since <time>`` (or ``on <host>``) of a holder; None: one starting now."""
    if found is None:
        return "a process starting at this moment"
    where = "here" if found["host"] == socket.gethostname() else f"on {found['host']}"
    return f"pid {found['pid']} {where}, since {found.get('started', '?')}"


def _parse(text: str) -> dict | None:
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) and {"host", "pid"} <= found.keys() else None


def _register_fork_hook() -> None:
    global _fork_hook
    if not _fork_hook and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_close_in_child)
        _fork_hook = True


def _close_in_child() -> None:
    """In a forked child: its copies of the held handles closed (the parent's still hold)."""
    for handle in list(_held):
        with contextlib.suppress(OSError):
            os.close(handle)
    _held.clear()
