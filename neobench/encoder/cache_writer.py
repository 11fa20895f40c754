"""New embeddings stored in the cache by a thread of their own, chunk by chunk, while the encoder
goes on.

Storing is checksums and SQLite writes: about 37 µs a 768-dimensional vector (149 s of the main
thread at 4 million documents in `neobench bench scale`), and on a GPU every one of those
seconds is a second the device waits. The encoder hands each finished chunk's rows (a copy:
the caller owns the matrix) to `CacheWriter.submit`; one thread stores them, one transaction
per chunk, with the cache's own `put` (its warnings and degrading unchanged); hashing and
SQLite release the GIL for the bulk of it. `flush` waits until everything submitted is stored,
and the encoder flushes before it returns, so a request's vectors are in the cache before the
next lookup and only one thread uses the connection at a time.

At most ``PENDING`` chunks wait (bounded memory: 2 x 8,192 x dim floats); a producer that gets
ahead waits. An exception in the thread that is not the cache's own (those warn and degrade) is
raised again by the next `submit` or `flush`.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from neobench.core.stages import stage

if TYPE_CHECKING:
    from neobench.encoder.cache import EmbeddingCache

PENDING = 2  # chunks submitted and not yet stored, at most
_STOP = object()


class CacheWriter:
    """One thread storing (keys, vectors) blocks into ``cache`` in submission order."""

    def __init__(self, cache: EmbeddingCache) -> None:
        self.cache = cache
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=PENDING)
        self._error: BaseException | None = None
        context = contextvars.copy_context()  # the stage clock, if one runs
        self._thread = threading.Thread(
            target=context.run, args=(self._run,), name="neobench-cache-writer", daemon=True
        )
        self._thread.start()

    def submit(self, keys: list[bytes], vectors: np.ndarray) -> None:
        """Store ``vectors`` (n, dim) under ``keys`` in the thread; waits while PENDING wait."""
        self._raise()
        with stage("cache insert wait"):
            self._queue.put((keys, vectors))

    def flush(self) -> None:
        """Wait until everything submitted is stored (or failed: raised here)."""
        with stage("cache insert wait"):
            self._queue.join()
        self._raise()

    def close(self) -> None:
        """Flush, then end the thread."""
        try:
            self.flush()
        finally:
            self._queue.put(_STOP)
            self._thread.join()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                if self._error is None:  # after a failure, drain without storing
                    keys, vectors = item
                    with stage("cache insert"):
                        self.cache.put(keys, vectors)
            except BaseException as error:  # raised again in the encoder's thread
                self._error = error
            finally:
                self._queue.task_done()

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise RuntimeError(f"storing embeddings in the cache failed: {error}") from error
