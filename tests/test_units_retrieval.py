"""Retrieval and reranking units: the per-query values give back mteb's own main score.

SciFact and ArguAna (ignore_identical_ids) run on the mirror with the tiny BERT, cut to samples
of their real data (see _sample: 300 queries, a corpus of over 2,000 documents, so the top 1,000
are a real cut); the reranking task is built from SciFact's mirror data (each query reranks its
relevant documents plus 20 others). A resample's score is checked against mteb's metric function
run on the drawn queries. The whole tasks' units are checked against mteb's main score by every
eval that saves them (staging keeps none that differ by over 1e-6): ArguAna whole in
tests/test_scores.py, SciFact whole in tests/test_patches.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import mteb
import numpy as np
import pytest
from mteb._evaluators.retrieval_metrics import calculate_retrieval_scores, max_over_subqueries
from mteb.abstasks.aggregate_task_metadata import AggregateTaskMetadata
from mteb.abstasks.aggregated_task import AbsTaskAggregate
from mteb.abstasks.retrieval import AbsTaskRetrieval
from mteb.abstasks.task_metadata import TaskMetadata
from mteb.mocks.mock_tasks.reranking import general_args
from sentence_transformers import SentenceTransformer

from neobench.evaluation import staging, units
from neobench.evaluation.units import retrieval
from neobench.protocol import mirror as mirror_mod
from neobench.report import bootstrap


@pytest.fixture(autouse=True)
def _registry(monkeypatch):
    """The real registry once the sibling type modules exist; until then only this one."""
    try:
        units.registry()
    except ImportError:
        specs = {"Retrieval": retrieval.SPEC, "Reranking": retrieval.RERANKING_SPEC}
        monkeypatch.setattr(units, "registry", lambda: specs)


def _model(tiny_bert: Path) -> SentenceTransformer:
    model = SentenceTransformer(str(tiny_bert), device="cpu")
    model.max_seq_length = 32  # short texts: the test is about scoring, not the model
    return model


def _evaluate(task, model, folder: Path) -> tuple[float, dict, dict]:
    """mteb's in-memory main score, its score dict and its saved predictions, data kept loaded."""
    task.load_data()  # loaded before evaluate, so mteb leaves it loaded for units.build
    result = mteb.evaluate(
        model, [task], cache=None, prediction_folder=folder, show_progress_bar=False
    ).task_results[0]
    predictions = json.loads((folder / f"{task.metadata.name}_predictions.json").read_text())
    scores = result.scores["test"][0]
    return scores["main_score"], scores, predictions


def _mirror_task(name: str, mirror: Path):
    task = mteb.get_task(name)
    mirror_mod.point_tasks_at_mirror([task], Path(mirror).resolve(), "MTEB(eng, v1)")
    return task


def _resample_by_mteb(task, predictions: dict, ids: list[str], idx: np.ndarray) -> float:
    """mteb's nDCG@10 / MAP@1000 on the drawn queries, a repeated query renamed per draw."""
    qrels = task.dataset["default"]["test"]["relevant_docs"]
    run, drawn_qrels = {}, {}
    for j, i in enumerate(idx):
        qid = ids[i]
        docs = predictions["default"]["test"][qid]
        # ArguAna: a query is never its own answer (mteb's ignore_identical_ids), by hand here
        drop = qid if task.ignore_identical_ids else None
        run[f"{qid}#{j}"] = {d: s for d, s in docs.items() if d != drop}
        drawn_qrels[f"{qid}#{j}"] = qrels[qid]
    result = calculate_retrieval_scores(run, drawn_qrels, list(task.k_values))
    metric, k = retrieval._metric(task.metadata.main_score)  # ndcg or map here
    return {"ndcg": result.ndcg, "map": result.map}[metric][f"{metric.upper()}@{k}"]


def _check(task, main: float, predictions: dict) -> units.TaskUnits:
    built = units.build(task, predictions, task.metadata.main_score)
    # within 1e-12, not just 1e-6: the same sum in the same order, rounded as mteb rounds it
    assert abs(units.main_score(built) - main) < 1e-12
    part = built.parts[0]
    assert part.data["value"].dtype == np.float64
    idx = np.random.default_rng(0).integers(0, part.n, part.n)
    expected = _resample_by_mteb(task, predictions, part.ids, idx)
    assert abs(units.part_score(built, part, idx) - expected) < 1e-12
    return built


def _stored(built: units.TaskUnits, tmp_path: Path) -> int:
    path = tmp_path / "units.json"
    path.write_text(units.to_json(built))
    reread = units.read(path)
    assert units.main_score(reread) == units.main_score(built)
    return path.stat().st_size


