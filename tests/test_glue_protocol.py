"""The GLUE protocol as data: tasks, metrics as GLUE defines them, the recipe and its grids, and
the clear messages for bad input (docs: neobench/protocol/glue.py, glue_recipe.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from neobench.core.errors import NeobenchError
from neobench.protocol import glue
from neobench.protocol.glue_recipe import (
    apply_glue_overrides,
    load_glue_recipe,
    point_key,
)

GLUE_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "glue"


def test_metrics_match_their_definitions() -> None:
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, 400)
    pred = np.where(rng.random(400) < 0.8, gold, 1 - gold)
    tp = np.sum((pred == 1) & (gold == 1))
    fp = np.sum((pred == 1) & (gold == 0))
    fn = np.sum((pred == 0) & (gold == 1))
    tn = np.sum((pred == 0) & (gold == 0))
    mrpc = glue.metrics(glue.TASKS["mrpc"], pred, gold)
    assert mrpc["f1"] == pytest.approx(2 * tp / (2 * tp + fp + fn))
    assert mrpc["accuracy"] == pytest.approx(np.mean(pred == gold))
    assert mrpc["score"] == pytest.approx((mrpc["f1"] + mrpc["accuracy"]) / 2)  # paper, app. C
    mcc = (tp * tn - fp * fn) / np.sqrt(float((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)))
    assert glue.metrics(glue.TASKS["cola"], pred, gold)["score"] == pytest.approx(mcc)
    scores, target = rng.random(300), rng.random(300)
    stsb = glue.metrics(glue.TASKS["stsb"], scores, target)
    assert stsb["pearson"] == pytest.approx(pearsonr(scores, target).statistic)
    assert stsb["spearman"] == pytest.approx(spearmanr(scores, target).statistic)
    # A constant prediction: no correlation, no nan; a majority guess: MCC 0.
    assert glue.metrics(glue.TASKS["stsb"], np.ones(10), target[:10])["score"] == 0.0
    assert glue.metrics(glue.TASKS["cola"], np.ones(400), gold)["score"] == 0.0


def test_tasks_by_any_spelling_and_unknown_ones_at_once() -> None:
    assert [t.name for t in glue.parse_tasks(["STS-B", "rte", "SST"])] == ["rte", "sst2", "stsb"]
    with pytest.raises(NeobenchError) as error:
        glue.parse_tasks(["rtee", "mrcp"])
    assert len(error.value.problems) == 2
    assert "Did you mean 'rte'" in error.value.problems[0]


def test_recipe_grids_and_hash() -> None:
    recipe = load_glue_recipe()
    assert len(recipe.grids["paper"].points()) == 40  # 5 learning rates x 4 batch sizes x 2 wd
    assert recipe.sources["epochs"] == "paper" and recipe.values.epochs == 10
    assert recipe.values.select_on == "heldout"
    points = recipe.grids["paper"].points()
    assert len({point_key(p) for p in points}) == 40
    hashes = {recipe.sha256(recipe.at(p)) for p in points}
    assert len(hashes) == 40  # each point is its own recipe
    changed = apply_glue_overrides(recipe, {"epochs": "3"})
    assert changed.values.epochs == 3 and changed.sha256() != recipe.sha256()
    assert changed.record()["values"]["epochs"]["source"] == "override"


def test_bad_grid_and_overrides_each_named(tmp_path: Path) -> None:
    recipe = load_glue_recipe()
    grid = tmp_path / "grid.yaml"
    grid.write_text("lr: [1e-5]\nbatch_size: [0]\nwarmup_steps: [10]\n")
    with pytest.raises(NeobenchError) as error:
        recipe.grid(str(grid))
    text = "\n".join(error.value.problems)
    assert "Did you mean 'learning_rate'" in text
    assert "batch_size=0 is out of range" in text
    assert "warmup_steps" in text and len(error.value.problems) == 3
    with pytest.raises(NeobenchError, match="Did you mean 'small'"):
        recipe.grid("smal")
    with pytest.raises(NeobenchError, match="epocs"):
        apply_glue_overrides(recipe, {"epocs": "2"})


def test_offline_folder_names_a_missing_task() -> None:
    source = glue.GlueSource.of(GLUE_DATA)
    tasks = glue.parse_tasks(["rte", "qnli"])
    problems = source.problems(tasks)
    assert len(problems) == 1 and problems[0].startswith("GLUE task qnli")
    assert "drop the task from --tasks" in problems[0]
    rte = source.load(glue.TASKS["rte"], "validation")
    assert rte.num_rows == 277 and rte.features["label"].names == ["entailment", "not_entailment"]
    record = source.record([glue.TASKS["rte"]])
    assert set(record["sha256"]) == {
        "rte/train-00000-of-00001.parquet",
        "rte/validation-00000-of-00001.parquet",
    }


def test_paper_glue_rows_are_consistent() -> None:
    """The transcribed Table 3: every row has the paper's columns; the Avg. the paper prints is
    the mean of its eight tasks within rounding, except BERT's rows (quoted from BERT's own
    Table 1, whose average also counts WNLI and the test server's scoring)."""
    from importlib import resources

    import yaml

    data = yaml.safe_load(
        resources.files("neobench.report.references").joinpath("paper_glue.yaml").read_text()
    )
    assert data["columns"][:-1] == [t for t in glue.ORDER if glue.TASKS[t].in_average]
    for name, row in data["rows"].items():
        assert len(row) == len(data["columns"]), name
        if not name.startswith("BERT"):
            assert abs(np.mean(row[:-1]) - row[-1]) <= 0.15, name
