"""Stage marks: where an evaluation's host time goes, seen only by a benchmark's clock.

Code marks its stages with ``with stage("tokenize"):``, one ContextVar read when no clock runs
(always, outside benchmarks), and hands the clock mteb's own phase record of each
``mteb.evaluate`` call (``mteb_phases``). The clock itself and mteb's phase mapping are developer
tooling: benchmarks/stage_clock.py, which makes its clock current with ``running``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, Protocol


class Clock(Protocol):
    """What a clock provides: a timed block per stage, and other threads' work as seconds."""

    def stage(self, name: str) -> contextlib.AbstractContextManager[None]: ...

    def busy(self, name: str, seconds: float) -> None: ...

    def mteb_phases(self, phases: list[dict[str, Any]], since: float) -> None:
        """Place one task's phase record (``TaskResult.evaluation_phases``) of an
        ``mteb.evaluate`` call made at ``since`` (``time.monotonic()``)."""
        ...


_clock: ContextVar[Clock | None] = ContextVar("neobench_stage_clock", default=None)


@contextlib.contextmanager
def running(clock: Clock) -> Iterator[Clock]:
    """Make ``clock`` the one ``stage()`` reports to, in this thread and threads it starts with
    a copied context."""
    token = _clock.set(clock)
    try:
        yield clock
    finally:
        _clock.reset(token)


def stage(name: str) -> contextlib.AbstractContextManager[None]:
    """Time the block as ``name`` when a clock runs; otherwise nothing."""
    clock = _clock.get()
    return clock.stage(name) if clock is not None else contextlib.nullcontext()


def busy(name: str, seconds: float) -> None:
    """Record ``seconds`` of work done outside the main thread (e.g. a tokenizer worker)."""
    clock = _clock.get()
    if clock is not None:
        clock.busy(name, seconds)


@contextlib.contextmanager
def mteb_call() -> Iterator[list[Any]]:
    """Around one task's ``mteb.evaluate`` call: put the results it returned in the yielded list,
    and a running clock places their phase records (mteb's own load, encode and score times)."""
    since, returned = time.monotonic(), []
    yield returned
    clock = _clock.get()
    if clock is not None:
        for result in returned:  # mteb.TaskResult
            clock.mteb_phases(list(result.evaluation_phases or []), since)
