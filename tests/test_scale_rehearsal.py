"""The scale rehearsal (benchmarks/scale_rehearsal.py): synthetic corpora of real text, one process
per size, fits, and the extrapolation to a whole benchmark; offline on the mirror, at tiny sizes."""

from __future__ import annotations

import copy
import hashlib
import json
import math

import pyarrow.parquet as pq
import pytest
from conftest import benchmark_script

from neobench.core.errors import NeobenchError
from neobench.protocol.config import DEFAULT_BENCHMARK
from neobench.protocol.tasks import load_benchmark

SIZES = [500, 1000]  # the plumbing and the fits: two sizes are enough, their scale proves nothing
QUERIES = 50
PER_SIZE = (
    "seconds", "worker_busy_seconds", "tokens", "texts_requested", "texts_encoded", "documents",
    "queries", "document_chars", "query_chars", "generated_bytes", "generation_seconds",
    "process_seconds", "peak_rss_bytes", "vm_hwm_bytes", "ru_maxrss_bytes", "cache_bytes",
    "datasets_cache_bytes", "result_bytes", "units_bytes", "main_score", "special_tokens",
    "max_seq_length",
)  # fmt: skip
STAGES = ("tokenize", "scoring", "forward", "other_host", "total", "load", "cache insert")
rehearsal = benchmark_script("scale_rehearsal")


