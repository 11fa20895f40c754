"""The GLUE tasks as data: their columns, labels, metrics as GLUE defines them, the score the
paper reports per task, and where their data comes from (the hub's nyu-mll/glue at a pinned
revision, or an offline folder of the same layout). docs/glue.md is the reference.

Metrics need numpy and scipy only: the reports recompute them on resampled items.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neobench.core.errors import NeobenchError, unknown

HUB_REPO = "nyu-mll/glue"
PAIR = ("sentence1", "sentence2")
# The hub repository's commit neobench reads (parquet files, one folder per config).
HUB_REVISION = "bcdcba79d07bc864c1c254ccfcedcce55bcc9a8c"
# The files of a results root's GLUE runs (docs/glue.md, "What a run is"): written by
# neobench.glue, read by the report.
GLUE_CARD = "glue-card.yaml"  # a model's folder: the command's card
POINT_CARD = "point.yaml"  # a run's card
PREDICTIONS = "predictions.json"  # a run's validation predictions


@dataclass(frozen=True)
class GlueTask:
    """One GLUE task: ``name`` is the hub's config (rte), ``title`` the table's column (RTE)."""

    name: str
    title: str
    texts: tuple[str, ...]  # one column (single sentence) or two (a pair)
    num_labels: int  # 1: regression (STS-B)
    metrics: tuple[str, ...]  # as GLUE reports them
    validation: tuple[str, ...]  # the split(s) reported: MNLI has two
    train_rows: int  # the hub's, for plans and estimates before any data is read
    # Mean characters of an example's texts in the training split, for estimates: measured on
    # ../shared/data/glue for the six tasks there; QQP, MNLI, QNLI (hub-only here) approximate.
    mean_chars: int
    in_average: bool = True  # the paper's Avg. leaves WNLI out, following BERT

    @property
    def regression(self) -> bool:
        return self.num_labels == 1


TASKS: dict[str, GlueTask] = {
    t.name: t
    for t in (
        GlueTask("cola", "CoLA", ("sentence",), 2, ("mcc",), ("validation",), 8551, 41),
        GlueTask("sst2", "SST-2", ("sentence",), 2, ("accuracy",), ("validation",), 67349, 54),
        GlueTask("mrpc", "MRPC", PAIR, 2, ("f1", "accuracy"), ("validation",), 3668, 237),
        GlueTask("stsb", "STS-B", PAIR, 1, ("pearson", "spearman"), ("validation",), 5749, 115),
        GlueTask(
            "qqp", "QQP", ("question1", "question2"), 2, ("f1", "accuracy"), ("validation",),
            363846, 120,
        ),
        GlueTask(
            "mnli", "MNLI", ("premise", "hypothesis"), 3, ("accuracy",),
            ("validation_matched", "validation_mismatched"), 392702, 160,
        ),
        GlueTask(
            "qnli", "QNLI", ("question", "sentence"), 2, ("accuracy",), ("validation",), 104743,
            200,
        ),
        GlueTask("rte", "RTE", PAIR, 2, ("accuracy",), ("validation",), 2490, 320),
        GlueTask(
            "wnli", "WNLI", PAIR, 2, ("accuracy",), ("validation",), 635, 149, in_average=False
        ),
    )
}  # fmt: skip
# The paper's column order (its Table 3), WNLI last.
ORDER = ("mnli", "qnli", "qqp", "rte", "sst2", "mrpc", "cola", "stsb", "wnli")
ALIASES = {"sst": "sst2", "sst-2": "sst2", "sts": "stsb", "sts-b": "stsb", "mnli-m": "mnli"}


def parse_tasks(names: Sequence[str]) -> list[GlueTask]:
    """Task names (any case, the hub's or the table's spelling) -> tasks in the paper's order;
    every unknown name reported at once, with "did you mean"."""
    problems, found = [], set()
    for raw in names:
        key = ALIASES.get(raw.strip().lower(), raw.strip().lower())
        if key in TASKS:
            found.add(key)
        else:
            problems.append(unknown("GLUE task", raw, list(ORDER)))
    if not names:
        problems.append(f"--tasks names no task. Give some of {', '.join(ORDER)}.")
    if problems:
        raise NeobenchError(problems)
    return [TASKS[k] for k in ORDER if k in found]


def known_tasks(names: Sequence[str]) -> list[GlueTask]:
    """The tasks of ``names`` that exist, unknown names left out (their data is still checked
    when another name is misspelt: all problems at once)."""
    keys = {ALIASES.get(n.strip().lower(), n.strip().lower()) for n in names}
    return [TASKS[k] for k in ORDER if k in keys]


# ---- metrics -------------------------------------------------------------------------------


def metrics(task: GlueTask, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The task's GLUE metrics of class predictions (or scores, for regression), each in [0, 1]
    (MCC and correlations in [-1, 1]), and ``score``: the one number the paper's table shows, the
    mean of a task's two metrics where it has two (the paper's appendix C)."""
    found = metric_draws(task, np.asarray(predictions)[None], np.asarray(labels)[None])
    return {name: float(values[0]) for name, values in found.items()}


