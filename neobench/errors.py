"""User-facing errors: every problem found, each with what, where and how to fix it."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


class NeobenchError(Exception):
    """A problem with the user's input. The CLI prints the problems and exits with code 2.

    Library code collects every problem it can find before raising, so a user fixes a config
    in one round trip instead of one error at a time.
    """

    def __init__(self, problems: str | list[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


def did_you_mean(word: str, choices: Iterable[str], n: int = 3) -> str:
    """Return ' Did you mean X?' for the closest choices (case-insensitive), or ''."""
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(word.lower(), list(lowered), n=n, cutoff=0.6)
    if not hits:
        return ""
    return " Did you mean " + " or ".join(repr(lowered[h]) for h in hits) + "?"


def unknown(kind: str, word: str, choices: Iterable[str], hint: str = "") -> str:
    """Message for an unknown name: the name, the closest valid ones, and where to list them all."""
    choices = sorted(choices)
    msg = f"Unknown {kind} {word!r}.{did_you_mean(word, choices)}"
    if len(choices) <= 12:
        msg += f" Valid: {', '.join(choices)}."
    if hint:
        msg += f" {hint}"
    return msg


def check_choice(flag: str, value: str, choices: Iterable[str]) -> str:
    """``value`` if it is one of ``choices``; else the unknown-name message for ``flag``."""
    choices = list(choices)
    if value not in choices:
        raise NeobenchError(unknown(f"{flag} value", value, choices))
    return value


def collect(problems: list[str], fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn``; on a NeobenchError keep its problems and return None (to report all at once)."""
    try:
        return fn(*args)
    except NeobenchError as error:
        problems.extend(error.problems)
        return None


def shipped(folder: str) -> Path:
    """A top-level data folder of the repository (instructions/, datasets_manifest/), found inside
    the installed wheel or, in a checkout, beside the package."""
    package = Path(__file__).parent
    packaged = package / "_data" / folder
    return packaged if packaged.is_dir() else package.parent / folder


def find_yaml(name_or_path: str, folder: Path, kind: str) -> Path:
    """A shipped YAML by name (folder/<name>.yaml) or any YAML file by path; else a clear error."""
    path = Path(name_or_path)
    if path.suffix in {".yaml", ".yml"}:
        if not path.is_file():
            raise NeobenchError(f"{kind} file {path}: no such file.")
        return path
    shipped_file = folder / f"{name_or_path}.yaml"
    if not shipped_file.is_file():
        names = sorted(p.stem for p in folder.glob("*.yaml"))
        raise NeobenchError(
            unknown(kind, name_or_path, names, f"Or pass the path of a {kind} YAML file.")
        )
    return shipped_file
