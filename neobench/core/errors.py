"""User-facing errors: every problem found, each with what, where and how to fix it."""

from __future__ import annotations

import contextlib
import difflib
import errno
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


class NeobenchError(Exception):
    """A problem with the user's input, every one found before raising (one round trip to fix
    them all). The CLI prints the problems and exits with code 2."""

    exit_code = 2

    def __init__(self, problems: str | list[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class RunFailed(NeobenchError):
    """The run could not finish (a full disk, a folder gone read-only); exit code 1, what
    finished is kept."""

    exit_code = 1


def writable_folder_problems(path: Path, flag: str, fix: str) -> list[str]:
    """Why ``path`` cannot be an output folder (a file, under a file, or its nearest existing
    folder not writable), found without creating anything; ``fix`` ends each message."""
    path = path.expanduser()
    if path.exists() and not path.is_dir():
        return [f"{flag} {path}: is a file, not a folder. {fix}"]
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        return [f"{flag} {path}: {existing} is a file, so no folder can be made under it. {fix}"]
    # access(2) honours read-only mounts even for root, and creates nothing.
    if not os.access(existing, os.W_OK | os.X_OK):
        why = "read-only file system" if _read_only_mount(existing) else "no write permission"
        return [f"{flag} {path}: {existing} cannot be written ({why}). {fix}"]
    return []


def _read_only_mount(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def disk_full(error: BaseException) -> bool:
    """Whether ``error`` (or one it was raised from) says the disk is full."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "database or disk is full" in str(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def did_you_mean(word: str, choices: Iterable[str], n: int = 3) -> str:
    """Return ' Did you mean X?' for the closest choices (case-insensitive), or ''."""
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(word.lower(), list(lowered), n=n, cutoff=0.6)
    if not hits:
        return ""
    return " Did you mean " + " or ".join(repr(lowered[h]) for h in hits) + "?"


def unknown(kind: str, word: str, choices: Iterable[str], hint: str = "") -> str:
    """An unknown name: the closest valid ones, and where to list them all."""
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
    """A top-level data folder (instructions/, ...): in the installed wheel, else the checkout's."""
    package = Path(__file__).resolve().parent.parent  # neobench/, from neobench/core/
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


def read_yaml(
    path: Path, kind: str, fix: str = "Fix the file, or restore it from version control."
) -> Any:
    """Parse a YAML file; a syntax error or an unreadable file is one message naming the file,
    the line and column, and the fix."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except IsADirectoryError:
        raise NeobenchError(f"{kind} file {path}: is a folder; pass a YAML file.") from None
    except UnicodeDecodeError:
        raise NeobenchError(f"{kind} file {path}: not UTF-8 text; is it really YAML?") from None
    except OSError as error:
        raise NeobenchError(f"{kind} file {path}: cannot be read ({error.strerror}).") from None
    # libyaml's parser (~8x faster, the same documents); a file it refuses is parsed again by
    # PyYAML's, whose messages name the offending character.
    with contextlib.suppress(yaml.YAMLError):
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise NeobenchError(f"{kind} file {path}: invalid YAML{where} ({problem}). {fix}") from None


def os_error_message(error: OSError) -> str:
    """One line for a file-system failure no check foresaw: the path and what to do."""
    import re

    # write_text_atomic's temporary name: the user knows the file it stands for.
    filename = re.sub(r"\.\d+\.tmp$", "", str(error.filename or ""))
    where = f"{filename}: " if filename else ""
    if disk_full(error):
        return f"{where}the disk is full. Free space or write to another disk, then re-run."
    reason = error.strerror or str(error)
    return f"{where}{reason}. Check the path and its permissions, then re-run."
