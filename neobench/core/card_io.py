"""A run card on disk: atomic YAML writes, tolerant reads, the typed card <-> mapping conversion,
and the owner record that tells a live run from a dead one (the typed cards: core/cards.py)."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import socket
import typing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import yaml

from neobench.core.errors import NeobenchError, read_yaml


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_card(path: Path, card: dict) -> None:
    """Write YAML atomically: a kill mid-write leaves the previous card, never half of one."""
    # libyaml's emitter: the same text as yaml.safe_dump, ~5x faster (rewritten at every task).
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text = yaml.dump(card, Dumper=dumper, sort_keys=False, allow_unicode=True, width=100)
    write_text_atomic(path, text)


def write_text_atomic(path: Path, text: str) -> None:
    """Readers see the old or the new content, never half of one; on a failure (full disk,
    read-only folder) the temporary file is removed and the OSError goes to the caller."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_card(path: Path) -> dict:
    """A run card; an unreadable or invalid one is a NeobenchError naming the file."""
    data = read_yaml(path, "run card", CARD_FIX)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise NeobenchError(f"run card file {path}: not a YAML mapping. {CARD_FIX}")
    return data


CARD_FIX = (
    "Repair it, or move it out of that folder: it only describes an earlier run, and the "
    "result files beside it are unaffected."
)


def owner() -> dict[str, object]:
    """Which process writes a card: a later run uses it to tell a live run from a dead one."""
    return {"host": socket.gethostname(), "pid": os.getpid()}


def is_orphaned(card: dict) -> bool:
    """A card still marked running whose process on this host is gone (killed, out of memory,
    power cut); a card written on another host cannot be checked."""
    who = card.get("owner") or {}
    if card.get("status") != "running" or who.get("host") != socket.gethostname():
        return False
    pid = who.get("pid")
    if not isinstance(pid, int) or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)  # signal 0: an existence check, nothing is sent
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, owned by another user
    return False


def mark_orphaned(path: Path, card: dict) -> bool:
    """Rewrite an orphaned card as interrupted; True when it was one."""
    if not is_orphaned(card):
        return False
    card["status"] = "interrupted"
    card["interrupted"] = {
        "noticed": now(),
        "by": owner(),
        "reason": "its process ended without finishing the card (killed or crashed)",
    }
    with contextlib.suppress(OSError):  # read-only or full: the caller still knows
        write_card(path, card)
    return True


# Typed cards <-> YAML mappings, tolerant of other versions: a key a card lacks takes the field's
# default, an unknown key is kept in `extra` (and written back), so a rewrite loses nothing.

T = TypeVar("T")


def card_to_dict(card: Any) -> dict[str, Any]:
    """A card dataclass as the mapping written to YAML (its `extra` keys at their level)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(card):
        value = getattr(card, f.name)
        if f.name == "extra":
            out.update(value or {})
        elif dataclasses.is_dataclass(value):
            out[f.name] = card_to_dict(value)
        else:
            out[f.name] = copy.deepcopy(value)
    return out


def card_from_dict(cls: type[T], data: Any) -> T:
    """A card dataclass from a mapping read from YAML."""
    data = data if isinstance(data, dict) else {}
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    names = {f.name for f in dataclasses.fields(cls)}
    for f in dataclasses.fields(cls):
        if f.name == "extra" or f.name not in data:
            continue
        nested = dataclass_in(hints[f.name])
        value = data[f.name]
        kwargs[f.name] = card_from_dict(nested, value) if nested and value is not None else value
    if "extra" in names:
        kwargs["extra"] = {k: v for k, v in data.items() if k not in names}
    return cls(**kwargs)


def dataclass_in(hint: Any) -> type | None:
    """The dataclass of a field typed `Card` or `Card | None`, else None."""
    for candidate in (hint, *typing.get_args(hint)):
        if isinstance(candidate, type) and dataclasses.is_dataclass(candidate):
            return candidate
    return None
