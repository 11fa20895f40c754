"""The embedding cache never costs a score or a run: damaged vectors, damaged files, a full disk,
a file deleted mid-run, unusable folders. The real all-MiniLM-L6-v2 on BIOSSES from the mirror."""

import os
import random
import re
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from mteb.results import TaskResult

from neobench.cli.main import main
from neobench.core.card_io import read_card
from neobench.core.errors import NeobenchError
from neobench.encoder import cache as cache_module
from neobench.encoder.cache import CACHE_FILE, READ_ENV, EmbeddingCache
from neobench.encoder.encode import FastEncoder
from neobench.evaluation.runner import EvalConfig, Reporter, run_eval

pytestmark = pytest.mark.slow

# MiniLM on the mirror's BIOSSES under the standard conditions (paper instructions, 512 tokens,
# float32 on CPU); the official leaderboard's 0.8164 is another text version and no instruction.
STANDARD_BIOSSES = 0.7520
BIOSSES_TEXTS = 183  # distinct texts of BIOSSES's 100 pairs


def squash(text: str) -> str:
    """Without any whitespace: rich wraps, and folds long paths, at its 80 columns."""
    return "".join(text.split())


def eval_argv(model: Path, mirror: Path, root: Path, cache_dir: Path) -> list[str]:
    """`neobench eval` of BIOSSES under the standard conditions, results in root/results."""
    return [
        *("eval", "--model", str(model), "--data-dir", str(mirror), "--tasks", "BIOSSES"),
        *("--device", "cpu", "--results", str(root / "results"), "--cache-dir", str(cache_dir)),
    ]