@pytest.fixture(scope="module")
def scale_run(tmp_path_factory, mirror):
    folder = tmp_path_factory.mktemp("scale")
    out, work = folder / "scale.json", folder / "work"
    sizes = ",".join(map(str, reversed(SIZES)))  # given out of order: run and reported in order
    code = rehearsal.main(
        [
            "--data-dir", str(mirror), "--sizes", sizes,
            "--queries", str(QUERIES), "--work-dir", str(work), "--json", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    assert not (folder / "scale.json.partial").exists()  # the whole run written, the partial gone
    return json.loads(out.read_text()), work


def test_a_stopped_run_keeps_the_sizes_it_measured(tmp_path):
    """Each size measured is written at once beside --json (a long run stopped keeps them)."""
    out = tmp_path / "scale.json"
    rehearsal._keep_partial(out, [{"documents": 500_000, "seconds": {"total": 321.7}}])
    kept = json.loads(rehearsal.partial_path(out).read_text())
    assert kept["partial"] and kept["sizes_done"] == [500_000]
    assert kept["runs"][0]["seconds"]["total"] == 321.7 and not out.exists()


def test_every_size_is_measured_in_order(scale_run):
    record, _ = scale_run
    assert record["sizes"] == SIZES
    for run, size in zip(record["runs"], SIZES, strict=True):
        missing = [k for k in PER_SIZE if k not in run]
        assert not missing, missing
        assert run["documents"] == size and run["queries"] == QUERIES
        for stage in STAGES:
            assert run["seconds"][stage] >= 0, stage
        assert run["seconds"]["total"] > run["seconds"]["other_host"] > 0
        assert run["peak_rss_bytes"] > 100 * 2**20  # a Python process with torch and mteb
        assert run["vm_hwm_bytes"] > 0 and run["cache_bytes"] > 0 and run["units_bytes"] > 0
        assert run["result_bytes"] > 0 and run["datasets_cache_bytes"] > 0
        assert math.isfinite(run["main_score"])
        # No text repeats, so every text asked for is tokenised once and stored once.
        assert run["texts_requested"] == run["texts_encoded"] == size + QUERIES
        assert run["tokens"] > size * 10


def test_exponents_are_fitted_across_the_sizes(scale_run):
    record, _ = scale_run
    fits = record["exponents"]
    for name in rehearsal.FIGURES:
        assert name in fits, name
    for name in ("total_seconds", "tokens", "peak_rss_bytes", "cache_bytes"):
        assert isinstance(fits[name]["exponent"], float), name
    # Tokens grow with the documents (the queries stay): nearly, not more than, linearly.
    assert 0.8 < fits["tokens"]["exponent"] <= 1.0
    stages = set(record["runs"][0]["seconds"]) - {"total", "tokenize", "other_host"}
    assert set(fits["stages"]) == stages
    assert all(fit is None or fit["exponent"] == fit["exponent"] for fit in fits["stages"].values())


def test_the_extrapolation_covers_the_benchmark(scale_run):
    extra = scale_run[0]["extrapolation"]
    assert extra["largest_corpus"]["task"] == "MSMARCO"
    assert extra["largest_corpus"]["documents"] > 8_000_000
    assert extra["tokens"] > extra["distinct_texts"] > 10_000_000
    assert extra["texts"] >= extra["distinct_texts"]
    assert all(v > 0 for v in extra["disk_bytes"].values())
    assert extra["peak_rss_bytes"] > 0 and extra["host_hours"] > 0
    assert extra["tokenize_core_hours"] > 0 and extra["cores"] >= 1
    assert 0.1 < extra["tokens_per_char"] < 0.5  # English prose: about 4 to 5 characters a token
    assert len(extra["per_task"]) == extra["tasks"]


def test_the_temporary_folder_is_removed(scale_run):
    _, work = scale_run
    assert work.is_dir() and not any(work.iterdir())


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--sizes", "0,1000"], "--sizes 0: not a positive number of documents"),
        (["--sizes", "10x"], "--sizes 10x: not a positive number of documents"),
        (["--sizes", "1000"], "give at least two different sizes"),
        (["--queries", "0", "--sizes", "1k,2k"], "--queries 0: must be a positive number"),
        (["--cache", "warm", "--sizes", "1k,2k"], "--cache warm: choose on or off"),
        (["--queries", "100000", "--sizes", "1k,2k"], "--queries 100,000: SciFact, ArguAna"),
        (["--corpus-tasks", "STS12", "--sizes", "1k,2k"], "STS12 is a STS task"),
    ],
)
def test_bad_input_is_one_clear_message(argv, expected, mirror, tmp_path, capsys):
    work = tmp_path / "work"
    code = rehearsal.main(["--data-dir", str(mirror), "--work-dir", str(work), *argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert expected in " ".join(err.split()), err
    assert "Traceback" not in err
    assert not work.exists() or not any(work.iterdir())


@pytest.fixture(scope="module")
def pool(mirror):
    cmd = rehearsal.ScaleConfig(data_dir=str(mirror))
    return rehearsal.load_pool(rehearsal.source_tasks(cmd), cmd.corpus_tasks, cmd.query_tasks)


def test_corpora_are_seeded_distinct_and_grow_by_prefix(pool, tmp_path):
    def corpus(name: str, size: int, seed: int) -> tuple[str, list[str]]:
        rehearsal.write_task(tmp_path / name, pool, size, 50, seed)
        path = tmp_path / name / rehearsal.REPO_ID / "corpus" / "corpus-00000-of-00001.parquet"
        return hashlib.sha256(path.read_bytes()).hexdigest(), pq.read_table(path)[
            "text"
        ].to_pylist()

    digest, texts = corpus("a", 600, seed=0)
    assert corpus("b", 600, seed=0)[0] == digest  # same seed: the same bytes
    assert corpus("c", 600, seed=1)[1] != texts
    assert corpus("d", 200, seed=0)[1] == texts[:200]  # a smaller corpus is a prefix
    assert len(set(texts)) == len(texts)


def test_a_pool_too_small_for_a_size_is_refused(pool):
    tiny = copy.copy(pool)
    tiny.sentences, tiny.titles = pool.sentences[:10], pool.titles[:10]
    with pytest.raises(NeobenchError, match="make at most 100 distinct documents"):
        rehearsal.check_size(tiny, 101, 10)


def test_power_fit_recovers_an_exponent():
    sizes = [1e3, 4e3, 1.6e4]
    fit = rehearsal.power_fit(sizes, [3.0 * n**1.5 for n in sizes])
    assert fit["exponent"] == pytest.approx(1.5) and fit["coefficient"] == pytest.approx(3.0)
    assert rehearsal.power_fit(sizes, [0.0, 0.0, 5.0]) is None  # one positive point: no fit


def test_corpora_shared_by_two_tasks_are_counted_once():
    """FEVER and ClimateFEVER search the same 5.4 million documents: the cache stores them once."""
    tasks = [
        copy.deepcopy(t)
        for t in load_benchmark(DEFAULT_BENCHMARK).tasks
        if t.metadata.name in ("FEVER", "ClimateFEVER")
    ]
    totals = rehearsal.benchmark_totals(tasks, tokens_per_char=0.2, specials=2, max_len=512)
    rows = sorted(r["distinct_texts"] for r in totals["per_task"])
    assert rows[0] < 200_000 < 5_000_000 < rows[1]  # the second task's queries only
