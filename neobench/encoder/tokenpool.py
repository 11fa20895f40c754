"""Tokenizer processes: pieces of chunks tokenised by forked copies of this process, in order.

Processes, because turning the fast tokenizer's encodings into Python lists holds the GIL: threads
stop scaling at about one core. Each runs ``preprocess`` on a piece and sends back flat arrays
(tokens.py ``Flat``). Fork, because a worker needs the input module exactly as it is here, and
pickling a SentenceTransformer would carry its weights: a forked child shares memory copy-on-write,
starts in milliseconds and touches only the tokenizer and numpy, never torch's thread pools or
CUDA. Without fork, a thread tokenises (``resolve_workers``). ``close()`` terminates the workers;
they ignore Ctrl-C and Slurm's notice (the parent's to handle), end quietly at SIGTERM, and die
with a parent that dies uncleanly (daemonic; SIGTERM via prctl when forked from the main thread).
"""

from __future__ import annotations

import ctypes
import gc
import logging
import multiprocessing as mp
import os
import pickle
import queue
import signal
import threading
import traceback
import warnings
from typing import Any

from neobench.core.errors import NeobenchError, RunFailed
from neobench.encoder.tokens import Flat, flat_tokens

logger = logging.getLogger(__name__)

PARALLELISM = "TOKENIZERS_PARALLELISM"
PR_SET_PDEATHSIG = 1  # linux/prctl.h
POLL_SECONDS = 0.5  # how often a wait for a result checks that the workers are alive
# Signals whose handlers a forked worker replaces before it takes them (see TokenizePool).
PARENTS_SIGNALS = {signal.SIGTERM, *([signal.SIGUSR2] if hasattr(signal, "SIGUSR2") else [])}


