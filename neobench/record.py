"""Run cards: every output folder says how its numbers were made.

A card holds the resolved config, package versions, the git sha of the neobench source, data
revisions, instruction hashes, device, dtype, attention implementation and seeds. It is written
before work starts and rewritten (atomically) when the work ends.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import yaml

import neobench

PACKAGES = (
    "neobench",
    "torch",
    "transformers",
    "sentence-transformers",
    "mteb",
    "datasets",
    "huggingface_hub",
    "accelerate",
    "numpy",
    "scikit-learn",
)


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_sha() -> str | None:
    """Commit of the neobench source (with '-dirty' when it has local changes), if in a checkout."""
    root = Path(neobench.__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (sha + ("-dirty" if dirty else "")) or None


def device_info(device: str) -> dict[str, object]:
    import torch

    info: dict[str, object] = {"device": device, "cpu": platform.processor() or platform.machine()}
    info["cpu_threads"] = torch.get_num_threads()
    if device.startswith("cuda") and torch.cuda.is_available():
        index = torch.device(device).index or 0
        info["gpu"] = torch.cuda.get_device_name(index)
        info["cuda"] = torch.version.cuda
    return info


def environment() -> dict[str, object]:
    return {
        "neobench_version": neobench.__version__,
        "git_sha": git_sha(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
    }


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_card(path: Path, card: dict) -> None:
    """Write YAML atomically: a kill mid-write leaves the previous card, never half of one."""
    write_text_atomic(path, yaml.safe_dump(card, sort_keys=False, allow_unicode=True, width=100))


def write_text_atomic(path: Path, text: str) -> None:
    """Write a file so that readers see the old or the new content, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def read_card(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}
