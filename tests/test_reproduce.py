"""`neobench reproduce` on real official results (../shared/fixtures/mteb-results, written by
mteb for sentence-transformers/all-MiniLM-L6-v2) with the packaged model and the mirror: the
tasks whose mirrored data equals MTEB's reproduce within 1e-3; a forced wrong condition is found
and named; the official files stay readable by mteb; bad input is one clear message."""

from __future__ import annotations

import json

import pytest
from conftest import SHARED

from neobench.cli.main import main
from neobench.core.errors import NeobenchError
from neobench.reproduction.check import EvalSettings, normalisation_of, with_normalisation
from neobench.reproduction.official import load_official, results_root

OFFICIAL = SHARED / "fixtures" / "mteb-results"
NAME = "sentence-transformers/all-MiniLM-L6-v2"
# Mirrored exactly (the mirror's README): quick ones here; the closing note runs them all.
EXACT = ["STS13", "STS15", "STS16", "STSBenchmark", "SICK-R", "Banking77Classification"]


def reproduce(minilm, mirror, out, *extra) -> tuple[int, dict]:
    code = main(["reproduce", "--model", str(minilm), "--as", NAME, "--official", str(OFFICIAL),
                 "--data-dir", str(mirror), "--device", "cpu", "--output", str(out),
                 *extra])  # fmt: skip
    report = out / "reproduce.json"
    return code, json.loads(report.read_text()) if report.is_file() else {}


def test_the_official_files_are_read_through_mteb_with_their_conditions():
    official = load_official(results_root(str(OFFICIAL)), NAME, EXACT)
    assert official.revision == "8b3219a92973c328a8e22fadcfa821b5dc75636a"
    assert official.max_tokens == 256 and official.use_instructions is False
    assert set(EXACT) <= set(official.tasks)
    sts13 = official.tasks["STS13"]
    assert sts13.mteb_version == "1.12.75" and round(sts13.score, 5) == 0.80603
    # Emotion's file has two splits; mteb's get_score averages them, per split they differ.
    emotion = load_official(results_root(str(OFFICIAL)), NAME).tasks["EmotionClassification"]
    assert emotion.splits == ("test", "validation")
    assert round(emotion.scores_by_split["test"], 4) == 0.4083
    # MTEB(eng, v1) evaluates its test split only: compared there, not on the average.
    assert round(emotion.score_on(("test",)), 4) == 0.4083 and round(emotion.score, 4) == 0.4069


def test_the_exact_tasks_reproduce_within_the_tolerance(minilm, mirror, tmp_path, capsys):
    code, report = reproduce(minilm, mirror, tmp_path / "r", "--tasks", ",".join(EXACT))
    printed = capsys.readouterr()
    text = printed.out + printed.err  # the table on stdout, the lines below it on stderr
    assert code == 0, text
    assert report["within"] and [t["task"] for t in report["tasks"]] == EXACT
    for task in report["tasks"]:
        assert abs(task["difference"]) <= 1e-3 and task["verdict"] == "within", task
    # The reproduction's conditions are the official run's: the model's own length, no
    # instructions, its own normalisation, float32, batches of 32.
    assert report["conditions"] == {
        "max_seq_length": "model", "instructions": "none", "normalize": "model",
        "dtype": "float32", "batch_size": 32,
    }  # fmt: skip
    assert "6 of 6 tasks within 0.001" in " ".join(text.split())
    # Its results are plain mteb results: mteb reads them back.
    import mteb

    cache = mteb.ResultCache(tmp_path / "r" / "reproduced")
    # Under experiments/: the official conditions (no instructions, 256 tokens) are not
    # neobench's standard ones.
    back = cache.load_results(models=[NAME], include_remote=False, load_experiments="match_name")
    assert {t.task_name for m in back.model_results for t in m.task_results} == set(EXACT)
    # A finished eval under the official conditions is reused, not evaluated again.
    code, again = reproduce(minilm, mirror, tmp_path / "r2", "--tasks", "STS13,STS15",
                            "--results", str(tmp_path / "r" / "reproduced"))  # fmt: skip
    assert code == 0 and again["reused"] == ["STS13", "STS15"]
    first = [t["reproduced"] for t in report["tasks"][:2]]
    assert [t["reproduced"] for t in again["tasks"]] == first


def test_a_forced_wrong_max_length_is_found_and_named(minilm, mirror, tmp_path, capsys):
    code, report = reproduce(minilm, mirror, tmp_path / "r", "--tasks", "STS13",
                             "--max-seq-length", "16")  # fmt: skip
    capsys.readouterr()
    assert code == 1
    [task] = report["tasks"]
    assert not task["within"] and task["difference"] < -1e-3
    assert task["cause"] == "max length 16 -> model", task
    # Normalisation (tried first) does not move a cosine score: it is not named.
    assert any(k.startswith("normalisation") for k in task["tried"])
    assert task["verdict"] == "cause: max length 16 -> model"


def test_normalisation_is_changed_in_a_view_of_the_same_weights(minilm, tmp_path):
    assert normalisation_of(minilm)
    off = with_normalisation(minilm, False, tmp_path / "off")
    assert not normalisation_of(off)
    assert (off / "model.safetensors").resolve() == (minilm / "model.safetensors").resolve()
    on = with_normalisation(off, True, tmp_path / "on")
    assert normalisation_of(on)
    assert EvalSettings(normalize="off").differs(EvalSettings()) == "normalisation model -> off"


def test_bad_input_is_one_clear_message(minilm, tmp_path, capsys):
    cases = [
        (["--official", str(tmp_path / "nowhere")], "no such folder"),
        (["--official", str(OFFICIAL / "results")], "give the folder above it"),
        (["--official", str(tmp_path)], "holds no results/ folder"),
    ]
    for extra, said in cases:
        code = main(["reproduce", "--model", str(minilm), "--as", NAME, *extra])
        err = " ".join(capsys.readouterr().err.split())
        assert code == 2 and said in err and "Traceback" not in err, err
    code = main(["reproduce", "--model", str(minilm), "--official", str(OFFICIAL)])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "give --as HUB_ID" in err
    code = main(["reproduce", "--model", str(minilm), "--as", "someone/unknown-model",
                 "--official", str(OFFICIAL)])  # fmt: skip
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "no official results for someone/unknown-model" in err
    assert not (tmp_path / "reproduce").exists()


def test_remote_fails_fast_offline(minilm, monkeypatch):
    from neobench.reproduction import official

    monkeypatch.setattr(official, "RESULTS_HOST", ("127.0.0.1", 9))  # nothing listens there
    with pytest.raises(NeobenchError, match="not reachable"):
        results_root("remote")
