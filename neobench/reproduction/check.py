"""Reproduce a model's official MTEB scores, then name the cause of each miss (docs/reproduce.md).

1. The official results (official.py) say the conditions they were made under; the model is
   evaluated under the same ones (its own max length, no instructions where the official run used
   none, its own normalisation, float32, batches of 32), each flag the user gives overriding one.
2. Per task: official, reproduced, difference, within the tolerance or not (on the official
   file's splits that the run evaluated).
3. Each task outside the tolerance runs again once per known cause, one condition changed at a
   time (CAUSES); the change that brings it within the tolerance is named. Where none does, what
   remains different is named: the data (a mirror's copy, or another dataset revision), the mteb
   version, the hardware.
Every run is a plain `neobench eval` into its own results root under the output folder, readable
by mteb like any other.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from neobench.core.errors import NeobenchError
from neobench.reproduction.official import (
    OFFICIAL_BATCH_SIZE,
    OFFICIAL_DTYPE,
    OfficialModel,
    OfficialTask,
)

TOLERANCE = 1e-3  # main scores 0-1: mteb issue 4009's proposed reference tolerance
MODEL_LENGTH = "model"  # --max-seq-length model: the folder's own
NORMALIZE = "sentence_transformers.models.Normalize"
# The causes tried for a miss, in this order: each a condition and the values it is tried at.
CAUSES = ("normalisation", "max length", "instructions", "dtype", "batch size")
DTYPES = ("float32", "float16", "bfloat16")
HALF = ("float16", "bfloat16")


@dataclass(frozen=True)
class EvalSettings:
    """The settings of one evaluation a reproduction runs: what may move a score, tried one at
    a time against the official run's (not core/conditions.py's record of a finished run)."""

    max_seq_length: int | str = MODEL_LENGTH
    instructions: str = "none"
    normalize: str = "model"  # model (the folder's own modules) | on | off
    dtype: str = OFFICIAL_DTYPE
    batch_size: int = OFFICIAL_BATCH_SIZE

    def differs(self, other: EvalSettings) -> str:
        """The first condition that differs from ``other``, as a reader names it."""
        names = {
            "max_seq_length": "max length", "instructions": "instructions",
            "normalize": "normalisation", "dtype": "dtype", "batch_size": "batch size",
        }  # fmt: skip
        for key, said in names.items():
            if getattr(self, key) != getattr(other, key):
                return f"{said} {getattr(other, key)} -> {getattr(self, key)}"
        return "none"


@dataclass
class TaskCheck:
    """One task: official and reproduced main scores (0-1), and for a miss its diagnosis."""

    task: str
    official: float
    reproduced: float | None
    tolerance: float
    splits: tuple[str, ...] = ()
    cause: str | None = None  # the change that brings it within tolerance
    tried: dict[str, float | None] = field(default_factory=dict)  # change -> score
    remains: list[str] = field(default_factory=list)  # what differs when no change explains it
    error: str | None = None

    @property
    def difference(self) -> float | None:
        return None if self.reproduced is None else self.reproduced - self.official

    @property
    def within(self) -> bool:
        return self.difference is not None and abs(self.difference) <= self.tolerance

    def verdict(self) -> str:
        if self.error:
            return f"not evaluated: {self.error}"
        if self.within:
            return "within"
        if self.cause:
            return f"cause: {self.cause}"
        if self.remains:
            return "no condition explains it; differs: " + "; ".join(self.remains)
        return "outside (not diagnosed)"

    def record(self) -> dict[str, Any]:
        found = asdict(self)
        found.update(difference=self.difference, within=self.within, verdict=self.verdict())
        found["splits"] = list(self.splits)
        return found


@dataclass
class Reproduction:
    """What `neobench reproduce` found: per task, and the conditions of the reproduction."""

    model: str
    name: str
    official_revision: str | None
    conditions: EvalSettings
    tasks: list[TaskCheck]
    tolerance: float
    output: Path
    missing: dict[str, str] = field(default_factory=dict)  # task -> why it was not compared
    results: Path | None = None  # the results root of the reproduction's own evaluation
    reused: list[str] = field(default_factory=list)  # tasks read from a finished eval there

    @property
    def within(self) -> bool:
        return bool(self.tasks) and all(t.within for t in self.tasks)

    def record(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "name": self.name,
            "official_revision": self.official_revision,
            "conditions": asdict(self.conditions),
            "tolerance": self.tolerance,
            "within": self.within,
            "tasks": [t.record() for t in self.tasks],
            "not_compared": self.missing,
            "output": str(self.output),
            "results": str(self.results or self.output / REPRODUCED),
            "reused": self.reused,
        }

    def to_pandas(self) -> Any:
        """One row per task: official, reproduced and their ``delta`` on 0-100 as every frame of
        the API (core/frames.py; the tolerance and the JSON keep mteb's 0-1), within, verdict."""
        import pandas as pd

        def points(value: float | None) -> float:
            return float("nan") if value is None else 100.0 * value

        return pd.DataFrame(
            [
                {
                    "task": t.task, "official": points(t.official),
                    "reproduced": points(t.reproduced), "delta": points(t.difference),
                    "within": t.within, "verdict": t.verdict(),
                }
                for t in self.tasks
            ],
            columns=["task", "official", "reproduced", "delta", "within", "verdict"],
        )  # fmt: skip


REPRODUCED = "reproduced"  # <output>/reproduced: the reproduction's results root by default

# An evaluation: (model folder or id, conditions, tasks, results root, no_cache) -> per task the
# main score on the official splits it evaluated (None: the task failed, with its error) and
# those splits.
Scores = dict[str, tuple[float | None, str, tuple[str, ...]]]
Evaluate = Callable[[str, EvalSettings, list[str], Path, bool], Scores]


def reference_conditions(official: OfficialModel, forced: dict[str, Any]) -> EvalSettings:
    """The official run's conditions, with the user's flags (``forced``) in their place."""
    base = EvalSettings(instructions="none" if official.use_instructions is not True else "paper")
    given = {k: v for k, v in forced.items() if v is not None}
    return replace(base, **given)


def variants(
    conditions: EvalSettings, official: OfficialModel, has_normalize: bool, half: bool = True
) -> list[tuple[str, EvalSettings]]:
    """One condition changed at a time, per cause (CAUSES), each to the values it may have had in
    the official run."""
    out: list[tuple[str, EvalSettings]] = []
    other_norm = "off" if (conditions.normalize == "on" or has_normalize) else "on"
    if conditions.normalize != "model":
        other_norm = "model"
    out.append(("normalisation", replace(conditions, normalize=other_norm)))
    lengths: list[int | str] = [MODEL_LENGTH, 512]
    if official.max_tokens:
        lengths.append(official.max_tokens)
    for length in dict.fromkeys(lengths):
        if length != conditions.max_seq_length:
            out.append(("max length", replace(conditions, max_seq_length=length)))
    other = "paper" if conditions.instructions == "none" else "none"
    out.append(("instructions", replace(conditions, instructions=other)))
    for dtype in DTYPES:
        if dtype != conditions.dtype and (half or dtype not in HALF):
            out.append(("dtype", replace(conditions, dtype=dtype)))
    if conditions.batch_size != OFFICIAL_BATCH_SIZE:
        out.append(("batch size", replace(conditions, batch_size=OFFICIAL_BATCH_SIZE)))
    return out


def reproduce(
    model: str,
    official: OfficialModel,
    tasks: list[str],
    conditions: EvalSettings,
    output: Path,
    evaluate: Evaluate,
    has_normalize: bool,
    remaining: Callable[[OfficialTask], list[str]],
    tolerance: float = TOLERANCE,
    diagnose: bool = True,
    results: Path | None = None,
    half: bool = True,
) -> Reproduction:
    """Evaluate under ``conditions`` into ``results`` (default <output>/reproduced; a finished
    eval there is reused), compare, and diagnose every miss (the module's doc)."""
    results = results or output / REPRODUCED
    found = evaluate(model, conditions, tasks, results, False)
    checks = []
    for task in tasks:
        score, error, splits = found.get(task, (None, "no result written", ()))
        entry = official.tasks[task]
        splits = splits or entry.splits  # compared on the splits both evaluated
        checks.append(
            TaskCheck(task, entry.score_on(splits), score, tolerance, splits, error=error or None)
        )
    misses = [c for c in checks if not c.within and c.reproduced is not None]
    if diagnose and misses:
        # Half precision is not tried on a CPU: emulated there, it takes hours a task.
        for n, (_, changed) in enumerate(variants(conditions, official, has_normalize, half)):
            said = changed.differs(conditions)
            folder = output / "diagnose" / f"{n + 1:02d}-{_slug(said)}"
            open_misses = [c for c in misses if c.cause is None]
            if not open_misses:
                break
            # A batch-size change must encode again: the embedding cache would serve the first.
            scores = evaluate(model, changed, [c.task for c in open_misses], folder, True)
            for check in open_misses:
                score, _, _ = scores.get(check.task, (None, "", ()))
                check.tried[said] = score
                if score is not None and abs(score - check.official) <= tolerance:
                    check.cause = said
        for check in misses:
            if check.cause is None:
                check.remains = remaining(official.tasks[check.task])
    return Reproduction(
        model, official.name, official.revision, conditions, checks, tolerance, output,
        results=results,
    )  # fmt: skip


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in ".-" else "-" for c in text).strip("-")[:60]


