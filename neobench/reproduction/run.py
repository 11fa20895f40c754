"""`neobench reproduce` end to end: inputs checked, the official results read, each evaluation a
plain `neobench eval` (run_eval) into its own results root, the report written."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from neobench.core.errors import NeobenchError
from neobench.reproduction import check
from neobench.reproduction.check import EvalSettings, Reproduction
from neobench.reproduction.config import ReproduceCommand
from neobench.reproduction.official import OfficialTask, load_official, results_root

logger = logging.getLogger(__name__)

REPORT = "reproduce.json"
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def run_reproduce(cmd: ReproduceCommand) -> Reproduction:
    """Reproduce ``cmd.model``'s official scores (check.py's doc); the report is written to
    <output>/reproduce.json (and --json)."""
    import mteb

    from neobench.models.load import resolve_device
    from neobench.protocol import mirror
    from neobench.protocol.tasks import load_benchmark

    problems = _problems(cmd)
    if problems:
        raise NeobenchError(*problems)
    length = cmd.max_seq_length
    if isinstance(length, str) and length.isdigit():
        length = int(length)
    name = cmd.as_name or cmd.model
    root = results_root(cmd.official)
    benchmark = load_benchmark(cmd.benchmark)
    in_benchmark = [t.metadata.name for t in benchmark.tasks]
    official = load_official(root, name, cmd.tasks or in_benchmark)
    missing: dict[str, str] = {}
    if cmd.tasks:
        unknown = [t for t in cmd.tasks if t not in in_benchmark]
        if unknown:
            raise NeobenchError(
                f"--tasks {', '.join(unknown)}: not in {cmd.benchmark}; give --benchmark with them."
            )
        for task in cmd.tasks:
            if task not in official.tasks:
                missing[task] = f"no official result for {name} in {root}"
    tasks = [t for t in (cmd.tasks or in_benchmark) if t in official.tasks]
    if not tasks:
        raise NeobenchError(
            f"no task of {cmd.benchmark} has an official result for {name} in {root}"
            + (f" (asked: {', '.join(cmd.tasks)})" if cmd.tasks else "")
            + "."
        )
    output = Path(cmd.output).expanduser().resolve()
    data_dir = mirror.resolve_data_dir(cmd.data_dir)
    model_path = _local_folder(cmd.model)
    has_normalize = model_path is not None and check.normalisation_of(model_path)
    conditions = check.reference_conditions(
        official,
        {
            "max_seq_length": length, "instructions": cmd.instructions,
            "dtype": cmd.dtype, "batch_size": cmd.batch_size, "normalize": cmd.normalize,
        },
    )  # fmt: skip
    installed = mteb.__version__
    reused: list[str] = []

    def evaluate(model: str, cond: EvalSettings, names: list[str], results: Path, fresh: bool):
        return _evaluate(
            cmd, name, model_path, cond, names, results, fresh, official, data_dir, reused
        )

    def remaining(task: OfficialTask) -> list[str]:
        return _remaining(task, installed, data_dir, cmd.device)

    found = check.reproduce(
        cmd.model, official, tasks, conditions, output, evaluate, has_normalize, remaining,
        cmd.tolerance, diagnose=not cmd.no_diagnose,
        results=Path(cmd.results).expanduser().resolve() if cmd.results else None,
        half=not resolve_device(cmd.device).startswith("cpu"),
    )  # fmt: skip
    found.missing = missing
    found.reused = reused
    from neobench.core.card_io import write_text_atomic

    text = json.dumps(found.record(), indent=2) + "\n"
    write_text_atomic(output / REPORT, text)
    if cmd.json:
        write_text_atomic(Path(cmd.json), text)
    return found


def _problems(cmd: ReproduceCommand) -> list[str]:
    problems = []
    if not (0 < cmd.tolerance < 1):
        problems.append(f"--tolerance {cmd.tolerance}: give a main-score difference in (0, 1).")
    length = cmd.max_seq_length
    counted = str(length).isdigit() and int(length) > 0
    if length is not None and not (counted or length == "model"):
        problems.append(f"--max-seq-length {length}: give a number of tokens, or 'model'.")
    if cmd.batch_size is not None and cmd.batch_size < 1:
        problems.append(f"--batch-size {cmd.batch_size}: give a positive number of texts.")
    if cmd.as_name is not None and not HUB_ID.match(cmd.as_name):
        problems.append(f"--as {cmd.as_name}: give a hub id, owner/name.")
    if cmd.as_name is None and (
        Path(cmd.model).expanduser().exists() or not HUB_ID.match(cmd.model)
    ):
        problems.append(
            f"--model {cmd.model}: not a hub id; give --as HUB_ID, the name its official "
            "results are filed under (e.g. sentence-transformers/all-MiniLM-L6-v2)."
        )
    return problems


def _local_folder(model: str) -> Path | None:
    """The model's folder here: the path given, or its snapshot in the hub cache."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve()
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(model, local_files_only=True))
    # Not in the hub cache (or no hub id): the normalisation cause is skipped, and said so.
    except (LocalEntryNotFoundError, ValueError, OSError):
        return None


