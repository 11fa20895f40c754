"""`neobench cache info|clear`: what state the embedding cache is in, and removing it.

Info is read-only (creates, moves and repairs nothing) and always runs the full check; clear
removes the cache in whatever state, with the caches moved aside beside it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from neobench.core.errors import NeobenchError
from neobench.encoder.cache import BUSY_TIMEOUT_S, EmbeddingCache
from neobench.encoder.cache_file import (
    Damaged,
    cache_files,
    cache_size,
    moved_aside,
    quick_check,
    read_schema,
    used_bytes,
)
from neobench.encoder.cache_location import cache_path, check_folder
from neobench.encoder.cache_lru import read_settings


@dataclass
class CacheReport:
    """What `neobench cache info` shows."""

    path: Path
    state: str = "missing"  # missing | ok | corrupt | outdated | newer
    embeddings: int = 0
    bytes: int = 0  # the file with its -wal/-shm
    held: int = 0  # what the database holds: (page_count - freelist_count) x page_size
    # The last run's policy, cap (max_bytes, "" for none) and when it set them; {} before any
    # run of schema 3.
    settings: dict[str, str] = field(default_factory=dict)
    problem: str | None = None  # why `neobench eval` would not use the file as it is
    fix: str | None = None
    aside: list[Path] = field(default_factory=list)  # earlier caches moved aside, still on disk
    cleared: list[str] = field(default_factory=list)  # what `cache clear` did, one line each

    @property
    def ok(self) -> bool:
        return self.state in ("missing", "ok")

    @property
    def aside_mb(self) -> float:
        return sum(p.stat().st_size for p in self.aside) / 1e6


def cache_command(cache_dir: str | None, action: str) -> CacheReport:
    """`neobench cache info|clear`: clear first when asked, then the full check."""
    path = cache_path(cache_dir)
    cleared = clear_cache(path) if action == "clear" else []
    report = inspect_cache(path)
    report.cleared = cleared
    return report


def inspect_cache(path: Path) -> CacheReport:
    """The state of the cache at ``path``, read-only: creates, moves and repairs nothing. Always
    runs the full quick_check (reads every page), whatever the size."""
    if path.parent.exists() and not path.parent.is_dir():
        raise NeobenchError(
            f"embedding cache folder {path.parent} is a file, not a folder. Pass --cache-dir "
            "with the folder that holds embeddings.sqlite."
        )
    report = CacheReport(path, bytes=cache_size(path), aside=moved_aside(path))
    if not path.exists():
        return report
    clear = f"neobench cache clear --cache-dir {path.parent}"
    db = None
    try:
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)
        if read_schema(db, path):  # else an empty file, which eval fills in
            quick_check(db)
            (report.embeddings,) = db.execute("SELECT COUNT(*) FROM emb").fetchone()
            report.held = used_bytes(db)
            if "meta" in {n for (n,) in db.execute("SELECT name FROM sqlite_master")}:
                report.settings = read_settings(db)  # a version 2 file has none
        report.state = "ok"
    except Damaged as damage:
        report.state = "outdated" if damage.tag == "v1" else "corrupt"
        report.problem, report.fix = str(damage), clear
    except NeobenchError as error:  # a newer schema: not ours to clear
        report.state, report.problem = "newer", error.problems[0]
    except sqlite3.DatabaseError as error:
        report.state, report.problem, report.fix = "corrupt", str(error), clear
    finally:
        if db is not None:
            db.close()
    return report


def clear_cache(path: Path) -> list[str]:
    """Delete the cache (with its -wal/-shm) in whatever state, and the caches moved aside
    beside it, then start an empty one; returns what was done, one line each.

    Files are removed rather than emptied with DELETE + VACUUM: that works on a damaged file and
    on a full disk, and takes no time on a multi-GB cache. A run using the cache meanwhile sees
    its file replaced and carries on with the new one.
    """
    check_folder(path.parent)
    done = []
    for old in [path, *moved_aside(path)]:
        files = cache_files(old)
        if files:
            size = sum(f.stat().st_size for f in files)
            for file in files:
                file.unlink()
            done.append(f"removed {old} ({size / 1e6:.1f} MB, {len(files)} file(s))")
    EmbeddingCache(path).close()
    done.append(f"started an empty cache at {path}")
    return done
