"""benchmarks/host_pipeline.py: the eval path with a null forward pass, split into stages by the
stage clock (benchmarks/stage_clock.py)."""

from __future__ import annotations

import contextvars
import json
import threading
from types import SimpleNamespace

import pytest
from conftest import benchmark_script

from benchmarks import stage_clock
from neobench.core import stages

host_pipeline = benchmark_script("host_pipeline")
ENCODER_STAGES = host_pipeline.ENCODER_STAGES


class FakeTime:
    """A clock that moves only when told, so stage arithmetic is exact."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_nested_stages_are_exclusive_and_workers_count_as_busy(monkeypatch):
    clock_time = FakeTime()
    monkeypatch.setattr(stage_clock.time, "monotonic", clock_time)
    clock = stage_clock.StageClock()
    with clock.running(), stages.stage("outer"):
        clock_time.now += 1.0
        with stages.stage("inner"):
            clock_time.now += 2.0
        clock_time.now += 0.5
        context = contextvars.copy_context()  # how the tokenizer worker is started
        worker = threading.Thread(target=context.run, args=(stages.busy, "tokenize", 4.0))
        worker.start()
        worker.join()
    assert dict(clock.seconds) == {"outer": 1.5, "inner": 2.0}
    assert dict(clock.busy_seconds) == {"tokenize": 4.0}
    with stages.stage("ignored"):  # the clock stopped with its block: nothing recorded or raised
        pass
    assert "ignored" not in clock.counts


def test_mteb_phases_are_laid_over_the_timeline(monkeypatch):
    """mteb's phase record of a call (seconds from its start) takes the time the stage around the
    call held inside each phase; neobench's own stages inside keep theirs; a nested phase wins
    over the one around it; a phase without a stage is left to the stage around the call."""
    clock_time = FakeTime()
    monkeypatch.setattr(stage_clock.time, "monotonic", clock_time)
    monkeypatch.setattr(stages.time, "monotonic", clock_time)
    clock = stage_clock.StageClock()
    phases = [
        {"name": "Scoring", "start": 0.0, "end": 3.0, "split": "test", "subset": ""},
        {"name": "Encoding corpus", "start": 0.5, "end": 2.5, "split": "test", "subset": ""},
        {"name": "Running experiment (1/10)", "start": 3.0, "end": 4.0, "split": "", "subset": ""},
    ]
    with clock.running(), stages.stage("other"):
        clock_time.now = 10.0
        with stages.mteb_call() as returned:  # the call starts at 10
            clock_time.now = 11.0
            with stages.stage("tokenize"):  # neobench's encoder, inside "Encoding corpus"
                clock_time.now = 12.0
            clock_time.now = 14.0
            returned.append(SimpleNamespace(evaluation_phases=phases))
        clock_time.now = 15.0
    assert dict(clock.seconds) == pytest.approx(
        {"other": 10.0 + 1.0 + 1.0, "tokenize": 1.0, "mteb encode call": 1.0, "scoring": 1.0}
    )
    assert sum(clock.seconds.values()) == pytest.approx(15.0)
    assert clock.counts["scoring"] == 1 and clock.counts["mteb encode call"] == 1


def test_a_result_without_phases_or_no_clock_places_nothing(monkeypatch):
    clock = stage_clock.StageClock()
    with clock.running(), stages.stage("other"), stages.mteb_call() as returned:
        returned.append(SimpleNamespace(evaluation_phases=None))  # a result read from a file
    assert set(clock.seconds) == {"other"}
    with stages.mteb_call() as returned:  # no clock: the results are simply not read
        returned.append(object())


@pytest.fixture(scope="module")
def bench_json(tmp_path_factory, mirror):
    out = tmp_path_factory.mktemp("bench") / "host.json"
    code = host_pipeline.main(
        [
            "--data-dir", str(mirror), "--tasks", "BIOSSES",
            "--cache", "off,cold,warm", "--json", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    return json.loads(out.read_text())


def test_json_holds_tokens_stages_and_tasks(bench_json):
    assert bench_json["tokens"] > 5_000  # BIOSSES' 200 sentences, tokenised
    seconds = bench_json["seconds"]
    for key in ("tokenize", "scoring", "other_host", "total", "forward", "load", "setup"):
        assert seconds[key] >= 0, key
    assert seconds["tokenize"] > 0 and seconds["total"] > seconds["other_host"] > 0
    assert [t["task"] for t in bench_json["tasks"]] == ["BIOSSES"]
    assert bench_json["settings"]["tasks"] == ["BIOSSES"]
    # Batches of the GPU path's size by default: the host cost a GPU waits on.
    assert bench_json["settings"]["token_budget"] == bench_json["token_budget"] == 32_768
    assert [r["cache"] for r in bench_json["runs"]] == ["off", "cold", "warm", "stock"]
    # Once per process, before the timed runs: start-up, then an untimed warm-up run.
    assert bench_json["startup_seconds"] > 0 and bench_json["warmup_seconds"] > 0


def test_main_thread_stages_add_up_to_the_wall_time(bench_json):
    for run in bench_json["runs"]:
        seconds = run["seconds"]
        summed = sum(v for k, v in seconds.items() if k not in SUMMARIES)
        if "tokenize" not in run["worker_busy_seconds"]:  # inline: counted among the stages
            summed += seconds["tokenize"]
        assert summed == pytest.approx(seconds["total"], rel=0.02, abs=0.02), run["cache"]
        # The main thread's tokenising: waiting for the feeder, plus tokenising inline if it did.
        waited = seconds.get("tokenize wait", 0.0)
        if "tokenize" not in run["worker_busy_seconds"]:
            waited += seconds["tokenize"]
        not_host = waited + seconds["forward"] + seconds["scoring"]
        assert seconds["other_host"] == pytest.approx(seconds["total"] - not_host, abs=0.02)
        # The main thread's CPU seconds: per stage never above its wall seconds (a thread
        # cannot run longer than it exists), and they add up to the run's.
        cpu = run["main_thread_cpu_seconds"]
        assert 0 < cpu["other_host"] <= seconds["other_host"] + 0.05
        for stage_name, value in cpu.items():
            assert 0 <= value <= seconds[stage_name] + 0.05, stage_name
        staged = sum(v for k, v in cpu.items() if k not in ("other_host", "total"))
        assert cpu["total"] == pytest.approx(staged, abs=0.002)
        # other_host split in two: the encoder's stages, and the rest around them.
        split = run["other_host_split"]
        inside = sum(seconds.get(s, 0.0) for s in ENCODER_STAGES)
        assert split["in_encoder"] == pytest.approx(inside, abs=0.002)
        assert split["in_encoder"] + split["around_encoder"] == pytest.approx(
            seconds["other_host"], abs=0.002
        )


SUMMARIES = ("tokenize", "other_host", "total")


def test_warm_cache_tokenises_nothing_and_every_run_scores_alike(bench_json):
    """The null embeddings are a function of the text: the cache must hand back the same
    vectors, and stock mteb with stock encode must score them exactly as neobench does."""
    runs = {r["cache"]: r for r in bench_json["runs"]}
    assert runs["warm"]["texts_encoded"] == 0 and runs["warm"]["tokens"] == 0
    assert runs["cold"]["texts_encoded"] > 0
    scores = {name: run["tasks"][0]["main_score"] for name, run in runs.items()}
    assert len({round(s, 6) for s in scores.values()}) == 1, scores
