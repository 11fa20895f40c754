"""A local model folder's content hash (sha256 of every weight, config and tokenizer file),
remembered while its files are unchanged; user-facing behaviour: docs/guide.md, "`neobench eval`".

Hashing is most of loading a small model (MiniLM: ~0.6 of 1.4 s), hence the memo, one file per
folder (named by a hash of its path), holding each file's size, mtime, ctime and inode: git's test
of a file unchanged (no tool can set a ctime back).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from neobench.core.home import neobench_home

# Files that describe a run rather than the weights: excluded from a local folder's fingerprint.
NOT_WEIGHTS = re.compile(
    r"(^|/)(README\.md|neobench_[^/]*|checkpoint-[^/]+/.*|[^/]*\.(png|csv|jsonl))$"
)
MEMOS = "fingerprints"  # the memos' folder in neobench's home
VERSION = 1


def fingerprint(folder: Path) -> str:
    """Content hash of a local model folder (weights, configs, tokenizer), 'local-<16 hex>'."""
    files = _weight_files(folder)
    stats = [_stat(folder / rel, rel) for rel in files]
    memo = _memo_path(folder)
    try:
        kept = json.loads(memo.read_text())
        if kept.get("version") == VERSION and kept.get("files") == stats:
            return str(kept["fingerprint"])
    except (OSError, ValueError, AttributeError):
        pass  # none yet, unreadable or damaged: hash
    value = _hash(folder, files)
    _remember(memo, {"version": VERSION, "files": stats, "fingerprint": value})
    return value


def _memo_path(folder: Path) -> Path:
    """The memo of ``folder``: one file per resolved path (symlinks to one folder share it)."""
    name = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:32]
    return neobench_home() / MEMOS / f"{name}.json"


def _weight_files(folder: Path) -> list[str]:
    rels = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    return [r for r in rels if not (r.startswith(".") or "/." in r or NOT_WEIGHTS.search(r))]


def _stat(path: Path, rel: str) -> list[str | int]:
    s = path.stat()
    return [rel, s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_ino]


def _hash(folder: Path, files: list[str]) -> str:
    digest = hashlib.sha256()
    for rel in files:
        digest.update(rel.encode())
        with (folder / rel).open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return "local-" + digest.hexdigest()[:16]


def _remember(memo: Path, record: dict) -> None:
    """Write the memo atomically; where we may not write, the folder is simply not remembered."""
    temporary = memo.with_name(f"{memo.name}.{os.getpid()}.tmp")
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps(record))
        os.replace(temporary, memo)
    except OSError:
        temporary.unlink(missing_ok=True)
