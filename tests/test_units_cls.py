"""Classification and Clustering units: the main score recomputed from mteb's saved predictions
equals mteb's own (whole mirror tasks, tiny BERT), and a resample scores as mteb's metric does."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mteb
import numpy as np
import pytest
from datasets import Dataset
from sentence_transformers import SentenceTransformer
from sklearn.metrics import accuracy_score, v_measure_score

from neobench.evaluation import units
from neobench.evaluation.units import classification, clustering
from neobench.protocol import mirror as mirror_mod


@pytest.fixture(autouse=True)
def _only_these_types(monkeypatch):
    # The other types' modules land on other branches; these tests need only these two.
    specs = {"Classification": classification.SPEC, "Clustering": clustering.SPEC}
    monkeypatch.setattr(units, "registry", lambda: specs)


def _evaluated(
    name: str,
    benchmark: str,
    model_dir: Path,
    mirror: Path,
    tmp_path: Path,
    prepare: Callable[[Any], None] | None = None,
):
    """(task with its data loaded, mteb's predictions file content, mteb's in-memory result);
    ``prepare`` may change the loaded data before mteb evaluates it."""
    task = copy.deepcopy(
        next(t for t in mteb.get_benchmark(benchmark).tasks if t.metadata.name == name)
    )
    mirror_mod.point_tasks_at_mirror([task], Path(mirror).resolve(), benchmark)
    # Loaded beforehand, mteb leaves the data loaded (what build needs); loaded by mteb, it is
    # unloaded after, and unloading also drops the metadata pointing at the mirror.
    task.load_data()
    if prepare is not None:
        prepare(task)
    model = SentenceTransformer(str(model_dir), device="cpu")
    model.max_seq_length = 128
    folder = tmp_path / "predictions"
    result = mteb.evaluate(
        model, [task], cache=None, prediction_folder=folder, show_progress_bar=False
    ).task_results[0]
    assert task.data_loaded
    predictions = json.loads((folder / f"{name}_predictions.json").read_text())
    return task, predictions, result


def _mteb_scores(result) -> list[dict]:
    return [s for split in result.scores.values() for s in split]


def _check_main_score(task, predictions, result, tmp_path: Path) -> units.TaskUnits:
    """Recomputed main score == mteb's (mean over parts), also after a trip through the file."""
    built = units.build(task, predictions, task.metadata.main_score)
    expected = np.mean([s["main_score"] for s in _mteb_scores(result)])
    assert abs(units.main_score(built) - expected) < 1e-6
    path = units.path_for(tmp_path, task.metadata.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(units.to_json(built))
    stored = units.read(path)
    assert abs(units.main_score(stored) - expected) < 1e-6
    print(f"{task.metadata.name}: {path.stat().st_size / 1024:.1f} KiB stored")
    return stored


def _check_every_metric(built: units.TaskUnits, result) -> None:
    """Every metric mteb reports, not only the main one (a task's main score may be f1...)."""
    for part, mteb_scores in zip(built.parts, _mteb_scores(result), strict=True):
        for metric in classification.METRICS:
            ours = classification.score(part.data, np.arange(part.n), metric)
            assert abs(ours - mteb_scores[metric]) < 1e-6, metric


def test_classification_whole_task(tiny_bert, mirror, tmp_path):
    name = "AmazonCounterfactualClassification"  # binary: ap is defined too
    task, predictions, result = _evaluated(name, "MTEB(eng, v1)", tiny_bert, mirror, tmp_path)
    built = _check_main_score(task, predictions, result, tmp_path)
    # MTEB(eng, v1) evaluates its test split only
    assert [(p.subset, p.split) for p in built.parts] == [("en", "test")]
    _check_every_metric(built, result)
    # A resample with repeats: the mean over experiments of mteb's own metrics on those items.
    (part,) = built.parts
    idx = np.random.default_rng(0).integers(0, part.n, part.n)
    gold, pred = part.data["gold"][idx], part.data["pred"][idx]
    assert pred.shape[1] == task.n_experiments == 10
    for metric in ("accuracy", "f1"):
        direct = np.mean([task._calculate_scores(gold, pred[:, e])[metric] for e in range(10)])
        assert abs(classification.score(part.data, idx, metric) - direct) < 1e-12
    # The bootstrap's block form: the same scores for many resamples at once.
    rows = np.random.default_rng(1).integers(0, part.n, size=(30, part.n))
    for metric in ("accuracy", "f1"):
        block = classification.score_many(part.data, rows, metric)
        one_by_one = [classification.score(part.data, row, metric) for row in rows]
        assert np.abs(block - one_by_one).max() < 1e-12, metric


def _cross_validated(task) -> None:
    # No MTEB(eng) task is cross-validated; this one, made so, runs mteb's 5-fold path.
    task.is_cross_validation = True
    task.train_split = "test"


def test_classification_cross_validated(tiny_bert, mirror, tmp_path):
    name = "AmazonCounterfactualClassification"
    task, predictions, result = _evaluated(
        name, "MTEB(eng, v1)", tiny_bert, mirror, tmp_path, _cross_validated
    )
    built = _check_main_score(task, predictions, result, tmp_path)
    _check_every_metric(built, result)
    (part,) = built.parts
    idx = np.random.default_rng(0).integers(0, part.n, part.n)
    gold, pred, fold = (part.data[k][idx] for k in ("gold", "pred", "fold"))
    direct = np.mean([accuracy_score(gold[fold == f], pred[fold == f, 0]) for f in range(5)])
    assert abs(units.part_score(built, part, idx) - direct) < 1e-12


def _three_small_sets(task) -> None:
    """TwentyNewsgroups' first 3 sets, 1,500 titles each, the middle one relabelled to a single
    label (mteb scores it 1.0 and saves no assignment for it): the whole task, 10 sets of ~5,950
    titles, takes ~150 s here."""
    sets = task.dataset["test"][:3]
    sentences = [texts[:1500] for texts in sets["sentences"]]
    labels = [gold[:1500] for gold in sets["labels"]]
    labels[1] = [labels[1][0]] * 1500
    task.dataset["test"] = Dataset.from_dict({"sentences": sentences, "labels": labels})


@pytest.mark.parametrize(
    "prepare",
    [
        _three_small_sets,
        pytest.param(
            None,
            id="whole",
            marks=pytest.mark.skipif(
                not os.environ.get("NEOBENCH_WHOLE_TASKS"), reason="~150 s; NEOBENCH_WHOLE_TASKS=1"
            ),
        ),
    ],
)
def test_clustering_legacy_task(prepare, tiny_bert, mirror, tmp_path):
    name = "TwentyNewsgroupsClustering"  # MTEB(eng, v1): several sets, one V-measure each
    task, predictions, result = _evaluated(
        name, "MTEB(eng, v1)", tiny_bert, mirror, tmp_path, prepare
    )
    built = _check_main_score(task, predictions, result, tmp_path)
    (part,) = built.parts
    per_set = np.asarray(_mteb_scores(result)[0]["v_measures"])
    assert part.ids == [f"set{i}" for i in range(len(per_set))]
    np.testing.assert_allclose(part.data["score"], per_set, rtol=0, atol=1e-12)
    idx = np.random.default_rng(0).integers(0, part.n, part.n)
    assert abs(units.part_score(built, part, idx) - np.mean(per_set[idx])) < 1e-12
    if prepare is _three_small_sets:
        assert part.data["score"][1] == 1.0


def _one_small_set(task) -> None:
    first = task.dataset["test"][:1]
    texts, gold = first["sentences"][0][:1500], first["labels"][0][:1500]
    task.dataset["test"] = Dataset.from_dict({"sentences": [texts], "labels": [gold]})


def test_clustering_legacy_single_set_by_items(tiny_bert, mirror, tmp_path):
    """A single set: its items are the units, resampled within the set."""
    name = "TwentyNewsgroupsClustering"
    task, predictions, result = _evaluated(
        name, "MTEB(eng, v1)", tiny_bert, mirror, tmp_path, _one_small_set
    )
    built = _check_main_score(task, predictions, result, tmp_path)
    (part,) = built.parts
    assert part.n == 1500
    idx = np.random.default_rng(0).integers(0, part.n, part.n)
    gold = np.asarray(task.dataset["test"][0]["labels"])[idx]
    pred = np.asarray(predictions["default"]["test"][0])[idx]  # mteb's saved assignment
    assert abs(units.part_score(built, part, idx) - v_measure_score(gold, pred)) < 1e-12


def test_clustering_fast_whole_task(tiny_bert, mirror, tmp_path):
    name = "TwentyNewsgroupsClustering.v2"  # MTEB(eng, v2): 10 k-means runs on drawn samples
    task, predictions, result = _evaluated(name, "MTEB(eng, v2)", tiny_bert, mirror, tmp_path)
    built = _check_main_score(task, predictions, result, tmp_path)
    (part,) = built.parts
    per_run = _mteb_scores(result)[0]["v_measures"]["Level 0"]  # the draws replayed exactly
    np.testing.assert_allclose(part.data["score"][:, 0], per_run, rtol=0, atol=1e-12)
    idx = np.array([1, 1, 4, 8, 0, 2, 2, 9, 6, 6])
    assert abs(units.part_score(built, part, idx) - np.mean(np.asarray(per_run)[idx])) < 1e-12
    # Draws that are not one evaluation's from the seed (the task evaluated again): refused.
    task.rng_state.random()
    with pytest.raises(ValueError, match="reset_draws"):
        units.build(task, predictions, "v_measure")
    clustering.reset_draws(task)
    assert task.rng_state.getstate() == type(task)().rng_state.getstate()


def test_clustering_single_set_resamples_items():
    """One set: items are the units; a resample's score is sklearn's V-measure on those items."""
    rng = np.random.default_rng(1)
    gold, pred = rng.integers(0, 4, 300), rng.integers(0, 5, 300)
    ids, data = clustering._items(gold.tolist(), pred.tolist())
    data = {k: np.asarray(v) for k, v in data.items()}
    assert ids[:2] == ["0", "1"]
    idx = rng.integers(0, 300, 300)
    expected = v_measure_score(gold[idx], pred[idx])
    assert clustering.score(data, idx, "v_measure") == pytest.approx(expected, abs=1e-12)


def test_clustering_set_with_one_label_is_skipped_as_mteb_does():
    """mteb scores a one-label set 1.0 and saves no assignment for it: later sets still match."""
    from types import SimpleNamespace

    task = SimpleNamespace(
        label_column_name="labels", metadata=SimpleNamespace(main_score="v_measure")
    )
    sets = [{"labels": [0, 1, 1]}, {"labels": [2, 2]}, {"labels": [0, 0, 1]}]
    scores = clustering._legacy_sets(task, sets, [[1, 0, 0], [0, 1, 1]])
    assert scores == [1.0, 1.0, pytest.approx(v_measure_score([0, 0, 1], [0, 1, 1]))]
