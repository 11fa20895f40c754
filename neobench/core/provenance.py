"""Where a card's numbers were made: package versions, the neobench git sha, Python, platform,
command line, Slurm job and device, captured when the card is written."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path

from neobench import _version

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


@functools.cache
def _installed_versions() -> dict[str, str | None]:
    """The installed versions of PACKAGES (None where one is missing), asked once per process
    (~3 ms a package): what is imported cannot change under the interpreter."""
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


@functools.cache
def git_sha() -> str | None:
    """The neobench commit ('-dirty' with local changes) in a checkout; asked once per process
    (~40 ms): the code that runs is the code imported, whatever the checkout says later."""
    root = Path(_version.__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None

    def git(*args: str) -> str:
        command = ["git", "-C", str(root), *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=10).stdout.strip()

    try:
        sha, dirty = git("rev-parse", "HEAD"), git("status", "--porcelain")
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
    env: dict[str, object] = {
        "neobench_version": _version.__version__,
        "git_sha": git_sha(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": dict(_installed_versions()),  # a copy: the card may be edited
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
    }
    # Inside a Slurm job: which one (`neobench study status` and sacct find it by this id).
    slurm = {k.lower(): os.environ[k] for k in SLURM_VARIABLES if os.environ.get(k)}
    return env | ({"slurm": slurm} if slurm else {})


SLURM_VARIABLES = ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURMD_NODENAME")
