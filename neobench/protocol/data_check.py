"""`neobench data check`: every row of a manifest against its data, before anything is downloaded.

For each row: the revision exists, its config and split are there, every column the row reads is
there, its column expressions give text, and its first rows hold the hard negatives the recipe
keeps (k = min(max_hard_negatives, the negatives the row declares); a row with fewer is dropped in
training, so a wrong count would empty the dataset silently). The data is read where training
would read it: a mirror folder (``--data-dir``: ``<dir>/<hf repo id>/`` snapshots and the
rows' local ``data_files``), else the hub at the row's revision, on a connected machine (its info,
its card's configs and splits, and the first SAMPLE_ROWS rows streamed). A row that neither can
answer for (not in the mirror, the hub off or unreachable) is listed as not checked, with why:
that is not a failure. Every problem of every row is reported, one line each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neobench.core.errors import did_you_mean
from neobench.protocol import mirror
from neobench.protocol.config import STANDARD_RECIPE
from neobench.protocol.data import (
    as_text,
    columns_of,
    derive,
    extract,
    needed_columns,
    negatives_of,
    row_parts,
)
from neobench.protocol.manifest import Manifest, Row, declared_negatives, load_manifest
from neobench.protocol.recipe import load_recipe

SAMPLE_ROWS = 100  # the first rows read of each config and split a row reads
OK, PROBLEM, NOT_CHECKED = "ok", "problem", "not checked"


@dataclass
class RowCheck:
    """One manifest row: where it was checked, what was found, and its problems (one line each,
    naming the row, the problem and the fix)."""

    key: str
    repo_id: str
    revision: str  # as the manifest pins it, "null", or "-" (local files)
    where: str = ""  # hub @ <commit> | mirror | local files ('' when not checked)
    status: str = OK
    detail: str = ""
    problems: list[str] = field(default_factory=list)


@dataclass
class CheckReport:
    title: str
    rows: list[RowCheck]
    fix_unchecked: str  # how to check the rows that were not

    @property
    def problems(self) -> list[str]:
        return [p for r in self.rows for p in r.problems]

    @property
    def counts(self) -> dict[str, int]:
        """Rows per status, in the order ok, problem, not checked."""
        counts = {s: sum(r.status == s for r in self.rows) for s in (OK, PROBLEM, NOT_CHECKED)}
        return {s: n for s, n in counts.items() if n}


@dataclass(frozen=True)
class Source:
    """Where a row's data is read from: a hub repo at a commit, a mirror folder, local files."""

    kind: str  # hub | mirror | local
    path: str  # the hub repo id, the mirror's folder of the repo, or the folder of the files
    label: str  # for messages
    revision: str | None = None  # the hub commit
    data_files: tuple[str, ...] = ()


@dataclass
class _Context:
    """What every row's check shares."""

    manifest: Manifest
    recipe: str
    max_negatives: int  # the recipe's max_hard_negatives
    folder: Path | None
    lock: dict[str, dict]
    hub: _Hub

    def problem(self, checked: RowCheck, what: str, fix: str) -> None:
        checked.status = PROBLEM
        end = "" if what.endswith((".", "?")) else "."
        checked.problems.append(f"{self.manifest.name}: {checked.key}: {what}{end} Fix: {fix}.")


@dataclass(frozen=True)
class Read:
    """One config and split a row reads, the columns it needs there and the texts it takes."""

    config: str | None
    split: str
    columns: frozenset[str]
    texts: tuple[tuple[str, str], ...]  # (role, column expression)
    negatives: bool = False  # the row's hard negatives are read here


def check_manifest(
    manifest: str | None, data_dir: str | Path | None, recipe: str | None = None
) -> CheckReport:
    """Check every row of ``manifest`` (default: the recipe's) for ``recipe`` (default: the
    standard one, whose max_hard_negatives sets k), in the mirror ``data_dir`` where it holds
    the row, else on the hub where it can be reached."""
    found = load_recipe(recipe or STANDARD_RECIPE)
    loaded = load_manifest(manifest or found.manifest)
    folder = mirror.resolve_data_dir(data_dir)
    hub = _Hub()
    lock = mirror.read_lock(folder) if folder else {}
    context = _Context(loaded, found.name, found.values.max_hard_negatives, folder, lock, hub)
    rows = []
    for row in loaded.rows.values():
        pinned = "-" if row.data_files else row.revision or "null"  # local files: none applies
        checked = RowCheck(row.key, row.repo_id, pinned)
        k = min(found.values.max_hard_negatives, declared_negatives(row))
        try:
            _check_row(context, row, k, checked)
        except Exception as error:  # data that is there but cannot be read as the row reads it
            if checked.where.startswith("hub"):
                checked.status, checked.detail = NOT_CHECKED, f"the hub failed: {_first(error)}"
            else:
                context.problem(checked, f"cannot be read ({_first(error)})", "repair the data")
        if checked.problems:
            checked.detail = f"{len(checked.problems)} problem(s), listed below"
        rows.append(checked)
    where = f"data dir {folder}" if folder else "no data dir"
    title = (
        f"data check: manifest {loaded.name} ({len(rows)} rows) for recipe {found.name} "
        f"(max_hard_negatives={found.values.max_hard_negatives}); {where}, {hub.state()}"
    )
    out = folder or "DIR"
    fix = (
        f"on a connected machine, `neobench data check --manifest {loaded.name}`; or fetch them "
        f"with `neobench data prefetch --recipe {found.name} --out {out}` and check the mirror"
    )
    return CheckReport(title, rows, fix)


