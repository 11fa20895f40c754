"""compat/datasets.py and compat/mteb.py (the registry's "column-cache", "prediction-json"
and "mteb-texts" patches) give mteb's own values, on the mirror's real data.

Each shortcut is checked against the stock path it replaces: datasets' row-by-row Column,
mteb's prediction writer, mteb's data loaders (SciFact, ArguAna, Banking77), and whole mteb
evaluations with mteb's own deterministic random encoder, scores and prediction files compared
exactly. Two task sizes are cut (fewer classification experiments, fewer clustering sets) so the
stock side of each comparison stays short; the code paths are the same.
"""

import copy
import json
import random
from contextlib import ExitStack
from pathlib import Path

import mteb
import numpy as np
import pytest
from datasets import Dataset, Features, Value
from datasets.arrow_dataset import Column
from mteb.abstasks.abstask import AbsTask
from mteb.types import PromptType
from torch.utils.data import DataLoader

from neobench.compat import patches
from neobench.compat.datasets import listed
from neobench.compat.mteb import (
    create_dataloader,
    document_texts,
    loader_texts,
    query_texts,
    save_task_predictions,
)
from neobench.protocol import mirror as mirror_mod

# Each test checks a library patch against the library's own path (tests/conftest.py).
pytestmark = pytest.mark.patches

BENCHMARK = "MTEB(eng, v1)"
STOCK_ITER = Column.__iter__


def listed_columns():
    return patches.applied("column-cache")


def _loaded(name: str, mirror: Path):
    """A fresh copy of the benchmark's task, pointed at the mirror, its data loaded."""
    task = copy.deepcopy(
        next(t for t in mteb.get_benchmark(BENCHMARK).tasks if t.metadata.name == name)
    )
    mirror_mod.point_tasks_at_mirror([task], Path(mirror).resolve(), BENCHMARK)
    task.load_data()
    return task


@pytest.fixture(scope="module")
def banking(mirror):
    return _loaded("Banking77Classification", mirror)


@pytest.fixture(scope="module", params=["SciFact", "ArguAna"])
def retrieval(request, mirror):
    task = _loaded(request.param, mirror)
    return task, task.dataset["default"]["test"]


# --- Columns -------------------------------------------------------------------------------


@pytest.mark.parametrize("selected", [False, True])
@pytest.mark.parametrize("name", ["text", "label"])
def test_listed_columns_give_datasets_own_values(banking, name, selected):
    data = banking.dataset["train"]
    if selected:  # an indices mapping over the table, as mteb's select() makes
        data = data.select(list(range(len(data) - 1, 0, -3)))
    stock = list(data[name])  # datasets' own row-by-row path (no patch outside the block)
    keys = [0, 17, len(data) - 1, -1, -len(data)]
    with listed_columns():
        column = data[name]
        assert isinstance(column, Column)
        assert list(column) == stock and list(column) == stock  # the second read is the cache
        assert [type(v) for v in column] == [type(v) for v in stock]
        assert [column[k] for k in keys] == [stock[k] for k in keys]
        assert column[3:9] == stock[3:9] and column[[5, 2]] == [stock[5], stock[2]]
        assert np.asarray(column).tolist() == np.asarray(stock).tolist()
        for key in (len(data), -len(data) - 1):
            with pytest.raises(IndexError):
                column[key]
    assert Column.__iter__ is STOCK_ITER  # datasets as shipped again
    assert list(data[name]) == stock


def test_listed_columns_are_undone_after_the_block_and_nest():
    stock_iter, stock_getitem = Column.__iter__, Column.__getitem__
    with listed_columns():
        with listed_columns():
            patched = Column.__iter__
        assert Column.__iter__ is patched  # the outer block still runs
    assert (Column.__iter__, Column.__getitem__) == (stock_iter, stock_getitem)
    assert patched is not stock_iter


def test_mteb_undersampling_and_metrics_unchanged(banking):
    """mteb's per-element loops (undersampling, sklearn on a Column) give the same results."""
    train, test = banking.dataset["train"], banking.dataset["test"]

    def run():
        selected = [banking._undersample_data(train, i)[2] for i in range(2)]
        predicted = np.roll(np.asarray(test["label"]), 1)
        return selected, banking._calculate_scores(test["label"], predicted)

    stock = run()
    with listed_columns():
        assert run() == stock


