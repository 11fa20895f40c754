"""`neobench eval` saves per-item units (neobench.evaluation.units) beside every task result.

The task-type modules are tested in their own files; here the registry is replaced by one STS
spec defined below, so the plumbing (staging, publication order, the card, --no-predictions,
results from before, failures) is tested on its own, with a tiny BERT on the mirror's BIOSSES.
"""

import errno
import logging
import pathlib

import mteb
import numpy as np
import pytest
import yaml
from mteb.results import TaskResult
from scipy.stats import spearmanr

from neobench.cli.main import main
from neobench.core.results import units_file
from neobench.evaluation import units


def _sts_build(task, predictions, subset, split):
    """Pairs: mteb's cosine scores and the task's gold scores normalized as mteb does."""
    # mteb keeps a task without subsets as {split: rows} (AbsTask.evaluate does the same lookup).
    rows = task.dataset.get(subset, task.dataset)[split]
    gold = [task._normalize(x) for x in rows["score"]]
    return list(range(len(gold))), {"pred": predictions["cosine_scores"], "gold": gold}


def _sts_score(data, idx, main_score):
    assert main_score == "cosine_spearman"
    return float(spearmanr(data["gold"][idx], data["pred"][idx])[0])


STS = units.TypeSpec(unit="pair", build=_sts_build, score=_sts_score)


@pytest.fixture(autouse=True)
def sts_only(monkeypatch):
    """The registry holds this file's STS spec only (the type modules are not needed here)."""
    monkeypatch.setattr(units, "registry", lambda: {"STS": STS})


@pytest.fixture
def evaluate(tiny_bert, mirror, tmp_path, capsys):
    """`neobench eval` on BIOSSES into tmp_path/res; returns (exit code, the task's folder)."""
    res = tmp_path / "res"

    def run(*extra):
        argv = ["eval", "--model", tiny_bert, "--data-dir", mirror, "--tasks", "BIOSSES"]
        argv += ["--instructions", "none", "--max-seq-length", "128", "--device", "cpu"]
        argv += ["--cache-dir", tmp_path / "cache", "--results", res, *extra]
        code = main([str(a) for a in argv])
        text = capsys.readouterr()
        assert "Traceback" not in text.out + text.err
        results = list(res.rglob("BIOSSES.json"))
        folder = next((p.parent for p in results if p.parent.name != "predictions"), None)
        return code, folder

    run.res = res
    return run


def last_card(folder) -> dict:
    cards = sorted((folder / "neobench").glob("run-*.yaml"), key=lambda p: p.stat().st_mtime_ns)
    return yaml.safe_load(cards[-1].read_text())


def assert_clean(res) -> None:
    """No staging folder, temporary file or raw mteb predictions file left in the results."""
    assert not (res / ".neobench-staging").exists()
    assert not [p for p in res.rglob("*") if p.name.endswith((".tmp", "_predictions.json"))]


def test_eval_saves_units_beside_the_result(evaluate, monkeypatch):
    seen = []  # the task as the build saw it: its data still loaded after mteb's evaluation
    build = units.build

    def spy(task, predictions, main_score):
        seen.append((task, task.data_loaded))
        return build(task, predictions, main_score)

    monkeypatch.setattr(units, "build", spy)
    code, folder = evaluate()
    assert code == 0
    ((task, loaded),) = seen
    assert loaded and not task.data_loaded and "unload_data" not in vars(task)  # unloaded after
    path = folder / "predictions" / "BIOSSES.units.json"
    assert units_file(folder, "BIOSSES") == path
    saved = units.read(path)
    assert (saved.task, saved.type, saved.main_score, saved.unit) == (
        "BIOSSES",
        "STS",
        "cosine_spearman",
        "pair",
    )
    assert [(p.subset, p.split, p.n) for p in saved.parts] == [("default", "test", 100)]
    # The file's score is mteb's rounded to 6 decimals; the units give the unrounded one.
    stored = TaskResult.from_disk(folder / "BIOSSES.json").get_score()
    assert abs(units.main_score(saved) - stored) <= 5e-7
    entry = last_card(folder)["tasks"]["BIOSSES"]
    assert entry["status"] == "evaluated" and entry["units"] is True
    assert entry["units_bytes"] == path.stat().st_size
    loaded = mteb.ResultCache(evaluate.res).load_results(load_experiments="match_name")
    (model,) = loaded.model_results
    assert [t.task_name for t in model.task_results] == ["BIOSSES"]
    assert_clean(evaluate.res)


