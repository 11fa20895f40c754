"""Units of the pair types (STS, Summarization, PairClassification) give back mteb's main score.

Each test runs a whole mirror task with the tiny BERT through neobench's encoder (deduplicated
texts: TwitterURLCorpus encodes ~45k unique texts instead of 103k), saves mteb's predictions,
and checks that the units rebuilt from them score exactly what mteb computed in memory, and that
a resample scores what mteb's own metric code gives on the resampled items.
"""

from __future__ import annotations

import json
from pathlib import Path

import mteb
import numpy as np
import pytest
from mteb._evaluators.text.summarization_evaluator import DeprecatedSummarizationEvaluator
from scipy.stats import spearmanr

from neobench.encoder.encode import FastEncoder
from neobench.evaluation import units
from neobench.evaluation.adapter import MtebEncoder
from neobench.evaluation.units import pair_classification, sts, summarization
from neobench.models.load import load_model
from neobench.protocol import mirror as mirror_mod
from neobench.report import bootstrap


def _evaluate(name: str, model_dir: Path, mirror: Path, tmp_path: Path):
    """(task with its data loaded, the predictions file's content, mteb's in-memory scores)."""
    loaded = load_model(str(model_dir), max_seq_length=128)
    model = MtebEncoder(loaded.model, {}, FastEncoder(loaded.model, "tiny", cache=None))
    task = mteb.get_task(name)
    mirror_mod.point_tasks_at_mirror([task], Path(mirror).resolve(), "MTEB(eng, v1)")
    task.load_data()  # loaded here, mteb leaves it loaded: build reads the gold data
    folder = tmp_path / "predictions"
    result = mteb.evaluate(
        model, [task], cache=None, prediction_folder=folder, show_progress_bar=False
    )
    predictions = json.loads((folder / f"{name}_predictions.json").read_text())
    return task, predictions, result.task_results[0].scores


def _check_main_score(task, predictions, scores, tmp_path: Path) -> units.TaskUnits:
    built = units.build(task, predictions, task.metadata.main_score)
    mteb_score = np.mean([s["main_score"] for split in scores.values() for s in split])
    assert abs(units.main_score(built) - mteb_score) < 1e-6
    # The JSON file scores the same (the short float32 forms read back to the same floats).
    path = units.path_for(tmp_path / "results", task.metadata.name)
    path.parent.mkdir(parents=True)
    path.write_text(units.to_json(built))
    assert units.main_score(units.read(path)) == units.main_score(built)
    return built


def _resample(n: int) -> np.ndarray:
    return np.random.default_rng(0).integers(0, n, size=n)  # with repeats, as a bootstrap draws


def test_sts_units_give_mteb_score(tiny_bert, mirror, tmp_path):
    task, predictions, scores = _evaluate("STSBenchmark", tiny_bert, mirror, tmp_path)
    built = _check_main_score(task, predictions, scores, tmp_path)
    part = built.parts[0]
    assert part.n == 1379 and set(part.data) == {"pred", "gold"}
    idx = _resample(part.n)
    raw = predictions["default"]["test"]["cosine_scores"]
    gold = [task._normalize(x) for x in task.dataset["test"]["score"]]
    expected = spearmanr([gold[i] for i in idx], [raw[i] for i in idx])[0]
    assert units.part_score(built, part, idx) == pytest.approx(expected, abs=1e-12)
    # The bootstrap's block computation gives scipy's Spearman on the real pairs too.
    rows = np.random.default_rng(1).integers(0, part.n, size=(50, part.n))
    fast = sts.score_many(part.data, rows, "cosine_spearman")
    slow = [sts.score(part.data, row, "cosine_spearman") for row in rows]
    assert np.abs(fast - slow).max() < 1e-12


@pytest.mark.parametrize(
    ("name", "deprecated"),
    [("SummEval", True), ("SummEvalSummarization.v2", False)],  # with and without mteb's bug
)
def test_summarization_units_give_mteb_score(name, deprecated, tiny_bert, mirror, tmp_path):
    task, predictions, scores = _evaluate(name, tiny_bert, mirror, tmp_path)
    # SummEval's evaluator averages each text's p-value in with its correlation (mteb issue 1156).
    assert issubclass(task.evaluator, DeprecatedSummarizationEvaluator) == deprecated
    built = _check_main_score(task, predictions, scores, tmp_path)
    part = built.parts[0]
    saved = predictions["default"]["test"]
    assert part.n == len(saved["human_scores"]) and part.ids[0] == "0"
    idx = _resample(part.n)
    # mteb's own metric code on the resampled texts (it never reads ``self``).
    resampled = {key: [saved[key][i] for i in idx] for key in saved}
    expected = task.evaluator._calculate_metrics(None, resampled)["cosine_spearman"]
    assert units.part_score(built, part, idx) == pytest.approx(expected, abs=1e-12)
    # A text mteb dropped (all its scores equal) is missing from the predictions: the others
    # keep their own dataset rows as ids.
    dropped = {key: values[:3] + values[4:] for key, values in saved.items()}
    ids, data = summarization.build(task, dropped, "default", "test")
    assert ids[:4] == ["0", "1", "2", "4"] and len(ids) == len(data["term"]) == part.n - 1
    assert np.array_equal(data["term"], np.delete(part.data["term"], 3))
    # Another model that dropped that text is compared with this one on the texts both kept.
    other = units.build(task, {"default": {"test": dropped}}, task.metadata.main_score)
    assert other.parts[0].rows == part.rows == len(task.dataset["test"])
    pair = bootstrap.shared(built, other)
    assert (pair.only_baseline, pair.only_other, pair.baseline.parts[0].n) == (1, 0, part.n - 1)
    result = bootstrap.paired(built, other, resamples=200)
    assert (result.delta, result.low, result.high, result.p) == (0.0, 0.0, 0.0, 1.0)
    assert result.baseline == units.main_score(other) != units.main_score(built)


