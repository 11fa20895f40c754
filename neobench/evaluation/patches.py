"""Attributes of a library replaced while any evaluation needs the replacement.

neobench's shortcuts around mteb and datasets (fastdata's columns, fastqrels' judgements) swap a
class attribute for the duration of a block. Blocks nest and may run in several threads, so the
swap is counted: the first block in sets the replacements, the last one out puts the originals
back; outside every block the library behaves as shipped.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

_INHERITED = object()  # the owner had no attribute of its own by that name (a base class's)


class NestedPatch:
    """``(owner, name, replacement)`` triples set while at least one `active()` block runs."""

    def __init__(self, *changes: tuple[Any, str, Any]) -> None:
        self.changes = changes
        # The owner's own entry, as stored (a classmethod object, not the bound method getattr
        # returns, which set back would bind every subclass's call to this class).
        self.originals = [vars(owner).get(name, _INHERITED) for owner, name, _ in changes]
        self._lock = threading.Lock()
        self._active = 0

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        with self._lock:
            self._active += 1
            if self._active == 1:
                for owner, name, replacement in self.changes:
                    setattr(owner, name, replacement)
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                if self._active == 0:
                    for (owner, name, _), original in zip(
                        self.changes, self.originals, strict=True
                    ):
                        if original is _INHERITED:
                            delattr(owner, name)
                        else:
                            setattr(owner, name, original)
