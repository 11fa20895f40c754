"""The cache costs what it saves: what each policy stores, the cap with least recently used out
first, the version 2 -> 3 migration, and the size estimate of a whole v1 run. Scores are those of
the cache-off run in every mode (real all-MiniLM-L6-v2, BIOSSES and STS16 from the mirror)."""

import contextlib
import io
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import benchmark_script
from mteb.results import TaskResult

from neobench.cli.main import main
from neobench.core.card_io import read_card
from neobench.encoder import cache as cache_module
from neobench.encoder.cache import (
    CACHE_FILE,
    SCHEMA_VERSION,
    EmbeddingCache,
    used_bytes,
    vector_digest,
)
from neobench.protocol import cache_policy


def run_eval(minilm: Path, mirror: Path, root: Path, *flags: str, tasks: str = "BIOSSES") -> dict:
    """`neobench eval` of ``tasks`` into root/results; the scores and the run card's encoding."""
    argv = ["eval", "--model", str(minilm), "--data-dir", str(mirror), "--tasks", tasks]
    assert main([*argv, "--device", "cpu", "--results", str(root / "results"), *flags]) == 0
    scores = {
        name: TaskResult.from_disk(next((root / "results").rglob(f"{name}.json"))).get_score()
        for name in tasks.split(",")
    }
    (card,) = (root / "results").rglob("run-*.yaml")
    return {"scores": scores, **read_card(card)["encoding"]}


def rows(folder: Path) -> int:
    db = sqlite3.connect(folder / CACHE_FILE)
    (count,) = db.execute("SELECT COUNT(*) FROM emb").fetchone()
    db.close()
    return count


@pytest.fixture(scope="module")
def cache_off(minilm, mirror, tmp_path_factory) -> dict:
    """BIOSSES with --no-cache: its scores and record, and what it printed on stderr."""
    printed = io.StringIO()
    with contextlib.redirect_stderr(printed):  # rich's stderr console writes to sys.stderr
        found = run_eval(minilm, mirror, tmp_path_factory.mktemp("off"), "--no-cache")
    return found | {"stderr": printed.getvalue()}


@pytest.fixture(scope="module")
def cache_all(minilm, mirror, tmp_path_factory) -> tuple[Path, dict]:
    """BIOSSES with --cache-policy all: its cache folder (every text stored) and its record."""
    root = tmp_path_factory.mktemp("all")
    flags = ("--cache-dir", str(root / "cache"), "--cache-policy", "all")
    return root / "cache", run_eval(minilm, mirror, root, *flags)


@pytest.mark.slow
def test_every_policy_and_a_cap_give_the_cache_off_scores(
    minilm, mirror, tmp_path, cache_off, cache_all
):
    assert cache_off["cache_policy"] == "off" and cache_off["embedding_cache"] is None
    runs = {"all": cache_all[1]}
    # Three quarters of what BIOSSES's vectors take: mteb encodes each side of the pairs in its
    # own call, so the second call's store goes over the cap and evicts during the run.
    cap_gb = 0.75 * runs["all"]["cache_held_bytes"] / 1e9
    capped = ("--cache-policy", "all", "--cache-max-gb", f"{cap_gb:.9f}")
    for name, flags in {
        "reusable": (),
        "reusable, warm": (),  # the same cache again: read, nothing new to store
        "capped": capped,
    }.items():
        cache = ("--cache-dir", str(tmp_path / f"cache-{name.split(',')[0]}"))
        runs[name] = run_eval(minilm, mirror, tmp_path / name, *cache, *flags)
    kept = rows(tmp_path / "cache-capped")
    # The capped cache read again without a cap: what the cap kept is found, the rest encoded.
    cache = ("--cache-dir", str(tmp_path / "cache-capped"))
    runs["after the cap"] = run_eval(minilm, mirror, tmp_path / "after", *cache)
    for name, run in runs.items():
        assert run["scores"] == cache_off["scores"], name
    assert runs["reusable"]["cache_stores"]["BIOSSES"].startswith("stored: small")
    assert runs["reusable, warm"]["texts_encoded"] == 0
    capped = runs["capped"]
    assert capped["cache_max_bytes"] == int(float(f"{cap_gb:.9f}") * 1e9)
    assert capped["cache_evicted"] > 0 and 0 < kept < capped["texts_encoded"]
    assert capped["cache_held_bytes"] <= capped["cache_max_bytes"]
    assert runs["after the cap"]["texts_encoded"] == capped["texts_encoded"] - kept


