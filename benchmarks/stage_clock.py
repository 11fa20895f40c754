"""The stage clock of the host benchmarks (host_pipeline.py, scale_rehearsal.py): where an
evaluation's host time goes, split by the stages neobench marks (neobench/core/stages.py).

A running clock splits the main thread's wall time exclusively (a nested stage pauses the outer
one), so the stages add up to it; other threads' work is ``busy`` seconds, reported beside it.

mteb's scoring and loading are measured by mteb's own phase record: every result mteb returns
holds it (``TaskResult.evaluation_phases``: name, start, end). After each ``mteb.evaluate`` call the
clock lays the record over its timeline (``mteb_phases``): the time a phase spans in which no
stage of neobench's ran inside it goes to the phase's stage, as if the phase had been a stage.
mteb's metric computations outside its phases (legacy clustering's V-measure, STS's
correlations, pair classification's thresholds) stay in the stage around the call.
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
        # The main thread's timeline since the last mteb call was placed: [stack, start, end,
        # cpu seconds, the stage it counts for] per stretch between two stage changes.
        self._spans: list[list[Any]] = []
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
        self._advance()
        self._stack.append(name)
        self.counts[name] += 1
        try:
            yield
        finally:
            self._advance()
            self._stack.pop()

    def _advance(self) -> None:
        """Count the time since the last stage change for the innermost stage."""
        # time.monotonic: the clock mteb's phase record is kept by
        now, cpu = time.monotonic(), time.thread_time()
        if self._stack:
            top = self._stack[-1]
            self.seconds[top] += now - self._since
            self.cpu_seconds[top] += cpu - self._cpu_since
            self._spans.append([tuple(self._stack), self._since, now, cpu - self._cpu_since, top])
        self._since, self._cpu_since = now, cpu

    def mteb_phases(self, phases: list[dict[str, Any]], since: float) -> None:
        """Lay the phase record of one task's ``mteb.evaluate`` call, called at ``since``
        (``time.monotonic()``) from the stage running now, over the timeline: where a phase's
        stage (MTEB_STAGES) spans time that stage held as the innermost, that time is the
        phase's. A nested phase wins over the one around it, as a nested stage does. mteb keeps
        phases in seconds from its first one, which starts after the call's own checks (its
        result cache, the task's superseded flag): the placement is early by that much."""
        if threading.get_ident() != self._thread:
            return
        self._advance()
        around = tuple(self._stack)
        spans = [s for s in self._spans if s[0] == around and s[2] > since]
        for phase in sorted(phases, key=lambda p: (p["start"], -p["end"])):
            target = mteb_stage(str(phase["name"]))
            if target is None:
                continue
            self.counts[target] += 1
            spans = [piece for span in spans for piece in self._claim(span, since, phase, target)]
        self._spans.clear()  # the next call starts later: nothing before now is placed again

    def _claim(
        self, span: list[Any], since: float, phase: dict[str, Any], target: str
    ) -> list[list[Any]]:
        """``span`` cut at the phase's ends, the part inside counted for ``target``."""
        stack, start, end, cpu, holder = span
        low, high = max(start, since + phase["start"]), min(end, since + phase["end"])
        if high <= low:
            return [span]
        wall = end - start
        pieces = []
        for a, b, who in ((start, low, holder), (low, high, target), (high, end, holder)):
            if b > a:
                pieces.append([stack, a, b, cpu * (b - a) / wall, who])
        moved, moved_cpu = high - low, cpu * (high - low) / wall
        self.seconds[holder] -= moved
        self.cpu_seconds[holder] -= moved_cpu
        self.seconds[target] += moved
        self.cpu_seconds[target] += moved_cpu
        return pieces

    def busy(self, name: str, seconds: float) -> None:
        with self._lock:
            self.busy_seconds[name] += seconds
            self.counts[name] += 1

    def running(self) -> contextlib.AbstractContextManager[Any]:
        """Make this the clock neobench's stages report to (``stages.running``)."""
        return stages.running(self)


def mteb_stage(phase: str) -> str | None:
    """The stage an mteb phase counts as; None for a phase left to the stage around it."""
    return MTEB_STAGES.get(phase) or next(
        (s for prefix, s in MTEB_PREFIX_STAGES.items() if phase.startswith(prefix)), None
    )
