"""Every replacement of a library's attribute: one registry (PATCHES). Each patch declares the
library versions its equality test passed on (``verified``) and is in force only on those, and
only inside `applied` blocks, which nest and may run in threads. Gate, record and proof:
docs/architecture.md, "The boundary with the libraries"; the gains: docs/performance.md,
"Library patches".
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import logging
import os
import threading
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from neobench.core.errors import NeobenchError, shipped, unknown

logger = logging.getLogger(__name__)

ENV = "NEOBENCH_PATCHES"

# (owner, attribute name, replacement): what a patch sets for the length of a block.
Change = tuple[Any, str, Any]


@dataclass(frozen=True)
class Patch:
    """One replacement, as the registry declares it."""

    library: str  # the distribution whose attribute is replaced (a key of TESTED)
    replaces: str  # the attribute(s), as the library names them
    why: str  # what the library's own path costs, in one sentence
    gain: str  # what it saves on a whole MTEB(eng, v1) run, as measured (docs/performance.md)
    # The library versions its equality test passed on (a PEP 440 range); off on any other.
    verified: str
    # The test that proves it changes no score or file (tests/<file>.py::<test>).
    test: str
    # Returns the changes for a block (its arguments: `applied`'s); None for a patch that
    # replaces a step without setting an attribute (its code asks `on(name)`).
    changes: Callable[..., Iterable[Change]] | None = None


def _column_changes() -> list[Change]:
    from neobench.compat import datasets

    return datasets.column_changes()


def _prediction_changes(tasks: list[Any], kept: dict[str, Any] | None = None) -> list[Change]:
    from neobench.compat import mteb

    return mteb.prediction_changes(tasks, kept)


def _unpadded_changes(owner: Any, replacement: Any) -> list[Change]:
    from neobench.compat import transformers

    return transformers.unpadded_changes(owner, replacement)


# Each patch saves at least 2% of a v1 run's host (or GPU) time (docs/performance.md).
PATCHES: dict[str, Patch] = {
    "column-cache": Patch(
        library="datasets",
        replaces="datasets.arrow_dataset.Column.__iter__ and Column.__getitem__",
        why="datasets 5 formats one row per column[i] (~200 us); mteb's undersampling reads "
        "every training label once per experiment, its data loaders every text",
        gain="~946 s of a v1 run (12.5%: 202 us per label read, 191 us per text a data "
        "loader converts), plus ~7,250 s of AmazonPolarity's 36 M label reads",
        verified="==5.2.0",
        test="tests/test_fastdata.py::test_listed_columns_give_datasets_own_values",
        changes=_column_changes,
    ),
    "prediction-json": Patch(
        library="mteb",
        replaces="mteb.abstasks.abstask.AbsTask._save_task_predictions (per task object)",
        why="mteb writes a retrieval task's top-1,000 lists with the pure-Python json.dump, and "
        "the units read the file back; kept in memory instead",
        gain="~195 s of a v1 run (2.6%): 3.66 ms per query x 53,310 retrieval queries",
        verified="==2.26.24",
        test="tests/test_fastdata.py::test_prediction_file_identical_to_mteb_s_writer",
        changes=_prediction_changes,
    ),
    "mteb-texts": Patch(
        library="mteb",
        replaces="mteb._create_dataloaders.create_dataloader's texts (no attribute set: the "
        "adapter reads the plain text case column-wise, compat/mteb.py)",
        why="mteb joins each document's title and text by a dataset.map over the corpus and "
        "formats every row of a data loader, a Python call per text",
        gain="~680 s of a v1 run (9.0%): 19.5 us per document x 33.5 M documents, 7 us "
        "per text of a data loader",
        verified="==2.26.24",
        test="tests/test_fastdata.py::test_document_and_query_texts_equal_mteb_s_loaders",
    ),
    "unpadded-attention": Patch(
        library="transformers",
        replaces="a backbone's forward (per model object) and its config's "
        "_attn_implementation (per packed call)",
        why="packed rows and varlen attention spend no GPU work on padding (models/unpad.py), "
        "in evaluation and in fine-tuning's forwards (train/packing.py)",
        gain="GPU time, not host time: 5-12% of an H100's encode time (bench gpu, "
        "docs/performance.md), off on the CPU by default; fine-tuning: the padding share of a "
        "step's positions, 34-61% on the sample datasets (its GPU time not measured yet)",
        verified=">=5.23.0,<=5.24.0",
        test="tests/test_packing.py::test_packed_losses_and_gradients_equal_padded",
        changes=_unpadded_changes,
    ),
}


def tested_versions() -> dict[str, str]:
    """``constraints/tested.txt`` as {distribution: version}: the exact set the suite ran on."""
    versions = {}
    text = (shipped("constraints") / "tested.txt").read_text(encoding="utf-8")
    for line in text.splitlines():
        requirement = line.split("#", 1)[0].strip()
        if requirement:
            name, _, version = requirement.partition("==")
            versions[_normalized(name)] = version.strip()
    return versions


def _normalized(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return name.strip().lower().replace("_", "-").replace(".", "-")


TESTED: dict[str, str] = tested_versions()


@functools.cache
def installed(name: str) -> str | None:
    """The installed version without a local label (torch's ``+cpu``: the same code as CUDA's),
    None when it is not installed."""
    try:
        return importlib.metadata.version(name).split("+", 1)[0]
    except importlib.metadata.PackageNotFoundError:
        return None


def unverified(name: str) -> str | None:
    """Why patch ``name`` is off on the installed libraries (``mteb 2.27.0 (verified:
    ==2.26.24)``), or None when its library is at a verified version."""
    patch = PATCHES[name]
    version = installed(_normalized(patch.library))
    try:
        inside = version is not None and Version(version) in SpecifierSet(patch.verified)
    except InvalidVersion:
        inside = False
    if inside:
        return None
    return f"{patch.library} {version or 'not installed'} (verified: {patch.verified})"


def untested() -> list[str]:
    """Each patch off for its library's version, as ``patch: library version (verified: ...)``."""
    return [f"{n}: {why}" for n in PATCHES if (why := unverified(n)) is not None]


