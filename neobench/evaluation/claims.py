"""One evaluator per task of a run folder: an eval evaluates a task only while it holds the task's
claim, ``neobench/<Task>.lock`` in the run folder (an operating-system lock naming its holder,
core/flock.py, ended with its process however it ends). A second eval of the same run skips the
tasks another one is evaluating, runs the others, then waits for the skipped ones and takes
their results; the two together evaluate each task once. Behaviour: docs/guide.md,
"`neobench eval`" (Two evals of one run).
"""

from __future__ import annotations

import logging
from pathlib import Path

from neobench.core import flock, results
from neobench.core.errors import disk_full

logger = logging.getLogger(__name__)

_unlockable: set[Path] = set()  # run folders already warned about (one warning per folder)


class Claim:
    """The claim of this process on one task of a run folder; a ``with`` block lets it go."""

    def __init__(self, folder: Path, task: str) -> None:
        self.folder, self.task = folder, task
        self.path = Path(folder) / results.CARDS / f"{task}.lock"
        self.holder: dict | None = None  # who holds it, when take() found it held
        self._lock: flock.Lock | None = None

    def take(self, *, wait: bool = False) -> bool:
        """Whether this process holds the claim now. Without ``wait``, False while another
        process holds it (``holder`` says who); with it, blocks until that one lets it go. Where
        no claim can be made (a file system that cannot lock, a claim file that cannot be
        created) the task goes on unclaimed: True, with one warning per run folder."""
        try:
            self._lock = flock.acquire(self.path, wait=wait)
        except flock.Held as busy:
            self.holder = busy.holder
            return False
        except flock.Unsupported as error:
            self._unclaimed(str(error))
        except OSError as error:  # the folder full or gone read-only: the task's write says so
            self._unclaimed(f"{self.path}: cannot be created ({error.strerror})", disk_full(error))
        return True

    def _unclaimed(self, why: str, quiet: bool = False) -> None:
        if self.folder in _unlockable:
            return
        _unlockable.add(self.folder)
        logger.log(
            logging.DEBUG if quiet else logging.WARNING,
            "%s, so tasks are not claimed: a second `neobench eval` of this run started meanwhile "
            "would evaluate them again (same scores; only time is lost)",
            why,
        )

    def who(self) -> str:
        """The holder, as a message names it."""
        return f"another `neobench eval` ({flock.describe(self.holder)})"

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._lock is not None:
            flock.release(self._lock)
            self._lock = None
