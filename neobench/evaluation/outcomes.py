"""What `neobench eval` reports: one outcome per task, the run's summary, the progress hooks."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from neobench.core.frames import frame, scaled


@dataclass
class TaskOutcome:
    task: str
    type: str
    status: str  # cached | evaluated | failed
    main_score: float | None = None
    seconds: float = 0.0
    error: str | None = None
    units: bool = False  # predictions/<Task>.units.json is beside the result (now or from before)
    units_bytes: int | None = None  # its size
    # sha256 of the units file this run wrote (16 hex): a file changed since is named on read
    units_sha256: str | None = None
    disk_full: bool = False  # the results disk filled up: the run stops after this task

    def card_entry(self) -> dict[str, Any]:
        """The task's row in the run card (the card is keyed by task name)."""
        return {k: v for k, v in asdict(self).items() if k not in ("task", "disk_full")}


@dataclass
class EvalSummary:
    results_dir: Path
    run_card: Path | None
    # The run evaluated (core/results.identity); None when no task was run (a shard with none)
    model: str | None = None
    revision: str | None = None
    experiment: str | None = None
    outcomes: list[TaskOutcome] = field(default_factory=list)
    texts_encoded: int = 0  # texts that went through the model in this run
    # texts mteb asked for; the rest came from the embedding cache, or were repeats of a text
    # in one request (encoded once)
    texts_requested: int = 0
    tokens_encoded: int = 0  # tokens of the encoded texts
    # The embedding cache the run read; None when it was off (--no-cache, --cache-policy off)
    embedding_cache: Path | None = None

    @property
    def failed(self) -> list[TaskOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    def to_pandas(self) -> Any:
        """One row per task: the run's model, revision and experiment, the task, its type,
        status (evaluated / cached / failed), main score (0-100 as in every frame of the API,
        core/frames.py; NaN for a failed task), seconds, error, whether units were saved."""
        run = {"model": self.model, "revision": self.revision, "experiment": self.experiment}
        rows = [
            {**run, "task": o.task, **o.card_entry(), "main_score": scaled(o.main_score)}
            for o in self.outcomes
        ]
        keys = [f.name for f in fields(TaskOutcome) if f.name != "disk_full"]
        return frame(rows, ["main_score"], [*run, *keys])


class Reporter:
    """Progress hooks; the library stays silent, the CLI renders these with rich."""

    def start(self, total: int, results_dir: Path) -> None: ...
    def task_started(self, task: str) -> None: ...
    def task_done(self, outcome: TaskOutcome) -> None: ...