def test_formatted_or_nested_columns_take_datasets_path():
    data = Dataset.from_dict(
        {"a": [1, 2, 3], "s": [{"b": "x"}, {"b": "y"}, {"b": "z"}]},
        features=Features({"a": Value("int64"), "s": {"b": Value("string")}}),
    )
    with listed_columns():
        numpy_column = data.with_format("numpy")["a"]
        assert listed(numpy_column) is None  # numpy formatting: rows and batches differ in type
        assert [type(v) for v in numpy_column] == [type(v) for v in data.with_format("numpy")["a"]]
        nested = data["s"]["b"]  # a Column of a Column
        assert listed(nested) is None and list(nested) == ["x", "y", "z"]
        assert listed(data.map(lambda row: row)["a"]) == [1, 2, 3]  # map lists every column
        left_out = data.with_format(None, columns=["s"])
        assert listed(left_out["a"]) is None
        column = data["a"]
        assert listed(column) == [1, 2, 3]
        data.set_format("numpy")  # in place, after the column cached its values
        assert listed(column) is None
        assert [type(v) for v in column] == [np.int64] * 3  # datasets' numpy rows, not the cache


def test_a_long_column_is_cached_only_while_its_data_is_small(monkeypatch):
    from neobench.compat import datasets as fastdata

    data = Dataset.from_dict({"label": list(range(10)), "text": ["x" * 100] * 10})
    monkeypatch.setattr(fastdata, "MAX_CACHED_ROWS", 5)  # both columns are "long"
    monkeypatch.setattr(fastdata, "MAX_CACHED_BYTES", 200)  # 80 bytes of labels, 1,000+ of text
    with listed_columns():
        assert listed(data["label"]) == list(range(10))
        assert listed(data["text"]) is None and list(data["text"]) == ["x" * 100] * 10


# --- whole evaluations ------------------------------------------------------------------------


def _fewer_experiments(task) -> None:
    task.n_experiments = 2


def _fewer_sets(task) -> None:
    task.dataset["test"] = task.dataset["test"].select(range(2))


@pytest.mark.parametrize(
    ("name", "prepare"),
    [
        ("Banking77Classification", _fewer_experiments),
        ("TwentyNewsgroupsClustering", _fewer_sets),
        ("STSBenchmark", None),
        ("SciFact", None),
    ],
)
def test_mteb_scores_and_prediction_files_unchanged(name, prepare, mirror, tmp_path):
    """mteb.evaluate with mteb's random (text-hashed) encoder: every score and the prediction
    file byte for byte, stock vs inside the "column-cache" and "prediction-json" patches."""
    model = mteb.get_model("mteb/baseline-random-encoder")

    def run(fast: bool, kept: dict | None = None):
        task = _loaded(name, mirror)
        if prepare is not None:
            prepare(task)
        folder = tmp_path / ("stock" if not fast else "kept" if kept is not None else "fast")
        with ExitStack() as stack:
            if fast:
                stack.enter_context(listed_columns())
                stack.enter_context(patches.applied("prediction-json", [task], kept))
            result = mteb.evaluate(
                model, [task], cache=None, prediction_folder=folder, show_progress_bar=False
            ).task_results[0]
        assert "_save_task_predictions" not in vars(task)  # the instance is left as it was
        path = folder / task.prediction_file_name
        written = path.read_bytes() if path.exists() else None
        return json.dumps(result.scores, sort_keys=True), written

    stock_scores, stock_file = run(False)
    fast_scores, fast_file = run(True)
    assert fast_scores == stock_scores
    assert fast_file == stock_file
    # Kept in memory instead: no file, and exactly what json.load reads from stock's file.
    kept: dict = {}
    kept_scores, no_file = run(True, kept)
    assert kept_scores == stock_scores and no_file is None
    assert json.dumps(kept[name], sort_keys=True) == json.dumps(
        json.loads(stock_file), sort_keys=True
    )


