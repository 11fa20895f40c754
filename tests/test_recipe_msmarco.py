"""The second shipped recipe, msmarco-retrieval: its values and sources, its manifest, its loss, and
a few real fine-tuning steps on local triplets (../shared/data/finetune)."""

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from conftest import SHARED
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.losses import (
    CachedMultipleNegativesRankingLoss,
    MultipleNegativesRankingLoss,
)

from neobench.core.errors import NeobenchError
from neobench.protocol import listing
from neobench.protocol.manifest import load_manifest
from neobench.protocol.recipe import Evaluation, load_recipe
from neobench.protocol.sources import SOURCES
from neobench.protocol.tasks import load_benchmark
from neobench.protocol.validate import shipped_recipe_problems, validate_all
from neobench.train.finetune import FinetuneConfig, finetune
from neobench.train.telemetry import read_curve
from neobench.train.trainer import _loss

FINETUNE_DATA = SHARED / "data" / "finetune"
RECIPE = "msmarco-retrieval"
# The standard recipe's hash (its values and its manifest rows' revisions): adding a second recipe
# must not move it.
STANDARD_SHA256 = "8c413a0a16aa29868b26f2cbbd03385fb06e55d819d75a9131e5728fca378d1a"


def test_both_recipes_validate_and_are_listed_with_purpose_and_evaluation():
    checked, problems = validate_all()
    assert problems == [] and "2 recipe(s)" in checked
    rows = {row[0]: row for row in listing.recipes().rows}
    assert set(rows) == {"neobert-mteb-2k", RECIPE}
    assert rows[RECIPE][1:4] == (
        "v1",
        load_recipe(RECIPE).purpose,
        "MTEB(eng, v1): 15 tasks",
    )
    assert rows["neobert-mteb-2k"][3] == "MTEB(eng, v1): all tasks"
    assert all(row[2] for row in rows.values())  # every recipe says what it is for


def test_the_standard_recipe_keeps_its_hash():
    assert load_recipe("neobert-mteb-2k").sha256 == STANDARD_SHA256
    assert load_recipe(RECIPE).sha256 != STANDARD_SHA256


def test_values_carry_the_sources_they_come_from():
    recipe = load_recipe(RECIPE)
    v = recipe.values
    assert (v.batch_size, v.gradcache_mini_batch, v.max_steps) == (512, 16, 2441)
    assert v.max_steps * v.batch_size <= 1_250_000 < (v.max_steps + 1) * v.batch_size  # one epoch
    assert (v.temperature, v.warmup_ratio, v.learning_rate) == (0.05, 0.05, 8e-5)
    assert (v.max_hard_negatives, v.mixed_precision, v.instructions) == (1, "bf16", "none")
    assert set(recipe.sources.values()) <= set(SOURCES)
    assert recipe.sources["warmup_ratio"] == "modernbert-paper"
    assert recipe.sources["temperature"] == "bert24-code"
    # Where the papers and scripts disagree, the value is ours and the note says what each does.
    for key in ("batch_size", "learning_rate", "gradcache_mini_batch"):
        assert recipe.sources[key] == "neobench"
        assert "bert24-code" in recipe.notes[key] and "ettin-code" in recipe.notes[key]


def test_the_evaluation_is_the_retrieval_tasks_the_papers_report():
    evaluation = load_recipe(RECIPE).evaluation
    retrieval = [
        t.metadata.name
        for t in load_benchmark("MTEB(eng, v1)").tasks
        if t.metadata.type == "Retrieval"
    ]
    assert evaluation.benchmark == "MTEB(eng, v1)"
    assert sorted(evaluation.tasks) == sorted(retrieval) and len(retrieval) == 15


def test_the_manifest_row_is_pinned_like_the_others():
    row = load_manifest("msmarco-triplets").rows["MSMARCO_TRIPLETS"]
    assert row.hf_id == "sentence-transformers/msmarco-co-condenser-margin-mse-sym-mnrl-mean-v1"
    assert (row.config, row.split) == ("triplet-hard", "train")
    assert row.revision == "84ed2d35626f617d890bd493b4d6db69a741e0e2"
    assert (row.query, row.positive, row.negatives) == ("query", "positive", ["negative"])
    assert row.in_domain == ["MSMARCO"]


