"""The stage clock of the host benchmarks (host_pipeline.py, scale_rehearsal.py): where an
evaluation's host time goes, split by the stages neobench marks (neobench/core/stages.py).

A running clock splits the main thread's wall time exclusively (a nested stage pauses the outer
one), so the stages add up to it; other threads' work is ``busy`` seconds, reported beside it.
``MtebPhases`` keeps mteb's own phase record (``mteb.timing.TimingStack``) and also enters the
matching stage, so mteb's scoring is measured by mteb's own phase marks.

The "mteb-phases" patch (neobench/compat/patches.py) sets the class the clock builds
(``mteb_timing_stack``) while the clock runs.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from neobench.core import stages

# mteb phase names -> stages ("Encoding ..." marks only the time around neobench's encoder).
MTEB_STAGES = {
    "Data loading": "load",
    "Dataset transform": "load",
    "Scoring": "scoring",
    "Computing similarity": "scoring",
}
MTEB_PREFIX_STAGES = {"Encoding": "mteb encode call"}


class StageClock:
    """Exclusive wall (and CPU) seconds per stage in the thread that started it, busy seconds
    of workers."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)  # exclusive, main thread
        # The main thread's CPU seconds: what a stage costs with a core to itself (its wall time
        # includes waiting for one on a shared machine).
        self.cpu_seconds: dict[str, float] = defaultdict(float)
        self.busy_seconds: dict[str, float] = defaultdict(float)  # summed over worker threads
        self.counts: dict[str, int] = defaultdict(int)
        self._stack: list[str] = []
        self._since = 0.0  # when the innermost running stage last (re)started
        self._cpu_since = 0.0  # the main thread's CPU time then
        self._thread = threading.get_ident()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if threading.get_ident() != self._thread:  # a worker: its stage is busy time
            start = time.perf_counter()
            try:
                yield
            finally:
                self.busy(name, time.perf_counter() - start)
            return
        now, cpu = time.perf_counter(), time.thread_time()
        if self._stack:
            self.seconds[self._stack[-1]] += now - self._since
            self.cpu_seconds[self._stack[-1]] += cpu - self._cpu_since
        self._stack.append(name)
        self.counts[name] += 1
        self._since, self._cpu_since = now, cpu
        try:
            yield
        finally:
            now, cpu = time.perf_counter(), time.thread_time()
            ended = self._stack.pop()
            self.seconds[ended] += now - self._since
            self.cpu_seconds[ended] += cpu - self._cpu_since
            self._since, self._cpu_since = now, cpu

    def mteb_timing_stack(self) -> type:
        return mteb_phases(self)

    def busy(self, name: str, seconds: float) -> None:
        with self._lock:
            self.busy_seconds[name] += seconds
            self.counts[name] += 1

    def running(self) -> contextlib.AbstractContextManager[Any]:
        """Make this the clock neobench's stages report to (``stages.running``)."""
        return stages.running(self)


def mteb_phases(clock: StageClock) -> type:
    """A ``mteb.timing.TimingStack`` class whose phases also enter ``clock``'s stages."""
    from mteb.timing import TimingStack

    class MtebPhases(TimingStack):
        def __call__(self, name: str, *args: Any, **kwargs: Any) -> Any:
            inner = super().__call__(name, *args, **kwargs)
            target = MTEB_STAGES.get(name) or next(
                (s for p, s in MTEB_PREFIX_STAGES.items() if name.startswith(p)), None
            )
            if target is None:
                return inner
            return _both(inner, clock.stage(target))

    return MtebPhases


@contextlib.contextmanager
def _both(*contexts: contextlib.AbstractContextManager[Any]) -> Iterator[None]:
    """mteb's phase context, then the clock's stage (mteb's record first, kept as mteb keeps it)."""
    with contextlib.ExitStack() as stack:
        for context in contexts:
            stack.enter_context(context)
        yield
