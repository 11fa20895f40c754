"""A sweep's selection record (OUTPUT/sweeps/<model>.json): every point's dev metric per seed and
the point chosen, written once by `neobench study run` (neobench/study/sweep.py) and recorded by
each `neobench eval --sweep FILE` of the sweep's models in its run card."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from neobench.core.card_io import write_text_atomic
from neobench.core.errors import NeobenchError

SWEEPS = "sweeps"  # OUTPUT/sweeps/<model slug>.json: each backbone's selection
RULE = "highest mean over seeds of the fine-tunes' dev metric; ties: the earlier point"
VERSION = 1  # of the record's format and of the rule


@dataclass
class Selection:
    """One backbone's selection: every point's dev metric per seed, and the point chosen."""

    model: str
    sha256: str
    grid: dict[str, list[str]]
    metric: str
    rule: str
    selected: str  # the chosen point's label
    points: list[dict[str, Any]] = field(default_factory=list)  # label, values, mean, seeds
    made: str = ""
    version: int = VERSION

    def point(self, label: str) -> dict[str, Any]:
        return next(p for p in self.points if p["label"] == label)


def record_path(output: Path, model_slug: str) -> Path:
    return output / SWEEPS / f"{model_slug}.json"


def check_selection(path: Path, selection: Selection) -> Selection:
    """The one recorded at ``path`` (its time kept) when it agrees, ``selection`` when none is;
    one that differs means the fine-tunes changed under it, and is refused."""
    if not path.is_file():
        return selection
    held = read_selection(path)
    if any(getattr(held, k) != getattr(selection, k) for k in ("sha256", "selected", "points")):
        raise NeobenchError(
            f"{path}: a selection made earlier differs from what the fine-tunes now give "
            f"(it chose {held.selected}; they now give {selection.selected}). The sweep's "
            "fine-tunes changed after the choice: start the study in a new output folder."
        )
    return held


def write_selection(path: Path, selection: Selection) -> None:
    """Record the selection once (atomically); an existing record is left as it is."""
    if not path.is_file():
        write_text_atomic(path, json.dumps(asdict(selection), indent=1) + "\n")


def read_selection(path: Path) -> Selection:
    """A selection record; a file that is not one is a NeobenchError naming it."""
    try:
        data = json.loads(Path(path).read_text())
        return Selection(**data)
    except (OSError, ValueError, TypeError) as error:
        raise NeobenchError(
            f"{path}: not a sweep selection record ({error}). It is written by `neobench study "
            "run` once a sweep's fine-tunes are done."
        ) from None


def eval_record(path: Path, model_folder: str) -> dict[str, Any]:
    """What `neobench eval --sweep FILE` writes into its card: the sweep, its choice and on what,
    and which of its points the evaluated model is."""
    selection = read_selection(path)
    model = str(Path(model_folder).resolve())
    for point in selection.points:
        seeds = [s for s, f in point["folders"].items() if str(Path(f).resolve()) == model]
        if seeds:
            return {
                "sha256": selection.sha256,
                "file": str(Path(path).resolve()),
                "grid": selection.grid,
                "selected": selection.selected,
                "point": point["label"],
                "metric": f"dev {selection.metric}",
                "rule": selection.rule,
                "dev_mean": point["mean"],
                "dev_seeds": len(point["seeds"]),
                "seed": int(seeds[0]),
            }
    raise NeobenchError(
        f"--sweep {path}: the model {model_folder} is none of the sweep's fine-tunes; give the "
        "selection record of the sweep that made it."
    )
