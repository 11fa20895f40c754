"""Per-item units read back for an interval or a test, trusted only when their sha256 is the one
the run card records (where it does) and their recomputed main score is the stored result
(docs/uncertainty.md, "Checked when read")."""

from __future__ import annotations

import json
from pathlib import Path

from neobench.core import results
from neobench.core.runs import Run
from neobench.evaluation import units as units_mod
from neobench.evaluation.units import TaskUnits

# The same formulas agree to ~1e-12; beyond 1e-6 it is another set of predictions.
TOLERANCE = 1e-6
FIX = "delete it and the task's result file beside it, then re-run the same `neobench eval`"


def read(run: Run, task: str) -> tuple[TaskUnits | None, str | None]:
    """The task's units of a single run, checked: (units, None); (None, None) when it saved
    none; (None, why) when the file fails."""
    path = results.units_path(run.folder, task)
    if not path.is_file():
        return None, None
    recorded = run.units_digests.get(task)
    if recorded is not None and results.digest(path) != recorded[0]:
        return None, (
            f"{path}: the units file changed since `neobench eval` wrote it (its sha256 is not "
            f"the {recorded[0]} its run card {recorded[1]} records), so the task has no "
            f"interval or test; {FIX}."
        )
    try:
        found = units_mod.read(path)
        score = units_mod.main_score(found)
    except (OSError, ValueError, KeyError, TypeError, IndexError) as error:
        kind = "is not complete JSON" if isinstance(error, json.JSONDecodeError) else "is damaged"
        return None, f"{path}: the units file {kind} ({type(error).__name__}); {FIX}."
    stored = run.scores.get(task)
    if stored is None or abs(score - stored) > TOLERANCE or found.task != task:
        return None, _mismatch(path, task, found, score, stored)
    return found, None


def _mismatch(path: Path, task: str, found: TaskUnits, score: float, stored: float | None) -> str:
    if found.task != task:
        what = f"holds the units of {found.task}, not of {task}"
    else:
        shown = "none" if stored is None else f"{stored:.6f}"
        what = f"gives {task} a main score of {score:.6f}, but the stored result is {shown}"
    return (
        f"{path}: the units file {what} (changed, or from another run), so the task has no "
        f"interval or test; {FIX}."
    )