def test_prediction_file_identical_to_mteb_s_writer(tmp_path):
    """Same bytes as AbsTask._save_task_predictions, for a new file and a merge into one."""
    task = mteb.get_task("SciFact")
    model = mteb.get_model("mteb/baseline-random-encoder")
    rng = random.Random(0)
    rankings = {
        f"q{q}-é": {f"d{rng.randrange(10**6)}\u2013": rng.random() * 2 - 1 for _ in range(50)}
        for q in range(40)
    }
    rankings["q0-é"]["nan"] = float("nan")
    for writer, folder in ((None, tmp_path / "stock"), (save_task_predictions, tmp_path / "fast")):
        folder.mkdir()
        for subset in ("default", "en"):
            if writer is None:
                AbsTask._save_task_predictions(task, rankings, model, folder, "test", subset)
            else:
                writer(task, rankings, model, folder, hf_split="test", hf_subset=subset)
    name = task.prediction_file_name
    assert (tmp_path / "fast" / name).read_bytes() == (tmp_path / "stock" / name).read_bytes()


def test_json_copy_is_a_json_round_trip():
    from neobench.compat.mteb import json_copy

    value = {
        "a": (1, 2.5, float("nan")),
        "b": {"x": np.float64(0.1), "y": [True, None, "s"]},
        "c": {1: "int key", None: 2},
        "d": [3, (0.5, np.float64(2.0))],
    }
    copy = json_copy(value)
    assert json.dumps(copy) == json.dumps(json.loads(json.dumps(value)))
    ranking = {"q": {"d1": 0.5, "d2": 0.25}}
    copied = json_copy(ranking)
    copied["q"].pop("d1")  # mteb drops identical ids from its rankings after saving them
    assert ranking == {"q": {"d1": 0.5, "d2": 0.25}}


def test_prediction_json_reaches_an_aggregate_s_sub_tasks_and_is_undone():
    from neobench.protocol.instructions import expand

    aggregate = mteb.get_task("CQADupstackRetrieval")
    leaves = expand([aggregate])
    assert len(leaves) == 12
    with patches.applied("prediction-json", leaves):
        assert all(leaf._save_task_predictions.func is save_task_predictions for leaf in leaves)
    assert not any("_save_task_predictions" in vars(leaf) for leaf in leaves)


# --- texts -----------------------------------------------------------------------------------


def _loader_texts(loader) -> list[str]:
    return [text for batch in loader for text in batch["text"]]


def test_document_and_query_texts_equal_mteb_s_loaders(retrieval):
    task, split = retrieval
    for rows, prompt_type, ours in (
        (split["corpus"], PromptType.document, document_texts),
        (split["queries"], PromptType.query, query_texts),
    ):
        loader = create_dataloader(rows, task_metadata=task.metadata, prompt_type=prompt_type)
        stock = _loader_texts(loader)
        modalities = task.metadata.get_modalities(prompt_type)
        assert ours(rows, modalities) == stock
        assert loader_texts(loader) == stock
        start, stop = len(rows) // 4, len(rows) // 2
        chunk = rows.select(range(start, stop))  # as the adapter's corpus chunks
        assert ours(chunk, modalities) == stock[start:stop]


def test_classification_loader_texts_equal_iteration(banking):
    loader = create_dataloader(
        banking.dataset["test"],
        task_metadata=banking.metadata,
        input_column=banking.input_column_name,
        batch_size=7,
    )
    assert loader_texts(loader) == _loader_texts(loader)


def test_texts_outside_the_plain_case_are_left_to_mteb(banking):
    data = banking.dataset["test"].select_columns(["text"])
    assert loader_texts(DataLoader(data, batch_size=8, shuffle=True)) is None
    assert loader_texts(DataLoader(data, batch_size=8, drop_last=True)) is None
    assert loader_texts(DataLoader(data, batch_size=8, collate_fn=lambda b: b)) is None
    assert loader_texts(DataLoader(data.with_format("numpy"), batch_size=8)) is None
    with_none = Dataset.from_dict({"text": ["a", None]})
    assert loader_texts(DataLoader(with_none, batch_size=8)) is None  # mteb's collate raises
    titled = Dataset.from_dict({"id": ["1", "2"], "title": ["t", None], "text": ["a", "b"]})
    assert document_texts(titled, ["text"]) is None  # mteb's title join raises on None
    plain = Dataset.from_dict({"id": ["1"], "title": [""], "text": [" a "]})
    assert document_texts(plain, ["text"]) == ["a"]
    assert document_texts(plain, ["text", "image"]) is None
    instructed = Dataset.from_dict({"id": ["1"], "text": ["q"], "instruction": ["i"]})
    assert query_texts(instructed, ["text"]) is None  # mteb appends the instruction
