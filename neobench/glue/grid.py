"""`neobench glue` (nb.glue): every run of tasks x grid points x seeds for one model, the runs
already complete skipped, an interrupted one resumed; then the selection per task.

Layout: <output>/glue/<model name>/<revision>/<task>/<point key>/seed-<N>/ (run.py's folder),
and beside the tasks glue-card.yaml: the command's run card (recipe, grid, seeds, data).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neobench.core.card_io import now, read_card, write_card
from neobench.core.errors import NeobenchError, collect, unknown, writable_folder_problems
from neobench.core.provenance import environment
from neobench.glue.run import RunSpec, complete, run
from neobench.protocol.glue import (
    GLUE_CARD,
    ORDER,
    POINT_CARD,
    GlueSource,
    data_conflicts,
    data_sha256,
    known_tasks,
    parse_tasks,
)
from neobench.protocol.glue_recipe import (
    apply_glue_overrides,
    load_glue_recipe,
    point_key,
)
from neobench.protocol.glue_selection import Selected, select


@dataclass
class GlueSummary:
    folder: Path
    runs: int
    ran: int
    skipped: int
    selected: dict[str, Selected] = field(default_factory=dict)
    reported: dict[str, dict[str, Any]] = field(default_factory=dict)  # task -> mean validation
    pending: list[RunSpec] = field(default_factory=list)  # the runs left to run (estimates)

    def record(self) -> dict[str, Any]:
        """What `neobench glue --json` writes: the counts, and per task the selection and the
        selected point's mean validation score per split."""
        return {
            "folder": str(self.folder),
            "runs": self.runs,
            "ran": self.ran,
            "skipped": self.skipped,
            "tasks": {
                task: {"selected": dataclasses.asdict(chosen), "reported": self.reported[task]}
                for task, chosen in self.selected.items()
            },
        }


def model_folder(output: Path, name: str, revision: str) -> Path:
    return output / "glue" / name.replace("/", "__").replace(" ", "_") / revision


def run_glue(
    model: str,
    tasks: list[str],
    output: str,
    *,
    grid: str = "small",
    seeds: list[int] | None = None,
    overrides: dict[str, str] | None = None,
    recipe: str = "neobert-glue",
    data_dir: str | None = None,
    model_name: str | None = None,
    device: str = "auto",
    dry_run: bool = False,
    point: str | None = None,
    trust_remote_code: bool = False,
    say: Any = print,
) -> GlueSummary:
    """Run (or with ``dry_run`` only count) the grid, or with ``point`` (a point's key) only that
    point of it (a study's job); every input problem reported at once."""
    problems: list[str] = []
    chosen = collect(problems, parse_tasks, tasks)
    loaded = collect(problems, load_glue_recipe, recipe)
    if loaded is not None and overrides:
        loaded = collect(problems, apply_glue_overrides, loaded, overrides)
    the_grid = collect(problems, loaded.grid, grid) if loaded is not None else None
    keys = [point_key(p) for p in the_grid.points()] if the_grid is not None else []
    if point is not None and the_grid is not None and point not in keys:
        problems.append(unknown(f"point of grid {the_grid.name}", point, keys))
    source = collect(problems, GlueSource.of, data_dir)
    if source is not None:  # the known tasks' data, even when another name is unknown
        problems += source.problems(known_tasks(tasks))
    problems += writable_folder_problems(Path(output), "--output", "Pass another --output.")
    seeds = [0] if seeds is None else seeds
    if not seeds or any(s < 0 for s in seeds):
        problems.append("--seeds: give one or more seeds >= 0, e.g. 0,1,2.")
    if problems:
        raise NeobenchError(problems)
    from neobench.models.classifier import resolve

    try:
        name, revision, _ = resolve(model, name=model_name)
    except NeobenchError as error:
        if not dry_run:
            raise
        # A plan needs no weights: offline, a hub model's revision (and so its folder of
        # complete runs) is unknown; every run is counted as to run.
        say(f"note: {error.problems[0]} The runs already complete are not counted.")
        name, revision = model_name or model, "unresolved"
    points = [p for p in the_grid.points() if point is None or point_key(p) == point]
    data = source.record(chosen)
    card = {
        "model": {"spec": model, "name": name, "revision": revision},
        "recipe": loaded.record(),
        "grid": the_grid.record(),
        "seeds": seeds,
        "tasks": [t.name for t in chosen],
        "data": data,
        "data_sha256": data_sha256(data),
    }
    folder = model_folder(Path(output), name, revision)
    _check_folder(folder, card)
    specs = [
        RunSpec(task, p, point_key(p), s, loaded.at(p), loaded.sha256(loaded.at(p)), model,
                folder / task.name / point_key(p) / f"seed-{s}", _device(device),
                trust_remote_code)
        for task in chosen for p in points for s in seeds
    ]  # fmt: skip
    done = [s for s in specs if complete(s.folder)]
    summary = GlueSummary(folder, len(specs), 0, len(done))
    summary.pending = [s for s in specs if s not in done]
    say(f"{name}: {len(chosen)} task(s) x {len(points)} grid point(s) x {len(seeds)} seed(s) = "
        f"{len(specs)} runs, {len(done)} complete, {len(specs) - len(done)} to run")  # fmt: skip
    if dry_run:
        return summary
    _record(folder, card | {"started": now(), "environment": environment()})
    for spec in specs:
        if not complete(spec.folder):
            run(spec, source, say)
            summary.ran += 1
    for task in chosen:
        cards = [read_card(f / POINT_CARD) for f in (folder / task.name).glob("*/seed-*")]
        kept = [c for c in cards if c.get("status") == "complete" and c["key"] in set(keys)]
        found = select(task.name, kept, len(keys) * len(seeds))  # the whole grid
        summary.selected[task.name] = found
        reported = [c["validation"] for c in kept if c["key"] == found.key]
        splits = {split for r in reported for split in r}
        summary.reported[task.name] = {
            split: sum(r[split]["score"] for r in reported) / len(reported)
            for split in sorted(splits)
        }
    return summary