class _Hub:
    """Whether the hub can be asked, found out once and only when a row needs it (one TCP
    connect, never a hang)."""

    def __init__(self) -> None:
        self._why: str | None = None
        self.asked = False

    def why_not(self) -> str:
        """'' where the hub can be asked, else why not."""
        if not self.asked:
            self.asked = True
            if mirror.hub_offline():
                self._why = "HF_HUB_OFFLINE is set"
            elif not mirror.hub_reachable():
                self._why = "the Hugging Face hub is unreachable"
            else:
                self._why = ""
        return self._why or ""

    def state(self) -> str:
        if not self.asked:
            return "hub not needed"
        return f"hub off ({self._why})" if self._why else "hub reachable"


def _check_row(context: _Context, row: Row, k: int, checked: RowCheck) -> None:
    """Fill ``checked`` for one row: its source, then every config and split it reads."""
    folder = context.folder
    if row.data_files:
        files = [row.data_files] if isinstance(row.data_files, str) else list(row.data_files)
        if folder is None:
            checked.status = NOT_CHECKED
            checked.detail = "reads local files: pass --data-dir (the folder that holds them)"
            return
        gone = [f for f in files if not (folder / f).is_file()]
        for name in gone:
            fix = "put it there, or correct `data_files:`"
            context.problem(checked, f"data file {name} is not in {folder}", fix)
        if gone:
            return
        checked.where = "local files"
        label = f"{', '.join(files)} in {folder}"
        source = Source("local", str(folder), label, None, tuple(files))
    elif folder is not None and (folder / row.hf_id).is_dir():
        checked.where = "mirror"
        if not _mirror_revision(context, row, checked):
            return
        source = Source("mirror", str(folder / row.hf_id), f"the mirror's copy of {row.hf_id}")
    else:
        why = context.hub.why_not()
        if why:
            checked.status = NOT_CHECKED
            held = "not in the mirror" if folder else "no --data-dir"
            checked.detail = f"{held}; {why}"
            return
        commit = _hub_commit(context, row, checked)
        if commit is None:
            return
        checked.where = f"hub @ {commit[:12]}"
        if row.revision is None:
            checked.detail = f"unpinned: its head is {commit}; "
        source = Source("hub", row.hf_id, f"{row.hf_id} at {commit[:12]}", commit)
    _check_reads(context, row, k, source, checked)


def _mirror_revision(context: _Context, row: Row, checked: RowCheck) -> bool:
    """Whether the mirror's copy is the row's revision as far as its lock says (no lock entry:
    the revision cannot be checked offline, the data still can)."""
    entry = context.lock.get(row.hf_id)
    if entry is None:
        checked.detail = "revision not recorded (no lock entry); "
        return True
    if row.revision is not None and not mirror.lock_holds(entry, row.revision):
        context.problem(
            checked,
            f"revision {row.revision} is not the one the mirror {context.folder} holds (its "
            f"lock: {entry.get('resolved_revision')})",
            "pin the commit the mirror holds if that is the data meant, or fetch this one with "
            f"`neobench data prefetch --recipe {context.recipe} --out {context.folder}` on a "
            "connected machine",
        )
        return False
    checked.detail = f"lock: {str(entry.get('resolved_revision'))[:12]}; "
    return True