@pytest.mark.slow
def test_a_cache_off_run_does_not_say_texts_came_from_the_cache(cache_off):
    said = " ".join(cache_off["stderr"].split())  # rich may wrap
    requested, encoded = cache_off["texts_requested"], cache_off["texts_encoded"]
    assert requested > encoded  # BIOSSES repeats some sentences within a side
    assert f"texts: {requested} requested, {encoded} encoded" in said
    assert f"{requested - encoded} repeats encoded once" in said
    assert "embedding cache off" in said and "from the embedding cache" not in said


@pytest.mark.slow
def test_reusable_stores_only_what_can_be_read_again(
    tiny_bert, mirror, tmp_path, monkeypatch, cache_all
):
    # What is stored depends on the tasks' texts, not on the model: the tiny BERT encodes STS16's
    # 2,400 sentences in seconds (the scores in each mode are MiniLM's, in the test above).
    # A threshold between the two tasks' sizes: BIOSSES is small, STS16 is large (no partner).
    biosses, sts16 = (cache_policy.task_texts(t) for t in _tasks("BIOSSES", "STS16"))
    monkeypatch.setattr(cache_policy, "SMALL_TASK_TEXTS", (biosses + sts16) // 2)
    cache = ("--cache-dir", str(tmp_path / "cache"))
    run = run_eval(tiny_bert, mirror, tmp_path / "both", *cache, tasks="BIOSSES,STS16")
    assert run["cache_stores"]["BIOSSES"].startswith("stored: small")
    assert run["cache_stores"]["STS16"].startswith("not stored: large")
    # What is on disk is BIOSSES's texts, as a run that stores everything of BIOSSES leaves.
    assert rows(tmp_path / "cache") == rows(cache_all[0]) == cache_all[1]["texts_encoded"]


def _tasks(*names: str) -> list:
    import mteb

    return list(mteb.get_tasks(tasks=list(names)))


def test_a_shared_corpus_is_stored_for_the_partner_that_reads_it_later():
    fever, climate = _tasks("FEVER", "ClimateFEVER")

    def prompt(task: str, side: str) -> str | None:
        return None

    first = cache_policy.decide("reusable", climate, ["FEVER", "MSMARCO"], prompt)
    assert first.store and "FEVER" in first.why
    last = cache_policy.decide("reusable", fever, ["MSMARCO"], prompt)  # ClimateFEVER ran
    assert not last.store and "large" in last.why

    def per_task(task: str, side: str) -> str:
        return f"{task}: "  # each task's documents under its own prompt: keys differ

    assert not cache_policy.decide("reusable", climate, ["FEVER"], per_task).store
    assert cache_policy.decide("all", fever, [], prompt).store
    assert not cache_policy.decide("off", fever, [], prompt).store


def test_least_recently_used_rows_go_first(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_module, "RESTAMP_MS", 0)  # every read stamps (normally once a minute)
    rng = np.random.default_rng(0)
    keys = [rng.bytes(32) for _ in range(600)]
    vectors = rng.standard_normal((600, 384)).astype(np.float32)
    cache = EmbeddingCache(tmp_path / CACHE_FILE, read_from=[])
    for start in range(0, 600, 100):  # six blocks, oldest first
        cache.put(keys[start : start + 100], vectors[start : start + 100])
        time.sleep(0.003)
    cache.lookup(keys[:100])  # the oldest block, read: now the most recently used
    full = cache.held_bytes()
    cache.close()
    capped = EmbeddingCache(tmp_path / CACHE_FILE, read_from=[], max_bytes=full // 2)
    capped.record_settings("all")  # applies the cap at once
    matrix, found = capped.lookup(keys)
    assert capped.held_bytes() <= full // 2 and capped.evicted > 0
    assert found[:100].all() and np.array_equal(matrix[:100], vectors[:100])
    # Blocks 2..6 were stored in order and never read: the oldest of them went first.
    kept = found[100:].reshape(5, 100).sum(axis=1)
    assert list(kept) == sorted(kept) and kept[0] == 0 and kept[-1] == 100


def test_a_version_2_cache_is_migrated_and_its_vectors_still_verify(tmp_path):
    path = tmp_path / CACHE_FILE
    old = sqlite3.connect(path)  # the layout of schema version 2
    vector = np.arange(8, dtype=np.float32).tobytes()
    with old:
        old.execute(
            "CREATE TABLE emb (key BLOB PRIMARY KEY, vec BLOB NOT NULL, digest BLOB NOT NULL)"
        )
        old.execute("INSERT INTO emb VALUES (?, ?, ?)", (b"k", vector, vector_digest(b"k", vector)))
        old.execute("PRAGMA user_version = 2")
    old.close()
    cache = EmbeddingCache(path)
    assert cache.events == [] and not list(tmp_path.glob(f"{CACHE_FILE}.*-*"))  # not moved aside
    assert cache.get_many([b"k"])[b"k"].tobytes() == vector
    version = cache.db.execute("PRAGMA user_version").fetchone()[0]
    assert version == SCHEMA_VERSION == 3
    cache.close()


def test_cache_info_shows_size_cap_and_policy(tmp_path, capsys):
    cache = EmbeddingCache(tmp_path / CACHE_FILE, read_from=[], max_bytes=2 * 10**9)
    cache.record_settings("reusable")
    cache.put([b"k" * 32], np.ones((1, 16), np.float32))
    held = used_bytes(cache.db)
    cache.close()
    assert main(["cache", "info", "--cache-dir", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    out = " ".join((captured.out + captured.err).split())
    assert f"database {held / 1e6:.1f} MB of the file's" in out
    assert "policy reusable, cap 2 GB" in out


@pytest.mark.parametrize(
    ("flags", "message", "fix"),
    [
        (
            ["--cache-max-gb", "-1"],
            "--cache-max-gb -1: must be a positive number of GB",
            "leave it out for no cap",
        ),
        (
            ["--cache-policy", "reusabel"],
            "Unknown --cache-policy value 'reusabel'. Did you mean 'reusable'?",
            "Valid: all, off, reusable.",
        ),
    ],
)
def test_a_bad_cache_setting_is_one_clear_message(flags, message, fix, minilm, tmp_path, capsys):
    argv = ["eval", "--model", str(minilm), "--tasks", "BIOSSES", *flags]
    assert main([*argv, "--results", str(tmp_path / "results")]) == 2
    captured = capsys.readouterr()
    output = " ".join((captured.out + captured.err).split())
    assert output.count("error:") == 1 and message in output and fix in output
    assert "Traceback" not in output
    assert not (tmp_path / "results").exists()


def test_the_default_policy_keeps_a_v1_run_under_a_quarter_of_storing_everything():
    est = benchmark_script("cache_estimate").estimate("MTEB(eng, v1)", dim=768)
    # mteb's statistics cover every task of v1 (CQADupstack through its parts).
    assert est.unknown == []
    assert est.gigabytes("reusable") <= est.gigabytes("all") / 4
    stored = est.stored["reusable"]
    assert "ClimateFEVER" in stored and "FEVER" not in stored  # FEVER reads ClimateFEVER's corpus
    assert "MSMARCO" not in stored and "BIOSSES" in stored
    assert est.stored["off"] == {}