@pytest.mark.parametrize("name", ["SciFact", "ArguAna"])
def test_task_main_score_equals_mteb(name, tiny_bert, mirror, tmp_path):
    task = _sample(_mirror_task(name, mirror), 300, 2000)
    main, _, predictions = _evaluate(task, _model(tiny_bert), tmp_path / "predictions")
    assert len(predictions["default"]["test"]) == 300
    if task.ignore_identical_ids:  # ArguAna: the saved results still hold the query itself
        assert any(q in docs for q, docs in predictions["default"]["test"].items())
    built = _check(task, main, predictions)
    size = _stored(built, tmp_path)
    print(f"{name}: {built.parts[0].n} queries, {size} bytes stored, main score {main}")


class SciFactReranking(AbsTaskRetrieval):
    """A real reranking task: SciFact's first 100 test queries, each reranking its relevant
    documents plus 20 others drawn with a fixed seed (mteb 2: retrieval over ``top_ranked``)."""

    metadata = TaskMetadata(
        type="Reranking", name="SciFactRerankingSample", main_score="map_at_1000", **general_args
    )

    def __init__(self, scifact, **kwargs) -> None:
        super().__init__(**kwargs)
        self.scifact = scifact

    def load_data(self, num_proc: int | None = None, **kwargs) -> None:
        if self.data_loaded:
            return
        self.scifact.load_data()
        split = self.scifact.dataset["default"]["test"]
        corpus, qrels = split["corpus"], split["relevant_docs"]
        qids = sorted(q for q in qrels if qrels[q])[:100]
        rng = np.random.default_rng(0)
        top_ranked = {}
        for qid in qids:
            others = rng.choice(len(corpus), 20, replace=False)
            candidates = list(qrels[qid]) + [corpus[int(i)]["id"] for i in others]
            top_ranked[qid] = list(dict.fromkeys(candidates))  # a relevant draw kept once
        keep = {d for docs in top_ranked.values() for d in docs}
        self.dataset = {
            "default": {
                "test": {
                    "corpus": corpus.filter(lambda row: row["id"] in keep),
                    "queries": split["queries"].filter(lambda row: row["id"] in top_ranked),
                    "relevant_docs": {q: dict(qrels[q]) for q in qids},
                    "top_ranked": top_ranked,
                }
            }
        }
        self.data_loaded = True


def test_reranking_map_equals_mteb(tiny_bert, mirror, tmp_path):
    task = SciFactReranking(_mirror_task("SciFact", mirror))
    main, scores, predictions = _evaluate(task, _model(tiny_bert), tmp_path / "predictions")
    assert main == scores["map_at_1000"]
    # mteb scored only each query's candidates: the units come from those rankings
    top_ranked = task.dataset["default"]["test"]["top_ranked"]
    for qid, docs in predictions["default"]["test"].items():
        assert sorted(docs) == sorted(top_ranked[qid])
    built = _check(task, main, predictions)
    size = _stored(built, tmp_path)
    print(f"reranking: {built.parts[0].n} queries, {size} bytes stored, main score {main}")
    # Any other main score this module knows equals mteb's value of it on the same run
    for name in ["ndcg_at_10", "mrr_at_10", "accuracy", "recall_at_5", "precision_at_3"]:
        task.metadata = task.metadata.model_copy(update={"main_score": name})
        other = units.build(task, predictions, name)
        assert abs(units.main_score(other) - scores[name]) < 1e-12, name


def _sample(real: AbsTaskRetrieval, queries: int, others: int) -> AbsTaskRetrieval:
    """A real mirror retrieval task cut down to its first ``queries`` judged test queries, their
    relevant documents, the documents named like them (ArguAna's own arguments) and ``others``
    seeded draws: the same texts, judgments and flags, evaluated in seconds."""

    def load_data(self, num_proc: int | None = None, **kwargs) -> None:
        if self.data_loaded:
            return
        real.load_data()
        split = real.dataset["default"]["test"]
        qrels = split["relevant_docs"]
        qids = sorted(q for q in qrels if qrels[q])[:queries]
        drawn = np.random.default_rng(0).choice(len(split["corpus"]), others, replace=False)
        keep = {d for q in qids for d in qrels[q]} | set(qids)
        keep |= set(split["corpus"].select(drawn)["id"])
        chosen = set(qids)
        self.dataset = {
            "default": {
                "test": {
                    "corpus": split["corpus"].filter(lambda row: row["id"] in keep),
                    "queries": split["queries"].filter(lambda row: row["id"] in chosen),
                    "relevant_docs": {q: dict(qrels[q]) for q in qids},
                    "top_ranked": None,
                }
            }
        }
        self.data_loaded = True

    name = f"{real.metadata.name}Sample"
    attributes = {
        "metadata": real.metadata.model_copy(update={"name": name}),
        "ignore_identical_ids": real.ignore_identical_ids,
        "load_data": load_data,
    }
    return type(name, (AbsTaskRetrieval,), attributes)()


