"""The held-out dev slice (recipe key dev_rows): drawn from the real training rows, disjoint from
what is trained on, the same for the same seed, scored after training and read back from the card
without torch; off, recipes and cards are as before."""

import subprocess
import sys

import pytest
import torch
import yaml
from conftest import REPO
from test_finetune import FINETUNE_DATA, TINY, config
from test_recipe_msmarco import STANDARD_SHA256

from neobench.cli.run import cmd_finetune
from neobench.core import cards as record
from neobench.core.errors import NeobenchError
from neobench.protocol.recipe import apply_overrides, load_recipe
from neobench.train.data import build_data
from neobench.train.dev_metric import dev_scores
from neobench.train.dev_slice import DevSlice, draw_ids, held_out, row_id, slice_record
from neobench.train.finetune import finetune
from neobench.train.inputs import check_inputs

STSB = ["manifest=sample-local", "datasets=STSB", "batch_size=8"]  # STS-B train, score >= 4


def built(tmp_path, model, *overrides, seed=None):
    """(training datasets, dev slices) as step 2 of the recipe builds them."""
    inputs = check_inputs(config(model, tmp_path / "out", *STSB, *overrides, seed=seed))
    return build_data(inputs, FINETUNE_DATA)


def test_the_slice_and_the_trained_rows_share_no_id(tmp_path, minilm):
    train, slices = built(tmp_path, minilm, "dev_rows=100")
    [full], none = built(tmp_path, minilm)[0].values(), built(tmp_path, minilm)[1]
    dev, trained = slices["STSB"], train["STSB"].dataset
    trained_ids = {row_id(q) for q in trained["query"]}
    dev_ids = {row_id(q) for q in dev.dataset["query"]}
    assert none == {} and len(dev.ids) == 100 and dev_ids == set(dev.ids)
    assert not trained_ids & dev_ids
    # A partition of the rows training would read with the slice off (the manifest's train file).
    rows = [tuple(r.values()) for d in (trained, dev.dataset) for r in d.to_list()]
    assert sorted(rows) == sorted(tuple(r.values()) for r in full.dataset.to_list())
    assert len(trained) + len(dev.dataset) == len(full.dataset)


def test_same_seed_same_slice_other_seed_another(tmp_path, minilm):
    digest = {s: built(tmp_path, minilm, "dev_rows=50", seed=s)[1]["STSB"].digest for s in (0, 1)}
    again = built(tmp_path, minilm, "dev_rows=50", seed=0)[1]["STSB"]
    assert again.digest == digest[0] != digest[1]
    # One dataset's slice does not depend on the others trained beside it.
    both = built(tmp_path, minilm, "dev_rows=50", "datasets=STSB,WIKIQA", seed=0)[1]
    assert both["STSB"].digest == digest[0] and set(both) == {"STSB", "WIKIQA"}


def test_the_draw_ignores_row_order_and_caps_at_a_tenth():
    ids = [row_id(str(i)) for i in range(200)]
    assert draw_ids(ids, 5, 0, "K") == draw_ids(list(reversed(ids)), 5, 0, "K")
    assert draw_ids(ids, 5, 0, "K") != draw_ids(ids, 5, 0, "OTHER")
    assert held_out(200, 1000) == 20 and held_out(200, 3) == 3 and held_out(9, 5) == 0


class Lookup:
    """A stand-in model: each text's vector is given."""

    def __init__(self, vectors):
        self.vectors = vectors

    def encode(self, texts, prompt=None, **_):
        return torch.nn.functional.normalize(torch.tensor([self.vectors[t] for t in texts]), dim=1)


def test_the_metric_ranks_each_query_against_the_whole_slice():
    from datasets import Dataset

    rows = {"query": ["a", "b", "c"], "positive": ["A", "B", "C"], "negative_1": ["B", "C", "A"]}
    vectors = {"a": [1.0, 0.0], "A": [1.0, 0.1], "b": [0.0, 1.0], "B": [0.7, 0.7]}
    vectors |= {"c": [-1.0, 0.0], "C": [0.0, 1.0]}
    dev = DevSlice("K", Dataset.from_dict(rows), ["x"])
    scores = dev_scores(Lookup(vectors), {"K": dev}, {})["per_dataset"]["K"]
    # Cosines: a -> A .995, B .707, C 0 (rank 1); b -> C 1.0 above its B .707 (rank 2);
    # c -> C 0 above B -.707 and A -.995 (rank 1).
    assert scores["accuracy@1"] == pytest.approx(2 / 3)
    assert scores["mrr@10"] == pytest.approx((1 + 1 / 2 + 1) / 3)
    assert scores["queries"] == 3 and scores["candidates"] == 3
    # A collapsed model (every text the same vector): every tie counts against it.
    flat = Lookup({key: [1.0, 1.0] for key in vectors})
    assert dev_scores(flat, {"K": dev}, {})["per_dataset"]["K"]["accuracy@1"] == 0
    # A stop signal before a dataset is scored: no value (a partial mean compares with nothing).
    assert dev_scores(Lookup(vectors), {"K": dev}, {}, stopped=lambda: True)["value"] is None