# ------------------------------------------------------------------------ the model's variants


def normalisation_of(folder: Path) -> bool:
    """Whether a SentenceTransformer folder's modules end in Normalize."""
    modules = folder / "modules.json"
    if not modules.is_file():
        return False
    return any(m.get("type", "").endswith("Normalize") for m in json.loads(modules.read_text()))


def with_normalisation(folder: Path, on: bool, into: Path) -> Path:
    """A view of ``folder`` (links to its files) whose modules.json adds or drops Normalize: the
    same weights, the one condition changed."""
    into.mkdir(parents=True, exist_ok=True)
    for entry in folder.iterdir():
        if entry.name != "modules.json" and not (into / entry.name).exists():
            (into / entry.name).symlink_to(entry.resolve())
    modules_file = folder / "modules.json"
    if modules_file.is_file():
        modules = json.loads(modules_file.read_text())
    else:  # a plain encoder: neobench's Transformer + mean pooling, written out
        raise NeobenchError(
            f"{folder}: normalisation can be changed only for a SentenceTransformer folder "
            "(modules.json)."
        )
    kept = [m for m in modules if not m.get("type", "").endswith("Normalize")]
    if on:
        path = f"{len(kept)}_Normalize"
        (into / path).mkdir(exist_ok=True)
        kept.append({"idx": len(kept), "name": str(len(kept)), "path": path, "type": NORMALIZE})
    for idx, module in enumerate(kept):
        module["idx"], module["name"] = idx, str(idx)
    (into / "modules.json").write_text(json.dumps(kept, indent=2))
    return into