def test_a_resample_is_scored_on_the_resampled_pairs(evaluate):
    _, folder = evaluate()
    saved = units.read(units_file(folder, "BIOSSES"))
    (part,) = saved.parts
    idx = np.random.default_rng(0).integers(0, part.n, part.n)  # with repeats
    direct = spearmanr(part.data["gold"][idx], part.data["pred"][idx])[0]
    assert units.part_score(saved, part, idx) == pytest.approx(direct, abs=1e-12)


def test_no_predictions_and_results_from_before_are_not_rerun(evaluate):
    code, folder = evaluate()
    assert code == 0 and units_file(folder, "BIOSSES") is not None
    # A run killed between the units file and the task file: the re-run, without units,
    # removes the units that belong to no result.
    (folder / "BIOSSES.json").unlink()
    assert evaluate("--no-predictions")[0] == 0
    assert units_file(folder, "BIOSSES") is None
    entry = last_card(folder)["tasks"]["BIOSSES"]
    assert (entry["status"], entry["units"], entry["units_bytes"]) == ("evaluated", False, None)
    # A result without units is done: a run with units on keeps it and adds none.
    before = (folder / "BIOSSES.json").read_bytes()
    assert evaluate()[0] == 0
    entry = last_card(folder)["tasks"]["BIOSSES"]
    assert (entry["status"], entry["units"]) == ("cached", False)
    assert units_file(folder, "BIOSSES") is None
    assert (folder / "BIOSSES.json").read_bytes() == before
    assert_clean(evaluate.res)


def test_a_units_build_that_fails_keeps_the_result(evaluate, monkeypatch, caplog):
    def broken(task, predictions, subset, split):
        raise KeyError("cosine_scores")

    spec = units.TypeSpec("pair", broken, _sts_score)
    monkeypatch.setattr(units, "registry", lambda: {"STS": spec})
    with caplog.at_level(logging.WARNING, logger="neobench.evaluation.staging"):
        code, folder = evaluate()
    assert code == 0
    assert TaskResult.from_disk(folder / "BIOSSES.json").get_score() > -1
    assert units_file(folder, "BIOSSES") is None
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "neobench.evaluation.staging"]
    assert "BIOSSES: per-item units not saved (KeyError" in warning
    assert last_card(folder)["tasks"]["BIOSSES"]["units"] is False
    assert_clean(evaluate.res)


def test_units_that_do_not_give_mteb_s_score_are_not_saved(evaluate, monkeypatch, caplog):
    off = units.TypeSpec("pair", _sts_build, lambda data, idx, name: 0.5)
    monkeypatch.setattr(units, "registry", lambda: {"STS": off})
    with caplog.at_level(logging.WARNING, logger="neobench.evaluation.staging"):
        code, folder = evaluate()
    assert code == 0 and units_file(folder, "BIOSSES") is None
    assert "differs from mteb's" in caplog.text


def test_a_full_disk_while_writing_units_is_a_full_disk(evaluate, monkeypatch):
    write_text = pathlib.Path.write_text

    def full(path, *args, **kwargs):
        if path.parent.name == units.FOLDER:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return write_text(path, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", full)
    code, folder = evaluate()
    assert code == 1
    # The task failed before its file: no result, no units, nothing half-written.
    assert folder is None and not list(evaluate.res.rglob("predictions"))
    (card,) = evaluate.res.rglob("run-*.yaml")
    card = yaml.safe_load(card.read_text())
    assert card["status"] == "failed: results disk full"
    assert card["tasks"]["BIOSSES"]["units"] is False
    assert_clean(evaluate.res)