@dataclass(frozen=True)
class Gate:
    """What the gate decided: the patches in force, and why any are off (None: none is)."""

    names: list[str]
    off: dict[str, Any] | None


def gate() -> Gate:
    """The gate over the registry: ``NEOBENCH_PATCHES`` first, then each patch's verified
    versions. Why patches are off is logged once per process, one warning per patch off for a
    version (the run is slower than measured, its scores the same)."""
    setting = os.environ.get(ENV, "").strip()
    if setting.lower() == "off":
        _log_once(f"library patches off ({ENV}=off): the libraries run as shipped")
        return Gate([], {"why": f"{ENV}=off"})
    names = [] if setting.lower() in ("", "on") else [n.strip() for n in setting.split(",")]
    hint = f"{ENV} takes 'off', or the names of the patches to turn off, separated by commas."
    wrong = [
        unknown(f"library patch in {ENV}", n, PATCHES, hint) for n in names if n not in PATCHES
    ]
    if wrong:
        raise NeobenchError(wrong)
    versions = {n: why for n in PATCHES if (why := unverified(n)) is not None}
    for name, why in versions.items():
        _log_once(f"library patch {name} off: {why}; it runs as shipped (slower, same scores)")
    if names:
        _log_once(f"library patches {', '.join(names)} off ({ENV}): those run as shipped")
    if not versions and not names:
        return Gate(list(PATCHES), None)
    why = [f"{ENV}={setting}"] * bool(names) + ["unverified library versions"] * bool(versions)
    off: dict[str, Any] = {"why": "; ".join(why)}
    if versions:
        off["untested"] = [f"{n}: {why}" for n, why in versions.items()]
    return Gate([n for n in PATCHES if n not in names and n not in versions], off)


def enabled() -> list[str]:
    """The patches in force now (see `gate`)."""
    return gate().names


def on(name: str) -> bool:
    """Whether the declared patch ``name`` is in force (see `enabled`)."""
    if name not in PATCHES:
        raise KeyError(f"{name!r} is not a declared library patch (neobench/compat/patches.py)")
    return name in enabled()


def off_reason() -> dict[str, Any] | None:
    """A run card's ``library_patches_off``: why patches are off (the setting, or each patch
    off for its library's version), None when all are in force."""
    return gate().off


_logged: set[str] = set()


def _log_once(message: str) -> None:
    if message not in _logged:
        _logged.add(message)
        logger.warning(message)


# --- applying --------------------------------------------------------------------------------

_INHERITED = object()  # the owner had no attribute of its own by that name: removed again


@dataclass
class _Through:
    """An instance's property value before (a config's ``_attn_implementation``), set back
    through the property."""

    value: Any


@dataclass
class _Held:
    owner: Any  # referenced while held, so its id() cannot be reused meanwhile
    original: Any
    count: int


_held: dict[tuple[int, str], _Held] = {}
_lock = threading.Lock()


def _original(owner: Any, name: str) -> Any:
    """What to put back: a class's or module's own entry as stored (a classmethod object, not
    the bound method getattr gives, which would bind subclasses' calls to this class); an
    instance's own attribute; or a marker for an inherited one."""
    if isinstance(owner, type | types.ModuleType):
        return vars(owner).get(name, _INHERITED)
    own = getattr(owner, "__dict__", {})
    if name in own:
        return own[name]
    if isinstance(getattr(type(owner), name, None), property):
        return _Through(getattr(owner, name))
    return _INHERITED


def _set(changes: Iterable[Change]) -> list[tuple[int, str]]:
    keys = []
    with _lock:
        for owner, name, replacement in changes:
            key = (id(owner), name)
            held = _held.get(key)
            if held is None:
                _held[key] = _Held(owner, _original(owner, name), 1)
                setattr(owner, name, replacement)
            else:  # a nested block: the replacement set by the first one stays
                held.count += 1
            keys.append(key)
    return keys


def _unset(keys: list[tuple[int, str]]) -> None:
    with _lock:
        for key in reversed(keys):
            held = _held[key]
            held.count -= 1
            if held.count:
                continue
            del _held[key]
            owner, name, original = held.owner, key[1], held.original
            if original is _INHERITED:
                delattr(owner, name)
            elif isinstance(original, _Through):
                setattr(owner, name, original.value)
            else:
                setattr(owner, name, original)


def _changes(name: str) -> Callable[..., Iterable[Change]]:
    changes = PATCHES[name].changes
    if changes is None:
        raise ValueError(f"library patch {name!r} sets no attribute: ask on({name!r})")
    return changes


@contextlib.contextmanager
def applied(name: str, *args: Any) -> Iterator[bool]:
    """The patch ``name`` set for the block when it is in force; yields whether it is."""
    if not on(name):
        yield False
        return
    keys = _set(_changes(name)(*args))
    try:
        yield True
    finally:
        _unset(keys)
