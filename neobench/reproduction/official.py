"""A model's official MTEB results and the conditions they record, read through mteb's
ResultCache: a local clone (or folder) of the results repository, or the remote one downloaded.

What the official files record, and what reproducing them therefore starts from
(docs/reproduce.md): each task file its mteb version and dataset revision; the model's
model_meta.json its revision, max_tokens (the model's own max length: the official runs load
the model as its folder says), use_instructions and similarity. Nothing records dtype or batch
size: the official runs are mteb's defaults, float32 and batches of 32.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neobench.core.errors import NeobenchError

REMOTE = "remote"  # --official remote: mteb's ResultCache.download_from_remote
RESULTS_HOST = ("github.com", 443)  # where the results repository lives
REACH_TIMEOUT_S = 5.0
OFFICIAL_DTYPE = "float32"  # mteb runs a SentenceTransformer as loaded: float32
OFFICIAL_BATCH_SIZE = 32  # mteb's encode batch size


@dataclass(frozen=True)
class OfficialTask:
    """One task's official result: its main score (0-1, on ``splits``) and what it records."""

    task: str
    score: float
    splits: tuple[str, ...]
    mteb_version: str | None
    dataset_revision: str | None
    scores_by_split: dict[str, float] = field(default_factory=dict)
    result: Any = field(default=None, repr=False, compare=False)  # mteb's TaskResult

    def score_on(self, splits: tuple[str, ...]) -> float:
        """The official main score on ``splits`` only (mteb's get_score over them): a file
        from an older mteb may hold splits the installed benchmark no longer evaluates."""
        if not splits or set(splits) == set(self.splits) or self.result is None:
            return self.score
        return float(self.result.get_score(splits=list(splits)))


@dataclass(frozen=True)
class OfficialModel:
    """The official results of one model name at one revision, with its model_meta's fields."""

    name: str
    revision: str | None
    root: Path
    max_tokens: int | None
    use_instructions: bool | None
    similarity: str | None
    tasks: dict[str, OfficialTask]


def results_root(official: str) -> Path:
    """The ResultCache root of ``--official``: a folder (a clone of the results repository, or
    any folder holding ``results/<model>/<revision>/``), or ``remote``: downloaded by mteb, on a
    connected machine only (checked in seconds, never a hang)."""
    import mteb

    if official == REMOTE:
        from neobench.protocol.mirror import reachable

        if not reachable(*RESULTS_HOST, timeout=REACH_TIMEOUT_S):
            raise NeobenchError(
                "--official remote: github.com (the MTEB results repository) is not reachable "
                "from here. On a connected machine run it there, or clone "
                "https://github.com/embeddings-benchmark/results and give --official CLONE."
            )
        cache = mteb.ResultCache()
        return Path(cache.download_from_remote())
    root = Path(official).expanduser()
    if not root.is_dir():
        raise NeobenchError(
            f"--official {official}: no such folder. Give a clone of "
            "https://github.com/embeddings-benchmark/results (or a folder with its results/ "
            "layout), or 'remote' on a connected machine."
        )
    if not (root / "results").is_dir() and any(root.glob("*/*/*.json")):
        raise NeobenchError(
            f"--official {official}: this is a results/ folder itself; give the folder above it "
            f"({root.resolve().parent}), the ResultCache root."
        )
    if not (root / "results").is_dir():
        raise NeobenchError(
            f"--official {official}: holds no results/ folder: not an MTEB results repository "
            "(https://github.com/embeddings-benchmark/results) or a copy of its layout."
        )
    return root.resolve()


def load_official(root: Path, name: str, tasks: list[str] | None = None) -> OfficialModel:
    """The official results of ``name`` (a hub id) under ``root``, through mteb's ResultCache;
    where several revisions hold results, the one with the most of ``tasks`` (then the most
    tasks). A task present at no revision is left out (the caller names it)."""
    import mteb

    found = mteb.ResultCache(root).load_results(
        models=[name], require_model_meta=False, include_remote=False
    )
    runs = [m for m in found.model_results if m.model_name == name]
    if not runs:
        folders = sorted(p.name for p in (root / "results").iterdir() if p.is_dir())
        close = [f for f in folders if name.split("/")[-1].lower() in f.lower()]
        hint = f" Folders with that name: {', '.join(close)}." if close else ""
        raise NeobenchError(
            f"no official results for {name} in {root / 'results'}.{hint} Give the hub id the "
            "results are filed under with --as."
        )
    wanted = set(tasks or [])

    def rank(run: Any) -> tuple[int, int]:
        names = {t.task_name for t in run.task_results}
        return (len(names & wanted), len(names))

    run = max(runs, key=rank)
    meta = _model_meta(root, name, run.model_revision)
    results = {}
    for result in run.task_results:
        if wanted and result.task_name not in wanted:
            continue
        splits = tuple(sorted(result.scores))
        by_split = {s: float(result.get_score(splits=[s])) for s in splits}
        results[result.task_name] = OfficialTask(
            result.task_name,
            float(result.get_score()),
            splits,
            result.mteb_version,
            result.dataset_revision,
            by_split,
            result,
        )
    max_tokens = meta.get("max_tokens")
    return OfficialModel(
        name,
        run.model_revision,
        root,
        int(max_tokens) if isinstance(max_tokens, (int, float)) else None,
        meta.get("use_instructions"),
        meta.get("similarity_fn_name"),
        results,
    )


def _model_meta(root: Path, name: str, revision: str | None) -> dict[str, Any]:
    path = root / "results" / name.replace("/", "__") / str(revision) / "model_meta.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