def _evaluate(
    cmd: ReproduceCommand,
    name: str,
    model_path: Path | None,
    cond: EvalSettings,
    names: list[str],
    results: Path,
    fresh: bool,
    official: Any,
    data_dir: Path | None,
    reused: list[str],
) -> check.Scores:
    """One `neobench eval` of ``names`` under ``cond`` into ``results``: main score per task on
    the official file's splits that it evaluated; the tasks found finished there (run_eval's
    resume) are added to ``reused``."""
    from mteb.results import TaskResult

    from neobench.evaluation.runner import run_eval
    from neobench.protocol.config import EvalConfig

    model = cmd.model
    if cond.normalize != "model":
        if model_path is None:
            return {t: (None, "normalisation: the model's folder is not here", ()) for t in names}
        on = cond.normalize == "on"
        model = str(check.with_normalisation(model_path, on, results / "model"))
    cfg = EvalConfig(
        model=model, model_name=name, benchmark=cmd.benchmark, tasks=names,
        instructions=cond.instructions, results=str(results), batch_size=cond.batch_size,
        max_seq_length=cond.max_seq_length, dtype=cond.dtype, data_dir=cmd.data_dir,
        device=cmd.device, trust_remote_code=cmd.trust_remote_code, no_cache=fresh,
        no_predictions=True,
    )  # fmt: skip
    if fresh:  # forward batches of the batch size itself, as mteb's encode runs them
        length = cond.max_seq_length if isinstance(cond.max_seq_length, int) else 512
        cfg.token_budget = cond.batch_size * length
    summary = run_eval(cfg)
    found: check.Scores = {}
    for outcome in summary.outcomes:
        if outcome.status == "failed":
            found[outcome.task] = (None, outcome.error or "failed", ())
            continue
        if outcome.status == "cached" and not fresh:
            reused.append(outcome.task)
        path = summary.results_dir / f"{outcome.task}.json"
        result = TaskResult.from_disk(path)
        splits = [s for s in official.tasks[outcome.task].splits if s in result.scores]
        if not splits:
            found[outcome.task] = (None, "none of the official splits was evaluated", ())
            continue
        found[outcome.task] = (float(result.get_score(splits=splits)), "", tuple(splits))
    return found


def _remaining(task: OfficialTask, installed: str, data_dir: Path | None, device: str) -> list[str]:
    """What still differs from the official run when no condition explains a miss."""
    import mteb

    here = mteb.get_task(task.task).metadata.dataset.get("revision")
    out = []
    if data_dir is not None:
        out.append(
            f"the data: read from the mirror {data_dir}, whose copy is not tied to the official "
            f"dataset revision {task.dataset_revision}"
        )
    elif task.dataset_revision and here and task.dataset_revision != here:
        out.append(f"the dataset revision: official {task.dataset_revision}, here {here}")
    if task.mteb_version and task.mteb_version != installed:
        out.append(f"mteb {task.mteb_version} -> {installed}")
    out.append(f"the hardware ({device} here)")
    return out