def test_tiny_finetune_records_the_dev_metric_in_the_card(tmp_path, tiny_bert, capsys):
    out = tmp_path / "run"
    overrides = [*TINY, "datasets=STSB,SCIFACT", "max_steps=3", "batch_size=8", "dev_rows=40"]
    assert cmd_finetune(config(tiny_bert, out, *overrides)) == 0
    assert "dev MRR@10 " in capsys.readouterr().err
    dev = record.finetune_dev(out)
    assert dev.metric == "mrr@10" and 0 <= dev.value <= 1
    assert set(dev.per_dataset) == {"STSB", "SCIFACT"}
    mean = sum(d["mrr@10"] for d in dev.per_dataset.values()) / 2
    assert dev.value == pytest.approx(mean, abs=1e-6)
    assert all(0 <= d["accuracy@1"] <= d["mrr@10"] <= 1 for d in dev.per_dataset.values())
    assert dev.definition["dev_rows"] == 40 and dev.definition["seed"] == 0
    # The recorded slice is the one step 2 draws (re-derivable from data, seed and dev_rows).
    _, slices = built(tmp_path, tiny_bert, "datasets=STSB,SCIFACT", "dev_rows=40")
    assert dev.digest == slice_record(slices, 40, 0)["digest"]
    card = yaml.safe_load((out / "neobench_run_card.yaml").read_text())
    assert card["recipe"]["values"]["dev_rows"]["value"] == 40
    assert card["recipe"]["sha256"] != load_recipe("neobert-mteb-2k").sha256
    # The light reader: the card alone, no torch imported.
    code = (
        "import sys; from neobench.core.cards import finetune_dev; "
        f"d = finetune_dev({str(out)!r}); assert 'torch' not in sys.modules; print(d.value)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert float(done.stdout) == dev.value


def test_off_leaves_the_hash_and_the_card_as_before(tmp_path):
    recipe = load_recipe("neobert-mteb-2k")
    assert recipe.sha256 == STANDARD_SHA256 and recipe.values.dev_rows == 0
    assert "dev_rows" not in recipe.record()["values"]
    assert apply_overrides(recipe, {"dev_rows": "0"}).sha256 == STANDARD_SHA256
    assert apply_overrides(recipe, {"dev_rows": "10"}).sha256 != STANDARD_SHA256
    path = tmp_path / "neobench_run_card.yaml"
    record.write_finetune_card(path, record.FinetuneCard(status="running"))
    assert "dev" not in yaml.safe_load(path.read_text())
    assert record.finetune_dev(tmp_path) is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["dev_rows=-1"], r"dev_rows=-1 is out of range \(it must be >= 0\)"),
        (["dev_rows=ten"], "override dev_rows=ten: expected a int like 0"),
        (["dev_rows=0.1"], "override dev_rows=0.1: expected a int"),
        # AGNEWS: 627 rows, a tenth held out, too few left for a global batch of 600
        (
            ["datasets=AGNEWS", "batch_size=600", "dev_rows=100"],
            r"AGNEWS has \d+ usable rows once its dev slice is held out",
        ),
    ],
)
def test_bad_dev_rows_are_clear(tmp_path, minilm, overrides, message):
    with pytest.raises(NeobenchError, match=message):
        finetune(config(minilm, tmp_path / "out", "manifest=sample-local", *overrides))
    assert not (tmp_path / "out").exists()


def test_a_slice_is_never_drawn_from_an_mteb_evaluation_split():
    import dataclasses

    from neobench.protocol.manifest import load_manifest
    from neobench.train.dev_slice import split_problems

    row = load_manifest("neobert-mteb").rows["STSBENCHMARK"]
    assert split_problems([row], 10) == []  # its train split
    test_split = dataclasses.replace(row, split="test")
    assert split_problems([test_split], 0) == []  # off: nothing is held out
    [problem] = split_problems([test_split], 10)
    assert "dataset STSBENCHMARK reads split 'test' of mteb/stsbenchmark-sts" in problem
    assert "train split" in problem