def _hub_commit(context: _Context, row: Row, checked: RowCheck) -> str | None:
    """The commit the hub resolves the row's revision to (its head where unpinned), else the
    problem: an unknown repo or revision."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    try:
        return HfApi().dataset_info(row.hf_id, revision=row.revision).sha
    except RevisionNotFoundError:
        context.problem(
            checked,
            f"the hub has no revision {row.revision} of {row.hf_id}",
            "pin a commit of the repo's history (its commits page lists them), or null",
        )
    except RepositoryNotFoundError:
        context.problem(
            checked,
            f"the hub has no dataset repo {row.hf_id!r} (or it is gated or private)",
            "correct `hf_id:`, or log in with `hf auth login` if it is gated",
        )
    return None


def row_reads(row: Row) -> list[Read]:
    """Every config and split the row reads (data.build_dataset's reads, in its order)."""
    if row.join == "beir":
        return [
            Read(row.config or "default", row.split, frozenset({"query-id", "corpus-id"}), ()),
            Read(
                "queries",
                "queries",
                frozenset({"_id", *columns_of(row.query)}),
                (("query", row.query),),
            ),
            Read(
                "corpus",
                "corpus",
                frozenset({"_id", *columns_of(row.positive)}),
                (("positive", row.positive),),
            ),
        ]
    split = "train" if row.data_files else row.split
    return [
        Read(
            None if row.data_files else part.get("config"),
            split,
            frozenset(needed_columns(row, part)),
            (("query", part["query"]), ("positive", part["positive"])),
            negatives=True,
        )
        for part in row_parts(row)
    ]


def _check_reads(context: _Context, row: Row, k: int, source: Source, checked: RowCheck) -> None:
    """Each config and split the row reads: there, with its columns, texts and negatives."""
    configs = None if source.data_files else _configs(source)
    notes = []
    for read in row_reads(row):
        where = _where(source, read)
        if configs is not None and read.config is not None and read.config not in configs:
            fix = "correct `config:`" + (" (or the part's)" if row.parts else "")
            context.problem(
                checked,
                f"config {read.config!r} is not in {source.label} (it has {configs})."
                f"{did_you_mean(read.config, configs)}",
                fix,
            )
            continue
        if not source.data_files:
            try:
                splits = _splits(source, read.config)
            except ValueError as error:  # a config is needed: several, none the default
                what = f"{_first(error)} in {source.label}"
                context.problem(checked, what, "name one in `config:`")
                continue
            if read.split not in splits:
                config = f" (config {read.config})" if read.config else ""
                context.problem(
                    checked,
                    f"split {read.split!r} is not in {source.label}{config} (it has {splits})",
                    _split_fix(context, source),
                )
                continue
        columns, records = _first_rows(source, read)
        missing = sorted(read.columns - set(columns))
        for column in missing:
            context.problem(
                checked,
                f"column {column!r} is not in {where} (it has {columns})."
                f"{did_you_mean(column, columns)}",
                "correct the row's column expressions",
            )
        if missing:
            continue
        if not records:
            context.problem(checked, f"{where} has no rows", "point the row at data")
            continue
        for record in records:
            derive(row, record)
        for role, expression in read.texts:
            if not any(as_text(extract(expression, r)) for r in records):
                context.problem(
                    checked,
                    f"{role} {expression!r} gives no text on the first {len(records)} rows of "
                    f"{where}, so every row would be dropped",
                    "correct the expression to the data's nesting",
                )
        if read.negatives and k > 0:
            notes += _negatives(context, row, k, records, where, checked)
        notes.append(f"{_split_name(read)}: first {len(records)} rows read")
    if checked.status == OK:
        checked.detail += "; ".join(notes) + (f"; k={k} hard negatives" if k else "")


def _negatives(
    context: _Context,
    row: Row,
    k: int,
    records: list[dict[str, Any]],
    where: str,
    checked: RowCheck,
) -> list[str]:
    """Problem when none of the first rows holds k hard negatives; a note when some lack them."""
    counts = [len(negatives_of(row, r)) for r in records]
    short = sum(c < k for c in counts)
    if short == len(counts):
        most = max(counts)
        fix = (
            f"declare at most {most} (`num_negatives: {most}`, or fewer `negatives:`)"
            if most
            else "correct the row's `negatives:` expressions"
        )
        context.problem(
            checked,
            f"needs k={k} hard negatives per row (the {declared_negatives(row)} it declares, "
            f"capped by the recipe's max_hard_negatives={context.max_negatives}), but none of "
            f"the first {len(counts)} rows of {where} has more than {most}: every row would be "
            "dropped",
            fix,
        )
        return []
    return [f"{short} of {len(counts)} lack {k} negatives (dropped)"] if short else []


def _configs(source: Source) -> list[str]:
    from datasets import get_dataset_config_names

    return list(get_dataset_config_names(source.path, revision=source.revision))


def _splits(source: Source, config: str | None) -> list[str]:
    from datasets import get_dataset_split_names

    return list(get_dataset_split_names(source.path, config, revision=source.revision))


def _first_rows(source: Source, read: Read) -> tuple[list[str], list[dict[str, Any]]]:
    """The column names and the first SAMPLE_ROWS rows, streamed (nothing downloaded whole)."""
    from datasets import load_dataset

    if source.kind == "local":
        files = [str(Path(source.path) / f) for f in source.data_files]
        stream = load_dataset("parquet", data_files=files, split="train", streaming=True)
    else:
        stream = load_dataset(
            source.path,
            name=read.config,
            split=read.split,
            revision=source.revision,
            streaming=True,
        )
    records = list(stream.take(SAMPLE_ROWS))
    columns = stream.column_names or (list(records[0]) if records else [])
    return list(columns), records


def _where(source: Source, read: Read) -> str:
    parts = [f"config {read.config}"] if read.config else []
    if not source.data_files:
        parts.append(f"split {read.split}")
    return source.label + (f" ({', '.join(parts)})" if parts else "")


def _split_name(read: Read) -> str:
    return f"{read.config}/{read.split}" if read.config else read.split


def _split_fix(context: _Context, source: Source) -> str:
    if source.kind == "mirror":
        return (
            "correct `split:`; or, if the mirror's copy lacks the split, fetch the repo again on a "
            f"connected machine: `neobench data prefetch --recipe {context.recipe} --out "
            f"{context.folder}`"
        )
    return "correct `split:`"


def _first(error: BaseException) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0][:200]