def test_pair_classification_units_give_mteb_score(tiny_bert, mirror, tmp_path):
    task, predictions, scores = _evaluate("TwitterURLCorpus", tiny_bert, mirror, tmp_path)
    assert task.metadata.main_score == "max_ap"
    built = _check_main_score(task, predictions, scores, tmp_path)
    part = built.parts[0]
    assert part.n == 51534 and set(part.data) == {"label", *pair_classification.FUNCTIONS}
    # The other metrics come back from the stored scores too: every AP, and the threshold
    # searches of one function (mteb's Python loops over 51k pairs: one function is enough).
    everything = np.arange(part.n)
    for name, value in scores["test"][0].items():
        if name.endswith("_ap") or name.startswith("cosine_"):
            assert abs(pair_classification.score(part.data, everything, name) - value) < 1e-6, name
    idx = _resample(part.n)
    saved = predictions["default"]["test"]
    labels = part.data["label"][idx].astype(np.int64)
    metrics = task._compute_metrics({key: [saved[key][i] for i in idx] for key in saved}, labels)
    assert units.part_score(built, part, idx) == pytest.approx(metrics["max_ap"], abs=1e-12)
    # The bootstrap's block computation gives sklearn's AP on the real pairs too.
    rows = np.random.default_rng(1).integers(0, part.n, size=(12, part.n))
    fast = pair_classification.score_many(part.data, rows, "max_ap")
    slow = [pair_classification.score(part.data, row, "max_ap") for row in rows]
    assert np.abs(fast - slow).max() < 1e-9


def test_compact_keeps_float32_values_and_order():
    values = np.float32(np.random.default_rng(1).normal(size=1000)).astype(np.float64)
    values[10] = values[11]  # a tie
    short = np.asarray(sts.compact(values.tolist()))
    assert np.array_equal(short.astype(np.float32).astype(np.float64), values)
    assert np.array_equal(np.argsort(short, kind="stable"), np.argsort(values, kind="stable"))
    assert short[10] == short[11]
    assert len(json.dumps(short.tolist())) < 0.7 * len(json.dumps(values.tolist()))
    full = [0.1 + 1e-12, 0.3]  # not float32 values: kept as they are
    assert sts.compact(full) == full


@pytest.mark.parametrize("main_score", ["cosine_spearman", "cosine_pearson"])
def test_block_spearman_equals_scipy_with_ties(main_score, monkeypatch):
    rng = np.random.default_rng(10)
    gold = rng.integers(0, 6, size=800) / 5  # 6 gold values: long runs of ties
    data = {"gold": gold, "pred": np.round(gold + rng.normal(0, 0.3, size=800), 1)}
    idx = rng.integers(0, 800, size=(30, 800))
    monkeypatch.setattr(sts, "BLOCK", 4 * 800)  # several blocks, a short last one
    fast = sts.score_many(data, idx, main_score)
    slow = [sts.score(data, row, main_score) for row in idx]
    assert np.abs(fast - slow).max() < 1e-12


def _tied_pairs(n: int, seed: int) -> dict[str, np.ndarray]:
    """Pair-classification data with many tied scores (two decimals) in every function."""
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < 0.3).astype(np.int64)
    data = {"label": labels}
    for name, (_, higher) in pair_classification.FUNCTIONS.items():
        signal = labels * (1.0 if higher else -1.0) * rng.random()
        data[name] = np.round(rng.normal(size=n) + signal, 2)
    return data


@pytest.mark.parametrize("main_score", ["max_ap", "cosine_ap", "euclidean_ap"])
def test_block_ap_equals_sklearn_on_every_resample(main_score, monkeypatch):
    data = _tied_pairs(3000, seed=4)
    assert len(np.unique(data["cosine"])) < 1000  # ties everywhere
    idx = np.random.default_rng(5).integers(0, 3000, size=(40, 3000))
    monkeypatch.setattr(pair_classification, "BLOCK", 7 * 3000)  # several blocks, a short last
    fast = pair_classification.score_many(data, idx, main_score)
    slow = np.asarray([pair_classification.score(data, row, main_score) for row in idx])
    assert np.abs(fast - slow).max() < 1e-9


def test_block_ap_edge_resamples():
    """A resample drawing one pair many times, one without any positive (sklearn's own answer),
    and one where the top-scored pairs are not drawn at all."""
    data = _tied_pairs(50, seed=6)
    negatives = np.flatnonzero(data["label"] == 0)
    top = np.argsort(-data["cosine"])[:10]
    rest = np.setdiff1d(np.arange(50), top)
    idx = np.stack([np.full(50, 7), np.resize(negatives, 50), np.resize(rest, 50)])
    with pytest.warns(UserWarning, match="No positive class"):
        slow = [pair_classification.score(data, row, "max_ap") for row in idx]
    with pytest.warns(UserWarning, match="No positive class"):
        fast = pair_classification.score_many(data, idx, "max_ap")
    assert np.abs(fast - slow).max() < 1e-12


def test_threshold_metrics_keep_mteb_s_search():
    """max_f1 and the like go through mteb's threshold searches, one resample at a time."""
    data = _tied_pairs(300, seed=8)
    idx = np.random.default_rng(9).integers(0, 300, size=(3, 300))
    fast = pair_classification.score_many(data, idx, "max_f1")
    assert fast.tolist() == [pair_classification.score(data, row, "max_f1") for row in idx]
