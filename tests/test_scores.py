"""Scores unchanged: each task type through neobench equals stock mteb + sentence-transformers,
and the per-item units every eval saves give back the same main score.

A tiny BERT built from a config keeps these quick enough to run on every task type of the mirror
(whole tasks, full corpora), but for three sets cut after mteb loads them, the same cut in both
runs (CUTS).
tests/test_eval.py does the same with the real MiniLM on STSBenchmark (the official 0.8203) and
BIOSSES.
"""

from pathlib import Path

import mteb
import pytest
from sentence_transformers import SentenceTransformer

from neobench.cli.main import main
from neobench.evaluation import units
from neobench.protocol import mirror as mirror_mod
from tests.test_patches import SHORTENED, cut_after_loading

BENCHMARK = "MTEB(eng, v1)"


def _every_sixth_text(task) -> None:
    for split, texts in task.dataset.items():  # every label kept, 6 texts or more of each
        task.dataset[split] = texts.select(range(0, len(texts), 6))


# Cut after mteb loads them, in the neobench run and the stock one alike: the two largest sets
# as tests/test_patches.py cuts them (the whole 59,545 subjects and 51,534 pairs take minutes of
# encoding and scoring), and a sixth of Banking77's texts (stock mteb's ten experiments read its
# 13,083 labels one by one from a datasets Column: a minute of the CPU). No other code of either
# path is skipped.
CUTS = {**SHORTENED, "Banking77Classification": _every_sixth_text}


@pytest.fixture(autouse=True)
def _shortened(monkeypatch):
    cut_after_loading(monkeypatch, CUTS)


def _neobench_vs_stock(task_name: str, model_dir: Path, mirror: Path, tmp_path: Path) -> None:
    results = tmp_path / "results"
    code = main([
        "eval", "--model", str(model_dir), "--tasks", task_name, "--data-dir", str(mirror),
        "--results", str(results), "--instructions", "none", "--max-seq-length", "128",
        "--cache-dir", str(tmp_path / "cache"),
    ])  # fmt: skip
    assert code == 0
    loaded = mteb.ResultCache(results).load_results(load_experiments="match_name")
    ours = loaded.model_results[0].task_results[0]
    model = SentenceTransformer(str(model_dir), device="cpu")
    model.max_seq_length = 128
    task = mteb.get_task(task_name)
    mirror_mod.point_tasks_at_mirror([task], Path(mirror).resolve(), BENCHMARK)
    stock = mteb.evaluate(model, [task], cache=None, show_progress_bar=False)
    # The same (split, subset) parts were scored: a task's main score is their mean.
    assert sorted(ours.scores) == sorted(stock.task_results[0].scores)
    # Equal to 4 decimals, read as |difference| < 5e-5: comparing two rounded numbers would fail
    # on a rounding boundary (SummEval: 0.295455 stored vs 0.2954498 stock, 5e-6 apart).
    assert abs(ours.get_score() - stock.task_results[0].get_score()) < 5e-5
    # The per-item units saved beside the result give back its main score (mteb stores it
    # rounded to 6 decimals, hence the tolerance).
    (result_file,) = [p for p in results.rglob(f"{task_name}.json") if p.parent.name != "neobench"]
    saved = units.read(units.path_for(result_file.parent, task_name))
    assert abs(units.main_score(saved) - ours.get_score()) <= 1e-6


@pytest.mark.parametrize(
    "task_name",
    [
        # Retrieval, whole (8,782 documents, 1,406 queries): neobench's blocked top-k over the
        # full corpus, and ignore_identical_ids (a query that is also a document is never its
        # own answer). SciFact takes the same search path; tests/test_units_retrieval.py and
        # tests/test_patches.py run it.
        "ArguAna",
        "STS12",  # STS
        "Banking77Classification",  # Classification (a sixth of the texts, above)
        "SummEval",  # Summarization
        "TwentyNewsgroupsClustering",  # Clustering (2 of 10 sets, above)
        "TwitterURLCorpus",  # PairClassification (2,000 pairs, above)
    ],
)
def test_main_score_equals_stock_mteb(task_name, tiny_bert, mirror, tmp_path):
    _neobench_vs_stock(task_name, tiny_bert, mirror, tmp_path)
