"""Stopping a fine-tune at a step boundary, with a whole checkpoint, when the process is told to
(SIGUSR2 before a time limit; SIGTERM, KillWait seconds before SIGKILL, on scancel, preemption or
requeue). While the trainer runs the signals only raise a flag; the step ends, a checkpoint is
saved and `finetune` raises `Stopped`: ``--resume`` continues from exactly that step
(docs/studies.md, "Launchers").
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType
from typing import Any

from neobench.core.errors import NeobenchError

logger = logging.getLogger(__name__)

# SIGUSR2: Slurm's notice before the time limit (submitit asks for it); SIGTERM: everything else.
SIGNALS = tuple(s for s in (signal.SIGTERM, getattr(signal, "SIGUSR2", None)) if s is not None)


class Stopped(NeobenchError):
    """A fine-tune stopped by a signal after saving a whole checkpoint: resumable. Its exit code
    is the shell's for that signal (128 + its number), so a wrapper can tell it from a failure."""

    def __init__(self, message: str, signum: int, step: int) -> None:
        super().__init__(message)
        self.exit_code = 128 + signum
        self.signum, self.step = signum, step


class GracefulStop:
    """While entered (main thread only): SIGTERM / SIGUSR2 set ``signum`` instead of ending the
    process; `callback()` turns it into "save a checkpoint and stop" at the next step end."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> GracefulStop:
        if threading.current_thread() is threading.main_thread():
            for signum in SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
            # logging from a handler is safe enough here: the handler runs between bytecodes
            logger.warning(
                "%s received: saving a checkpoint at the end of this step, then stopping",
                signal.Signals(signum).name,
            )

    def callback(self) -> Any:
        """A trainer callback: at each step end, when a signal came (on any rank, in a
        distributed run: every rank must stop at the same step), save and stop."""
        from transformers import TrainerCallback

        stop = self

        class StopOnSignal(TrainerCallback):
            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                if _agreed(stop.signum is not None, args) and state.global_step < state.max_steps:
                    control.should_save = True
                    control.should_training_stop = True

        return StopOnSignal()


def _agreed(flag: bool, args: Any) -> bool:
    """``flag`` on any rank, for every rank (one all-reduce of one number per step); the flag
    itself on a single process."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return flag
    import torch

    value = torch.tensor([int(flag)], device=args.device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def name(signum: int) -> str:
    return signal.Signals(signum).name