def _aggregate(subtasks: list) -> AbsTaskAggregate:
    """An aggregate built as mteb builds CQADupstackRetrieval (whose forums the mirror lacks)."""
    metadata = AggregateTaskMetadata(
        name="SampleAggregateRetrieval",
        description="Two sampled mirror retrieval tasks, averaged as CQADupstackRetrieval.",
        tasks=subtasks,
        main_score="ndcg_at_10",
        type="Retrieval",
        eval_splits=["test"],
    )
    return type("SampleAggregateRetrieval", (AbsTaskAggregate,), {"metadata": metadata})()


def test_aggregate_units_give_mteb_s_aggregate(tiny_bert, mirror, tmp_path):
    """CQADupstackRetrieval's structure on real data: the units of an aggregate score what mteb
    reports for it (the mean of its subtasks' scores), built by the eval's own code path, and a
    resample redraws each subtask's queries within that subtask."""
    names = ("SciFact", "ArguAna")
    subtasks = [_sample(_mirror_task(name, mirror), 120, 300) for name in names]
    task = _aggregate(subtasks)
    for sub in subtasks:
        sub.load_data()  # loaded before evaluate, so mteb leaves the data for the units build
    folder = tmp_path / "predictions"
    result = mteb.evaluate(
        _model(tiny_bert), [task], cache=None, prediction_folder=folder, show_progress_bar=False
    ).task_results[0]
    assert result.task_name == task.metadata.name
    assert not (folder / task.prediction_file_name).exists()  # mteb saves the subtasks' only
    text = staging._units_text(task, folder, {}, [result])  # as `neobench eval` saves them
    assert text is not None
    path = units.path_for(tmp_path / "results", task.metadata.name)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    built = units.read(path)
    assert [(p.subtask, p.n) for p in built.parts] == [(f"{n}Sample", 120) for n in names]
    assert abs(units.main_score(built) - result.get_score()) < 1e-6
    # One bootstrap resample: mteb's nDCG@10 of each subtask on the queries drawn from it,
    # averaged as mteb averages the subtasks.
    draws = bootstrap.task_draws(built, resamples=3, seed=7)
    by_mteb = []
    for i, (sub, part) in enumerate(zip(subtasks, built.parts, strict=True)):
        idx = bootstrap._indices(built, i, 3, 7)[2]
        predictions = json.loads((folder / sub.prediction_file_name).read_text())
        by_mteb.append(_resample_by_mteb(sub, predictions, part.ids, idx))
    assert abs(draws[2] - np.mean(by_mteb)) < 1e-12
    # A subtask scored by another metric has no units as an aggregate.
    subtasks[0].metadata = subtasks[0].metadata.model_copy(update={"main_score": "map_at_10"})
    with pytest.raises(ValueError, match="SciFactSample is Retrieval scored by map_at_10"):
        units.build(task, {}, "ndcg_at_10")


def _fake_task(main_score: str, qrels: dict) -> SimpleNamespace:
    """What build reads of a task: metadata, k_values, flags and the loaded qrels."""
    return SimpleNamespace(
        metadata=SimpleNamespace(name="Fake", main_score=main_score),
        k_values=(1, 3, 5, 10, 20, 100, 1000),
        ignore_identical_ids=False,
        skip_first_result=False,
        dataset={"default": {"test": {"relevant_docs": qrels}}},
        convert_v1_dataset_format_to_v2=lambda num_proc: None,
    )


@pytest.mark.parametrize("metric", ["map_at_1000", "mrr_at_10", "ndcg_at_10"])
def test_max_over_subqueries_equals_mteb(metric):
    """MindSmallReranking's main score: a unit is a query merged over its subqueries."""
    rng = np.random.default_rng(1)
    qrels, run = {}, {}
    for base in range(30):
        judged = {f"d{i}": int(rng.integers(0, 2)) for i in rng.choice(40, 8, replace=False)}
        for sub in range(int(rng.integers(1, 4))):
            qrels[f"q{base}_{sub}"] = judged
            run[f"q{base}_{sub}"] = {f"d{i}": float(rng.random()) for i in range(40)}
    main_score = retrieval.SUBQUERIES + metric
    ids, data = retrieval.build(_fake_task(main_score, qrels), run, "default", "test")
    assert ids == [f"q{b}" for b in range(30)]
    value = retrieval.score({"value": data["value"]}, np.arange(len(ids)), main_score)
    assert value == max_over_subqueries(qrels, run, [1, 3, 5, 10, 20, 100, 1000])[main_score]


def test_unsupported_main_score_is_named():
    with pytest.raises(ValueError, match="paired_accuracy"):
        retrieval.build(_fake_task("paired_accuracy", {}), {}, "default", "test")