def test_a_shipped_recipe_must_name_its_evaluation_and_purpose():
    recipe = load_recipe(RECIPE)
    bare = dataclasses.replace(recipe, purpose="", evaluation=None)
    problems = shipped_recipe_problems(bare)
    assert any("'purpose'" in p for p in problems) and any("'evaluation'" in p for p in problems)
    typo = dataclasses.replace(recipe, evaluation=Evaluation("MTEB(eng, v1)", ["SciFakt"]))
    (problem,) = shipped_recipe_problems(typo)
    assert "Unknown task 'SciFakt'" in problem and "Did you mean 'SciFact'" in problem


def test_a_malformed_evaluation_or_purpose_is_reported(tmp_path):
    data = yaml.safe_load(Path(load_recipe(RECIPE).path).read_text())
    data["purpose"] = ["not", "a", "sentence"]
    data["evaluation"] = {"benchmark": "MTEB(eng, v1)", "tasks": "SciFact", "metric": "ndcg"}
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(data))
    with pytest.raises(NeobenchError) as error:
        load_recipe(str(broken))
    problems = error.value.problems
    assert len(problems) == 2
    assert "'purpose' is one sentence" in problems[0] and "'evaluation' is" in problems[1]


def _triplets(n: int) -> list[list[str]]:
    frame = pd.read_parquet(FINETUNE_DATA / "snli_triplets_dev_test.parquet").head(n)
    return [frame[c].tolist() for c in ("query", "positive", "negative")]


def _loss_and_grad(loss_fn, model, columns) -> tuple[float, torch.Tensor]:
    model.zero_grad()
    features = [model.tokenize(texts) for texts in columns]
    value = loss_fn(features, None)
    value.backward()
    grad = next(p for p in model.parameters() if p.grad is not None).grad.clone()
    return value.item(), grad


def test_the_recipe_loss_is_the_scripts_cached_mnrl(tiny_bert):
    """The recipe's loss is sentence-transformers' CachedMultipleNegativesRankingLoss itself, built
    as bert24's script builds it (default scale 20, cos_sim, mini-batch 16); on real triplets it
    gives the loss and gradient of the stock class, and of the uncached loss."""
    model = SentenceTransformer(str(tiny_bert), device="cpu")
    model.eval()  # no dropout: the three losses see the same embeddings
    loss = _loss(model, load_recipe(RECIPE).values, world=1)
    assert type(loss) is CachedMultipleNegativesRankingLoss
    assert (loss.scale, loss.mini_batch_size, loss.directions) == (20.0, 16, ("query_to_doc",))
    stock = CachedMultipleNegativesRankingLoss(model, mini_batch_size=16)
    columns = _triplets(40)  # 40 queries, 80 candidates: three mini-batches per column
    ours, ours_grad = _loss_and_grad(loss, model, columns)
    theirs, theirs_grad = _loss_and_grad(stock, model, columns)
    plain, plain_grad = _loss_and_grad(MultipleNegativesRankingLoss(model), model, columns)
    assert ours == pytest.approx(theirs, rel=1e-6) and ours == pytest.approx(plain, rel=1e-5)
    torch.testing.assert_close(ours_grad, theirs_grad)
    torch.testing.assert_close(ours_grad, plain_grad, rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_a_few_steps_on_local_triplets(tmp_path, tiny_bert):
    out = tmp_path / "tuned"
    overrides = [
        "manifest=msmarco-sample-local",
        "max_steps=3",
        "batch_size=8",
        "gradcache_mini_batch=4",
        "max_seq_length=64",
        "checkpoint_every=100",
    ]
    summary = finetune(
        FinetuneConfig(
            model=str(tiny_bert),
            output=str(out),
            recipe=RECIPE,
            overrides=overrides,
            data_dir=str(FINETUNE_DATA),
            device="cpu",
        )
    )
    assert summary.steps == 3 and summary.datasets == {"SNLI_TRIPLETS": 6503}
    losses = [row["loss"] for row in read_curve(out / "neobench_loss_curve.jsonl")]
    assert len(losses) == 3 and torch.isfinite(torch.tensor(losses)).all()
    card = yaml.safe_load((out / "neobench_run_card.yaml").read_text())["recipe"]
    assert card["name"] == RECIPE and card["sha256"] == summary.recipe_sha256
    assert card["file"].endswith("msmarco-retrieval.yaml")
    values = card["values"]
    assert values["temperature"] == {"value": 0.05, "source": "bert24-code"}
    assert values["warmup_ratio"] == {"value": 0.05, "source": "modernbert-paper"}
    assert values["batch_size"]["source"] == "override"
    assert values["batch_size"]["recipe_source"] == "neobench"
    assert card["manifest"] == "msmarco-sample-local"