def cores() -> int:
    """CPU cores this process may run on (its affinity mask, e.g. a Slurm allocation)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def resolve_workers(setting: int | str) -> int:
    """``auto``: one tokenizer process per core available; a number: that many. 1 (or no fork
    on this system) means no processes: a thread of this process tokenises."""
    text = str(setting).strip().lower()
    if text != "auto" and not (text.isdigit() and int(text) >= 1):
        raise NeobenchError(
            f"--tokenize-workers {setting}: must be auto or a positive number of processes "
            "(1: tokenise in a thread of this process)."
        )
    workers = cores() if text == "auto" else int(text)
    if workers > 1 and "fork" not in mp.get_all_start_methods():
        logger.info(
            "no fork on this system: tokenising in a thread instead of %d processes", workers
        )
        return 1
    return workers


class WorkerFailed(RunFailed):
    """A tokenizer process died (killed, out of memory) or could not send its result."""


class TokenizePool:
    """``workers`` forked processes that tokenise pieces of texts; ``result`` returns them by the
    job number ``submit`` gave, whatever order they finish in."""

    def __init__(self, model: Any, workers: int) -> None:
        context = mp.get_context("fork")
        self._jobs: Any = context.Queue()  # (job, texts, prompt)
        self._results: Any = context.Queue()  # (job, Flat | None | _Failure)
        self._arrived: dict[int, Any] = {}
        self._wanted: set[int] = set()
        self._next = 0
        self._lock = threading.Lock()  # submit/result may be called from a feeder thread
        self.closed = False
        # Only a child forked from the main thread may ask to die with it (else: with the thread).
        parent = os.getpid() if threading.current_thread() is threading.main_thread() else None
        self.processes = [
            context.Process(
                target=_serve,
                args=(model, self._jobs, self._results, parent),
                name=f"neobench-tokenize-{i}",
                daemon=True,
            )
            for i in range(workers)
        ]
        with _configured_parallelism(), warnings.catch_warnings():
            # Python 3.12+ warns about forking a threaded process; a child runs tokenizer, numpy.
            warnings.simplefilter("ignore", DeprecationWarning)
            # Frozen, the parent's objects are never written by a child's garbage collector: their
            # pages stay shared instead of being copied per worker.
            gc.freeze()
            # A child inherits the CLI's handlers (raise Terminated): the signals that end a run
            # stay blocked across the fork until the child has its own (_serve).
            blocked = signal.pthread_sigmask(signal.SIG_BLOCK, PARENTS_SIGNALS)
            try:
                for process in self.processes:
                    process.start()
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
                gc.unfreeze()

    def submit(self, texts: list[str], prompt: str | None) -> int:
        with self._lock:
            job = self._next
            self._next += 1
            self._wanted.add(job)
        self._jobs.put((job, texts, prompt))
        return job

    def result(self, job: int) -> Flat | None:
        """The job's tokens (None: not the plain case, take the stock path); raises what the
        worker raised, or WorkerFailed if a worker died."""
        # Checked on every call: survivors may take a dead worker's share, and a worker gone
        # (out of memory) is a failing machine to hear about, not a silently slower run.
        self._check_alive()
        while job not in self._arrived:
            try:
                done, out = self._results.get(timeout=POLL_SECONDS)
            except queue.Empty:
                self._check_alive()
                continue
            if done in self._wanted:  # else: a job of an abandoned request
                self._arrived[done] = out
        self._wanted.discard(job)
        out = self._arrived.pop(job)
        if isinstance(out, _Failure):
            raise out.error()
        return out

    def forget(self) -> None:
        """Drop every job not collected yet (a request abandoned by an exception)."""
        with self._lock:
            self._wanted.clear()
            self._arrived.clear()

    def _check_alive(self) -> None:
        dead = [p for p in self.processes if p.exitcode is not None]
        if dead:
            codes = ", ".join(f"{p.name} exit code {p.exitcode}" for p in dead)
            self.close()
            raise WorkerFailed(
                f"a tokenizer process ended unexpectedly ({codes}); if it ran out of memory, "
                "use fewer with --tokenize-workers N (1: tokenise in this process)."
            )

    def close(self, wait: bool = True) -> None:
        """Terminate the workers (they hold nothing to save); idempotent. With ``wait``, return
        once they have ended (tens of ms each); without, multiprocessing reaps them later."""
        if self.closed:
            return
        self.closed = True
        alive = [p for p in self.processes if p.exitcode is None]
        for process in alive:
            process.terminate()
        for process in alive if wait else ():
            process.join()
        for q in (self._jobs, self._results):
            q.cancel_join_thread()  # do not block exit on data nobody will read
            q.close()


class _configured_parallelism:
    """While workers fork: TOKENIZERS_PARALLELISM=false, unless the user set it. tokenizers'
    at-fork hook then leaves the child alone (no warning), and the child tokenises serially."""

    def __enter__(self) -> None:
        self._set = PARALLELISM not in os.environ
        if self._set:
            os.environ[PARALLELISM] = "false"

    def __exit__(self, *exc: object) -> None:
        if self._set:
            os.environ.pop(PARALLELISM, None)


class _Failure:
    """An exception in a worker, carried back: itself if it pickles, else its text."""

    def __init__(self, error: BaseException) -> None:
        self.text = "".join(traceback.format_exception(error))
        try:
            pickle.loads(pickle.dumps(error))
            self.original: BaseException | None = error
        except Exception:
            self.original = None
        self.name = type(error).__name__

    def error(self) -> BaseException:
        error = self.original or RuntimeError(f"{self.name} in a tokenizer process")
        error.add_note(f"in a tokenizer process:\n{self.text}")
        return error


def _serve(model: Any, jobs: Any, results: Any, parent: int | None) -> None:
    """A worker's loop (in the child): jobs in, flat tokens (or the failure) out."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    # SIGTERM (close(), the parent's death, scancel) ends a worker quietly: the inherited
    # handler would raise Terminated and print a traceback. Slurm's notice is the parent's.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "SIGUSR2"):
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, PARENTS_SIGNALS)
    os.environ[PARALLELISM] = "false"  # one core each; the processes are the parallelism
    if parent is not None:
        _die_with(parent)
    while True:  # until close() terminates the process
        job, texts, prompt = jobs.get()
        try:
            out: Any = flat_tokens(model, texts, prompt)
        except Exception as error:
            out = _Failure(error)
        results.put((job, out))


def _die_with(parent: int) -> None:
    """Linux: SIGTERM when the parent's main thread ends (a killed parent included)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: daemonic children still end with the parent
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(0)