def metric_draws(task: GlueTask, predictions: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """`metrics` of many item sets at once: ``predictions`` and ``labels`` (draws, items), one
    array of draws per metric and ``score`` (the report's bootstrap resamples items this way)."""
    values = {name: _METRICS[name](predictions, labels) for name in task.metrics}
    return values | {"score": np.mean(np.stack(list(values.values())), axis=0)}


# Each metric takes (draws, items) arrays and gives one value per draw.


def _accuracy(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    if gold.shape[-1] == 0:
        return np.full(gold.shape[:-1], np.nan)
    return np.mean(pred == gold, axis=-1)


def _counts(pred: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, ...]:
    """True and false positives and negatives of the positive class (label 1), per draw."""

    def count(mask: np.ndarray) -> np.ndarray:
        return np.sum(mask, axis=-1).astype(float)

    positive, actual = pred == 1, gold == 1
    return (
        count(positive & actual),
        count(~positive & ~actual),
        count(positive & ~actual),
        count(~positive & actual),
    )


def _f1(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """F1 of the positive class (label 1: equivalent, duplicate), as GLUE scores MRPC and QQP;
    0 without a true positive."""
    tp, _, fp, fn = _counts(pred, gold)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(tp == 0, 0.0, 2 * tp / (2 * tp + fp + fn))


def _mcc(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Matthews correlation of two binary labelings; 0 where a row or column of the confusion
    matrix is empty (sklearn's convention)."""
    tp, tn, fp, fn = _counts(pred, gold)
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator == 0, 0.0, (tp * tn - fp * fn) / denominator)


def _pearson(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """0 where either side is constant: such a prediction carries no correlation (scipy would
    give nan)."""
    x = pred.astype(float) - pred.mean(axis=-1, keepdims=True)
    y = gold.astype(float) - gold.mean(axis=-1, keepdims=True)
    spread = np.sqrt(np.sum(x * x, axis=-1) * np.sum(y * y, axis=-1))
    constant = (np.ptp(pred, axis=-1) == 0) | (np.ptp(gold, axis=-1) == 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(constant, 0.0, np.sum(x * y, axis=-1) / np.where(constant, 1.0, spread))


def _spearman(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return _pearson(rankdata(pred, axis=-1), rankdata(gold, axis=-1))


_METRICS = {
    "accuracy": _accuracy,
    "f1": _f1,
    "mcc": _mcc,
    "pearson": _pearson,
    "spearman": _spearman,
}


# ---- data ----------------------------------------------------------------------------------

SPLIT_FILE = "{split}-00000-of-00001.parquet"


@dataclass(frozen=True)
class GlueSource:
    """Where the tasks' rows are read: the hub (``folder`` None: nyu-mll/glue at HUB_REVISION) or
    a folder laid out like it (``<config>/<split>-00000-of-00001.parquet``)."""

    folder: Path | None

    @classmethod
    def of(cls, data_dir: str | Path | None) -> GlueSource:
        """``--data-dir``: the GLUE folder itself, or a mirror root holding ``nyu-mll/glue/``."""
        if data_dir is None:
            return cls(None)
        root = Path(data_dir).expanduser().resolve()
        if not root.is_dir():
            raise NeobenchError(f"--data-dir {data_dir}: no such folder.")
        mirrored = root / HUB_REPO
        return cls(mirrored if mirrored.is_dir() else root)

    def problems(self, tasks: list[GlueTask]) -> list[str]:
        """Every task whose splits the folder lacks, in one message per task (nothing to check
        for the hub: its errors come when it is read)."""
        if self.folder is None:
            return []
        held = sorted(p.name for p in self.folder.iterdir() if p.is_dir())
        found = []
        for task in tasks:
            lacking = [s for s in ("train", *task.validation) if not self.file(task, s).is_file()]
            if lacking:
                found.append(
                    f"GLUE task {task.name}: --data-dir {self.folder} has no "
                    f"{' or '.join(SPLIT_FILE.format(split=s) for s in lacking)} under "
                    f"{task.name}/ (it holds: {', '.join(held) or 'no task folder'}). Add the "
                    f"task's files there, drop the task from --tasks, or read the hub "
                    f"(no --data-dir)."
                )
        return found

    def file(self, task: GlueTask, split: str) -> Path:
        assert self.folder is not None
        return self.folder / task.name / SPLIT_FILE.format(split=split)

    def load(self, task: GlueTask, split: str) -> Any:
        """One split as a datasets.Dataset, the hub's columns and label encoding."""
        import datasets

        if self.folder is not None:
            return datasets.Dataset.from_parquet(str(self.file(task, split)))
        from neobench.protocol.mirror import hub_offline

        if hub_offline():
            raise NeobenchError(
                f"GLUE task {task.name}: the hub is offline (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE "
                f"set) and no --data-dir was given. Pass --data-dir with a folder laid out like "
                f"{HUB_REPO} (<task>/{SPLIT_FILE.format(split='train')}), or go online."
            )
        try:
            return datasets.load_dataset(HUB_REPO, task.name, split=split, revision=HUB_REVISION)
        except (ConnectionError, OSError) as error:
            raise NeobenchError(
                f"GLUE task {task.name}: {HUB_REPO}@{HUB_REVISION[:8]} cannot be read from the "
                f"hub ({str(error).splitlines()[0]}). Pass --data-dir with an offline copy."
            ) from None

    def record(self, tasks: list[GlueTask]) -> dict[str, Any]:
        """What a run card stores of the data: the hub revision, or each file's sha256."""
        if self.folder is None:
            return {"source": "hub", "repo": HUB_REPO, "revision": HUB_REVISION}
        files = {
            f"{t.name}/{self.file(t, s).name}": file_sha256(self.file(t, s))
            for t in tasks
            for s in ("train", *t.validation)
        }
        return {"source": "folder", "folder": str(self.folder), "sha256": files}


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def data_sha256(record: dict[str, Any]) -> str:
    """One hash of a data record: equal records, equal data."""
    kept = {k: v for k, v in record.items() if k != "folder"}  # the same files elsewhere
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()


def data_conflicts(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether two data records (`GlueSource.record`) disagree: another source or hub revision,
    or a file both name with another sha256 (records of other tasks do not disagree)."""
    if old.get("source") != new.get("source"):
        return True
    if new.get("source") == "hub":
        return old.get("revision") != new.get("revision")
    theirs, mine = old.get("sha256") or {}, new.get("sha256") or {}
    return any(theirs[f] != mine[f] for f in theirs.keys() & mine.keys())