def run_complete(output: Path, name: str, task: str, key: str, seed: int) -> bool:
    """Whether the run of ``task`` at point ``key`` and ``seed`` of the model stored as ``name``
    is complete under the results root ``output``, at any revision of the model."""
    base = model_folder(output, name, "x").parent
    return any(complete(f.parent) for f in base.glob(f"*/{task}/{key}/seed-{seed}/{POINT_CARD}"))


def _check_folder(folder: Path, card: dict[str, Any]) -> None:
    """A folder holds one protocol's runs: another recipe, or other data for a task it holds,
    goes elsewhere (other tasks and grid points join it)."""
    path = folder / GLUE_CARD
    if not path.is_file():
        return
    old = read_card(path)
    differ = []
    if old.get("recipe", {}).get("sha256") != card["recipe"]["sha256"]:
        differ.append("recipe")
    if data_conflicts(old.get("data") or {}, card["data"]):
        differ.append("data")
    if differ:
        raise NeobenchError(
            f"--output: {folder} holds GLUE runs of another {' and '.join(differ)} "
            f"({path}). Pass another --output, or the same recipe, overrides and data."
        )


def _record(folder: Path, card: dict[str, Any]) -> None:
    """Write the command's card, its tasks and data files joined with those already recorded
    (jobs of one study write it at once: one at a time, under a lock beside it)."""
    from neobench.core import flock

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / GLUE_CARD
    try:
        lock = flock.acquire(folder / f".{GLUE_CARD}.lock", wait=True)
    except (flock.Unsupported, OSError):
        lock = None  # unlocked: only two writes at one moment could lose a task's entry
    try:
        if path.is_file():
            old = read_card(path)
            tasks = [t for t in ORDER if t in {*old.get("tasks", []), *card["tasks"]}]
            data = dict(card["data"])
            if data.get("source") == "folder":
                data["sha256"] = (old.get("data") or {}).get("sha256", {}) | data["sha256"]
            card = card | {"tasks": tasks, "data": data, "data_sha256": data_sha256(data)}
        write_card(path, card)
    finally:
        if lock is not None:
            flock.release(lock)


def _device(device: str) -> str:
    from neobench.models.load import resolve_device

    return resolve_device(device)