def eval_cli(capsys, model: Path, mirror: Path, root: Path, cache_dir: Path) -> tuple[int, str]:
    code = main(eval_argv(model, mirror, root, cache_dir))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def cache_cli(capsys, action: str, folder: Path) -> tuple[int, str]:
    code = main(["cache", action, "--cache-dir", str(folder)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def biosses_score(root: Path) -> float:
    (path,) = (root / "results").rglob("BIOSSES.json")
    return TaskResult.from_disk(path).get_score()


def encoding_record(root: Path) -> dict:
    (card,) = (root / "results").rglob("run-*.yaml")
    return read_card(card)["encoding"]


def cache_warnings(caplog) -> str:
    return " ".join(r.getMessage() for r in caplog.records if r.name == "neobench.encoder.cache")


def assert_no_traceback(output: str, caplog) -> None:
    assert "Traceback" not in output and "Traceback" not in caplog.text


def rows(path: Path) -> int:
    db = sqlite3.connect(path)
    (count,) = db.execute("SELECT COUNT(*) FROM emb").fetchone()
    db.close()
    return count


def damage(path: Path, kind: str) -> None:
    """Garbage over every page but the first (which holds the schema), as a bad disk block would
    leave it; or garbage over the whole file, which is then not a database at all."""
    data = path.read_bytes()
    rng = random.Random(kind)
    if kind == "garbage pages":
        page = int.from_bytes(data[16:18], "big")  # the page size, from the SQLite header
        path.write_bytes(data[:page] + rng.randbytes(len(data) - page))
    else:
        path.write_bytes(rng.randbytes(len(data)))


@pytest.fixture(scope="module")
def healthy(minilm, mirror, tmp_path_factory) -> tuple[Path, float]:
    """One standard run: its cache folder (closed, so the WAL is folded in) and its score."""
    root = tmp_path_factory.mktemp("healthy")
    assert main(eval_argv(minilm, mirror, root, root / "cache")) == 0
    assert not Path(f"{root / 'cache' / CACHE_FILE}-wal").exists()
    return root / "cache", biosses_score(root)


@pytest.fixture
def cache_copy(healthy, tmp_path) -> Path:
    folder = tmp_path / "cache"
    shutil.copytree(healthy[0], folder)
    return folder


def test_the_standard_biosses_score_and_its_cache(healthy):
    folder, score = healthy
    assert round(score, 4) == STANDARD_BIOSSES
    assert rows(folder / CACHE_FILE) == BIOSSES_TEXTS


def test_damaged_vectors_are_dropped_and_encoded_again(
    healthy, cache_copy, minilm, mirror, tmp_path, capsys, caplog
):
    path = cache_copy / CACHE_FILE
    db = sqlite3.connect(path)
    picked = db.execute("SELECT key, vec FROM emb ORDER BY key LIMIT 60").fetchall()
    with db:
        for key, vec in picked:
            rotted = bytearray(vec)
            for byte in (3, 703, 1203):  # the sign/exponent byte of three float32s
                rotted[byte] ^= 0x5A
            db.execute("UPDATE emb SET vec = ? WHERE key = ?", (bytes(rotted), key))
    # Bit rot that SQLite cannot see: the file itself is sound.
    assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    db.close()

    code, output = eval_cli(capsys, minilm, mirror, tmp_path, cache_copy)
    assert code == 0
    assert_no_traceback(output, caplog)
    assert biosses_score(tmp_path) == healthy[1]  # exactly the score of the healthy cache
    assert "200 requested, 60 encoded" in " ".join(output.split())  # 100 pairs
    counts = re.findall(r"(\d+) cached embeddings failed their checksum", cache_warnings(caplog))
    assert sum(int(n) for n in counts) == 60
    assert encoding_record(tmp_path)["cache_damaged_entries"] == 60
    # The recomputed vectors replaced the damaged ones.
    again = EmbeddingCache(path)
    assert len(again.get_many([key for key, _ in picked])) == 60 and again.bad_entries == 0
    again.close()


@pytest.mark.parametrize("kind", ["garbage pages", "not a database"])
def test_a_damaged_file_is_reported_moved_aside_and_cleared(
    kind, healthy, cache_copy, minilm, mirror, tmp_path, capsys, caplog
):
    path = cache_copy / CACHE_FILE
    damage(path, kind)
    code, output = cache_cli(capsys, "info", cache_copy)
    assert code == 1 and "corrupt:" in output
    assert squash(f"fix: neobench cache clear --cache-dir {cache_copy}") in squash(output)

    code, output = eval_cli(capsys, minilm, mirror, tmp_path, cache_copy)
    assert code == 0 and biosses_score(tmp_path) == healthy[1]
    assert_no_traceback(output, caplog)
    (aside,) = cache_copy.glob(f"{CACHE_FILE}.corrupt-*")
    assert f"embedding cache {path} is damaged" in cache_warnings(caplog)
    assert f"moved to {aside} (with its -wal/-shm); starting a fresh cache" in cache_warnings(
        caplog
    )
    assert rows(path) == BIOSSES_TEXTS  # the fresh cache holds this run's embeddings

    code, output = cache_cli(capsys, "info", cache_copy)
    assert code == 0 and f"{BIOSSES_TEXTS} embeddings" in output
    assert "1 damaged or outdated cache(s) moved aside" in " ".join(output.split())

    damage(path, kind)
    code, output = cache_cli(capsys, "clear", cache_copy)
    assert code == 0
    assert squash(f"removed {path} (") in squash(output)
    assert squash(f"removed {aside} (") in squash(output)
    assert squash(f"started an empty cache at {path}") in squash(output)
    assert [p.name for p in cache_copy.iterdir()] == [CACHE_FILE]
    code, output = cache_cli(capsys, "info", cache_copy)
    assert code == 0 and "0 embeddings" in output and "checked ok" in output


def test_damage_met_in_the_middle_of_a_run(
    healthy, cache_copy, minilm, mirror, tmp_path, capsys, caplog, monkeypatch
):
    # A cache above the size limit is not read in full at open: its damage shows at a read.
    monkeypatch.setattr(cache_module, "QUICK_CHECK_MAX_BYTES", 0)
    damage(cache_copy / CACHE_FILE, "garbage pages")
    code, output = eval_cli(capsys, minilm, mirror, tmp_path, cache_copy)
    assert code == 0 and biosses_score(tmp_path) == healthy[1]
    assert_no_traceback(output, caplog)
    warned = cache_warnings(caplog)
    # Met by the first read or write after opening: the run's settings, written at once.
    assert "is damaged (database disk image is malformed, found while recording settings)" in warned
    assert "This run continues without the cache" in warned
    (aside,) = cache_copy.glob(f"{CACHE_FILE}.corrupt-*")
    assert f"moved to {aside}" in warned
    assert not (cache_copy / CACHE_FILE).exists()  # the next run starts a fresh one


def test_a_full_disk_stores_nothing_more_and_the_task_succeeds(
    healthy, minilm, mirror, tmp_path, capsys, caplog, tmpfs
):
    # 256 kB: room for an empty cache (32 kB -shm, the WAL, schema 3's table, index and meta
    # pages of 16 kB), not for BIOSSES's vectors (about 340 kB at 384 dimensions).
    folder = tmpfs("small", size_kb=256)
    code, output = eval_cli(capsys, minilm, mirror, tmp_path, folder)
    left = sorted(p.name for p in folder.iterdir())
    assert code == 0 and biosses_score(tmp_path) == healthy[1]
    assert_no_traceback(output, caplog)
    assert cache_warnings(caplog).count("the disk is full") == 1
    assert set(left) <= {CACHE_FILE, f"{CACHE_FILE}-wal", f"{CACHE_FILE}-shm"}  # SQLite's own


def test_a_cache_deleted_between_two_encode_calls_is_recreated(minilm, tmp_path, caplog):
    from sentence_transformers import SentenceTransformer

    path = tmp_path / CACHE_FILE
    fast = FastEncoder(SentenceTransformer(str(minilm), device="cpu"), "fp", EmbeddingCache(path))
    texts = [f"protein {i} binds the receptor" for i in range(40)]
    fast.embed(texts[:20], None)
    for file in tmp_path.glob(f"{CACHE_FILE}*"):
        file.unlink()
    fast.embed(texts[20:], None)
    assert (
        f"embedding cache {path} was deleted or replaced during this run: the 20 embeddings "
        "this run stored are no longer in it"
    ) in cache_warnings(caplog)
    keys = EmbeddingCache.keys("fp", "", texts)
    assert set(EmbeddingCache(path).get_many(keys)) == set(keys[20:])  # stored in the new file


class DeleteTheCacheWhenATaskStarts(Reporter):
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def task_started(self, task: str) -> None:
        for file in self.folder.glob(f"{CACHE_FILE}*"):
            file.unlink()


def test_a_cache_deleted_during_a_run_is_noticed(
    healthy, cache_copy, minilm, mirror, tmp_path, caplog
):
    cfg = EvalConfig(
        model=str(minilm),
        tasks=["BIOSSES"],
        data_dir=str(mirror),
        results=str(tmp_path / "results"),
        device="cpu",
        cache_dir=str(cache_copy),
    )
    summary = run_eval(cfg, DeleteTheCacheWhenATaskStarts(cache_copy))
    assert [o.status for o in summary.outcomes] == ["evaluated"]
    assert biosses_score(tmp_path) == healthy[1]
    assert "was deleted or replaced during this run" in cache_warnings(caplog)
    assert summary.texts_encoded == BIOSSES_TEXTS  # what the deleted file held, encoded again
    assert rows(cache_copy / CACHE_FILE) == BIOSSES_TEXTS  # and stored in the new file


@pytest.mark.parametrize(
    ("kind", "why"),
    [
        ("a file", "is a file, not a folder"),
        ("below a file", "cannot be created (Not a directory)"),
        ("read-only", "is on a read-only file system"),
    ],
)
def test_an_unusable_cache_folder_is_one_error_before_the_model_loads(
    kind, why, mirror, tmp_path, capsys, caplog, tmpfs
):
    # No model loads from an empty folder: the cache error coming alone shows it came first.
    model = tmp_path / "model-never-loaded"
    model.mkdir()
    (tmp_path / "notes").write_text("a file")
    folders = {"a file": tmp_path / "notes", "below a file": tmp_path / "notes" / "cache"}
    if kind == "read-only":
        folders[kind] = tmpfs("ro", size_kb=1024, read_only=True)
    folder = folders[kind]
    code, output = eval_cli(capsys, model, mirror, tmp_path, folder)
    left = list(folder.iterdir()) if kind == "read-only" else []
    assert code == 2
    assert output.count("error:") == 1
    assert squash(f"embedding cache folder {folder} {why}") in squash(output)
    assert "--cache-dir" in output and "--no-cache" in output
    assert_no_traceback(output, caplog)
    assert not (tmp_path / "results").exists() and not left
    assert (tmp_path / "notes").read_text() == "a file"


def test_a_cache_without_checksums_is_moved_aside_not_trusted(tmp_path, caplog):
    path = tmp_path / CACHE_FILE
    old = sqlite3.connect(path)  # the layout of neobench 0.1.0
    with old:
        old.execute("CREATE TABLE emb (key BLOB PRIMARY KEY, vec BLOB NOT NULL)")
        old.execute("INSERT INTO emb VALUES (?, ?)", (b"k", np.ones(4, np.float32).tobytes()))
    old.close()
    cache = EmbeddingCache(path)
    (aside,) = tmp_path.glob(f"{CACHE_FILE}.v1-*")
    assert "is outdated (written by neobench 0.1.0, without checksums" in cache_warnings(caplog)
    assert f"moved to {aside}" in cache_warnings(caplog)
    assert cache.get_many([b"k"]) == {}  # a fresh cache: the old vector is never served
    cache.put_many([(b"k", np.ones(4))])
    assert list(cache.get_many([b"k"])) == [b"k"]


def test_a_cache_of_a_newer_neobench_is_left_alone(tmp_path):
    path = tmp_path / CACHE_FILE
    newer = sqlite3.connect(path)
    newer.execute(f"PRAGMA user_version = {cache_module.SCHEMA_VERSION + 1}")
    newer.close()
    version = cache_module.SCHEMA_VERSION
    newer = rf"schema version {version + 1}, newer than this neobench's \({version}\)"
    with pytest.raises(NeobenchError, match=newer):
        EmbeddingCache(path)
    assert [p.name for p in tmp_path.iterdir()] == [CACHE_FILE]


def test_a_cache_locked_too_long_by_another_writer_is_switched_off(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(cache_module, "BUSY_TIMEOUT_S", 0.1)
    cache = EmbeddingCache(tmp_path / CACHE_FILE)
    other = sqlite3.connect(tmp_path / CACHE_FILE)  # another process in a long write
    other.execute("BEGIN EXCLUSIVE")
    cache.put_many([(b"k", np.ones(4))])
    other.rollback()
    assert "database is locked while storing; this run continues without the cache" in (
        cache_warnings(caplog)
    )
    assert cache.get_many([b"k"]) == {} and cache.db is None


# ------------------------------------------- other jobs' caches, read-only ($NEOBENCH_CACHE_READ)


def job_a_cache(healthy, tmp_path: Path, kind: str | None = None) -> Path:
    """A copy of the healthy run's cache as the finished "job A" left it, damaged when asked."""
    folder = tmp_path / "job-a"
    shutil.copytree(healthy[0], folder)
    if kind:
        damage(folder / CACHE_FILE, kind)
    return folder


def test_a_finished_jobs_cache_is_read_and_left_untouched(
    healthy, minilm, mirror, tmp_path, capsys, caplog, monkeypatch
):
    job_a = job_a_cache(healthy, tmp_path)
    before = (job_a / CACHE_FILE).read_bytes()
    monkeypatch.setenv(READ_ENV, os.pathsep.join([str(job_a), str(tmp_path / "job-b")]))
    code, output = eval_cli(capsys, minilm, mirror, tmp_path, tmp_path / "job-b")
    assert code == 0
    assert_no_traceback(output, caplog)
    assert "200 requested, 0 encoded" in " ".join(output.split())  # every text from job A
    assert biosses_score(tmp_path) == healthy[1]
    assert cache_warnings(caplog) == ""  # job B's own file, listed too, is simply not read twice
    assert rows(tmp_path / "job-b" / CACHE_FILE) == BIOSSES_TEXTS  # copied: local next time
    assert (job_a / CACHE_FILE).read_bytes() == before
    assert sorted(p.name for p in job_a.iterdir()) == [CACHE_FILE]  # no -wal, -shm or lock


@pytest.mark.parametrize("kind", ["garbage pages", "not a database", "missing"])
def test_a_damaged_or_missing_cache_of_another_job_is_skipped_with_one_warning(
    healthy, minilm, mirror, tmp_path, capsys, caplog, monkeypatch, kind
):
    job_a = job_a_cache(healthy, tmp_path, None if kind == "missing" else kind)
    if kind == "missing":
        (job_a / CACHE_FILE).unlink()
    before = sorted((p.name, p.read_bytes()) for p in job_a.iterdir())
    monkeypatch.setenv(READ_ENV, str(job_a / CACHE_FILE))
    code, output = eval_cli(capsys, minilm, mirror, tmp_path, tmp_path / "job-b")
    assert code == 0
    assert_no_traceback(output, caplog)
    assert f"{BIOSSES_TEXTS} encoded" in " ".join(output.split())
    assert biosses_score(tmp_path) == healthy[1]
    warnings = [r for r in caplog.records if r.name == "neobench.encoder.cache"]
    assert len(warnings) == 1 and str(job_a / CACHE_FILE) in warnings[0].getMessage()
    assert "left unchanged" in warnings[0].getMessage()
    assert encoding_record(tmp_path)["cache_warnings"] == [warnings[0].getMessage()]
    # Not ours: neither moved aside nor repaired, and nothing written beside it.
    assert sorted((p.name, p.read_bytes()) for p in job_a.iterdir()) == before


def test_a_vector_failing_its_checksum_in_another_jobs_cache(tmp_path, caplog):
    """The verified vectors are used and copied; the file is read no further, and not changed."""
    keys = EmbeddingCache.keys("fingerprint", "", [str(i) for i in range(4)])
    job_a = EmbeddingCache(tmp_path / "a" / CACHE_FILE, read_from=[])
    job_a.put_many((key, np.full(8, i + 1, dtype=np.float32)) for i, key in enumerate(keys))
    job_a.close()
    db = sqlite3.connect(tmp_path / "a" / CACHE_FILE)
    with db:
        db.execute("UPDATE emb SET vec = ? WHERE key = ?", (bytes(32), keys[0]))
    db.close()
    before = (tmp_path / "a" / CACHE_FILE).read_bytes()

    job_b = EmbeddingCache(tmp_path / "b" / CACHE_FILE, read_from=[tmp_path / "a"])
    assert sorted(job_b.get_many(keys)) == sorted(keys[1:])
    assert job_b.stored == 3 and job_b.get_many(keys[:1]) == {}  # skipped: asked once only
    assert len(job_b.events) == 1 and "1 cached embeddings failed their checksum" in cache_warnings(
        caplog
    )
    job_b.close()
    assert (tmp_path / "a" / CACHE_FILE).read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [CACHE_FILE]