# ------------------------------------------------------------------------------ what is printed


def listing(found: Reproduction) -> Any:
    """The per-task table: official, reproduced, difference (0-1), and the verdict."""
    from neobench.protocol.listing import Listing

    def score(value: float | None) -> str:
        return "-" if value is None else f"{value:.5f}"

    rows = [
        (
            t.task,
            score(t.official),
            score(t.reproduced),
            "-" if t.difference is None else f"{t.difference:+.5f}",
            "yes" if t.within else "no",
            t.verdict(),
        )
        for t in found.tasks
    ]
    title = (
        f"{found.model} against the official results of {found.name}"
        f" ({found.official_revision or 'no revision'}), tolerance {found.tolerance:g}"
    )
    columns = ("task", "official", "reproduced", "difference", "within", "verdict")
    return Listing(title, columns, rows)


def lines(found: Reproduction) -> list[str]:
    """Below the table: the conditions, each miss's tries, the tasks not compared, the sum."""
    c = found.conditions
    out = [
        f"conditions: max length {c.max_seq_length}, instructions {c.instructions}, "
        f"normalisation {c.normalize}, {c.dtype}, batch size {c.batch_size}"
    ]
    for task in found.tasks:
        if task.tried:
            tried = ", ".join(
                f"{change}: {'-' if score is None else f'{score:.5f}'}"
                for change, score in task.tried.items()
            )
            out.append(f"{task.task}: tried {tried}")
    for task, why in found.missing.items():
        out.append(f"{task}: not compared ({why})")
    if found.reused:
        out.append(f"reused from the finished eval in {found.results}: {', '.join(found.reused)}")
    within = sum(t.within for t in found.tasks)
    out.append(f"{within} of {len(found.tasks)} tasks within {found.tolerance:g}; report: "
               f"{found.output / 'reproduce.json'}")  # fmt: skip
    return out
