"""One GLUE run (task x grid point x seed) with the stock Trainer, on real RTE rows and a tiny
BERT: the held-out selection never reads the validation split, and the run is deterministic."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import tiny_model

from neobench.core.card_io import read_card
from neobench.core.errors import NeobenchError
from neobench.glue.run import RunSpec, complete, heldout_rows, lr_factor, run
from neobench.protocol.glue import TASKS, GlueSource
from neobench.protocol.glue_recipe import apply_glue_overrides, load_glue_recipe, point_key

GLUE_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "glue"
POINT = {"learning_rate": 1e-3, "batch_size": 16, "weight_decay": 0.01}


def _spec(model: Path, folder: Path):
    recipe = apply_glue_overrides(
        load_glue_recipe(), {"epochs": "1", "train_rows": "160", "max_seq_length": "64"}
    )
    values = recipe.at(POINT)
    return RunSpec(
        TASKS["rte"], POINT, point_key(POINT), 0, values, recipe.sha256(values), str(model), folder
    )


def _flipped_validation(root: Path) -> Path:
    """A copy of RTE whose validation labels are flipped: what selection must not notice."""
    (root / "rte").mkdir(parents=True)
    shutil.copy(GLUE_DATA / "rte" / "train-00000-of-00001.parquet", root / "rte")
    table = pq.read_table(GLUE_DATA / "rte" / "validation-00000-of-00001.parquet")
    labels = 1 - table.column("label").to_numpy()
    index = table.schema.get_field_index("label")
    column = pa.array(labels, type=table.schema.field("label").type)
    pq.write_table(table.set_column(index, table.schema.field("label"), column),
                   root / "rte" / "validation-00000-of-00001.parquet")  # fmt: skip
    return root


@pytest.mark.slow
def test_heldout_selection_never_reads_validation(tmp_path, minilm) -> None:
    model = tiny_model(tmp_path / "tiny", minilm, 0)
    real = run(_spec(model, tmp_path / "real"), GlueSource.of(GLUE_DATA), say=lambda _: None)
    other = GlueSource.of(_flipped_validation(tmp_path / "flipped"))
    changed = run(_spec(model, tmp_path / "changed"), other, say=lambda _: None)
    # The same checkpoint chosen by the same held-out scores, the same validation predictions...
    assert real["selection"] == changed["selection"]
    assert real["rows"] == {"train": 2490, "fit": 160, "selection": 249}
    a = (tmp_path / "real" / "predictions.json").read_text()
    b = (tmp_path / "changed" / "predictions.json").read_text()
    import json

    pa_, pb = json.loads(a)["validation"], json.loads(b)["validation"]
    assert pa_["prediction"] == pb["prediction"] and pa_["label"] != pb["label"]
    # ...only the reported validation score moves with validation's labels.
    assert real["validation"] != changed["validation"]
    assert complete(tmp_path / "real") and not (tmp_path / "real" / "trainer").exists()


def test_heldout_slice_is_stratified_and_fixed() -> None:
    values = load_glue_recipe().values
    labels = np.array([0] * 600 + [1] * 400)
    rows = heldout_rows(TASKS["rte"], labels, values)
    assert len(rows) == 100 and np.sum(labels[rows] == 1) == 40
    assert np.array_equal(rows, heldout_rows(TASKS["rte"], labels, values))  # every run, one slice


def test_schedule_is_the_authors() -> None:
    values = load_glue_recipe().values  # 6% warm-up, linear to 10% at 90% of steps, then flat
    assert lr_factor(0, 100, values) == pytest.approx(1 / 6)
    assert lr_factor(5, 100, values) == pytest.approx(1.0)
    assert lr_factor(6, 100, values) == pytest.approx(1.0)
    assert lr_factor(90, 100, values) == pytest.approx(0.1)
    assert lr_factor(99, 100, values) == pytest.approx(0.1)
    assert 0.1 < lr_factor(48, 100, values) < 1.0


@pytest.mark.slow
def test_grid_selects_per_task_and_skips_what_is_complete(tmp_path, minilm) -> None:
    from neobench.glue.grid import run_glue

    model = tiny_model(tmp_path / "tiny", minilm, 0)
    grid = tmp_path / "grid.yaml"
    grid.write_text("learning_rate: [1.0e-3, 1.0e-5]\nbatch_size: [16]\n")
    kwargs = dict(
        grid=str(grid), seeds=[0, 1], data_dir=str(GLUE_DATA), device="cpu", say=lambda _: None,
        overrides={"epochs": "1", "train_rows": "96", "max_seq_length": "48"},
    )  # fmt: skip
    first = run_glue(str(model), ["rte", "stsb"], str(tmp_path / "out"), **kwargs)
    assert (first.runs, first.ran, first.skipped) == (8, 8, 0)
    for task in ("rte", "stsb"):
        chosen = first.selected[task]
        assert chosen.missing == 0 and chosen.seeds == [0, 1] and len(chosen.candidates) == 2
        assert chosen.score == max(chosen.candidates.values())
        assert set(first.reported[task]) == {"validation"}
    again = run_glue(str(model), ["rte", "stsb"], str(tmp_path / "out"), **kwargs)
    assert (again.ran, again.skipped) == (0, 8) and again.reported == first.reported
    # Another recipe into the same folder is refused, nothing overwritten.
    other = kwargs | {"overrides": {"epochs": "2", "train_rows": "96", "max_seq_length": "48"}}
    with pytest.raises(NeobenchError, match="another recipe"):
        run_glue(str(model), ["rte"], str(tmp_path / "out"), **other)


def test_bad_inputs_all_at_once(tmp_path) -> None:
    from neobench.glue.grid import run_glue

    grid = tmp_path / "grid.yaml"
    grid.write_text("lr: [1.0e-5]\n")
    with pytest.raises(NeobenchError) as error:
        run_glue("x", ["rte", "qnli", "mrcp"], str(tmp_path / "o"), grid=str(grid),
                 data_dir=str(GLUE_DATA))  # fmt: skip
    text = "\n".join(error.value.problems)
    assert "Did you mean 'mrpc'" in text and "Did you mean 'learning_rate'" in text
    assert "GLUE task qnli" in text  # unknown task, unknown grid key, a task without data


@pytest.mark.slow
def test_a_killed_run_resumes_from_its_checkpoint(tmp_path, minilm) -> None:
    """SIGKILL right after the first checkpoint is saved; the same command again continues from
    that checkpoint and ends with the predictions of a run never interrupted."""
    import json
    import os
    import signal
    import subprocess
    import sys

    model = tiny_model(tmp_path / "tiny", minilm, 0)
    grid = tmp_path / "grid.yaml"
    grid.write_text("learning_rate: [1.0e-4]\nbatch_size: [16]\n")

    def argv(output: Path) -> list[str]:
        return [
            sys.executable, "-m", "neobench", "glue", "--model", str(model), "--tasks", "rte",
            "--grid", str(grid), "--set", "epochs=1", "--set", "max_seq_length=48",
            "--data-dir", str(GLUE_DATA), "--output", str(output), "--device", "cpu",
        ]  # fmt: skip

    env = os.environ | {"PYTHONUNBUFFERED": "1"}
    # Progress goes to stderr (stdout is kept for results).
    child = subprocess.Popen(argv(tmp_path / "killed"), stderr=subprocess.PIPE, text=True, env=env)
    assert child.stderr is not None
    for line in child.stderr:  # the event waited on: the run's own word that a checkpoint is saved
        if "checkpoint at step" in line:
            child.send_signal(signal.SIGKILL)
            break
    child.wait()
    assert child.returncode == -signal.SIGKILL
    (folder,) = (tmp_path / "killed").glob("glue/*/*/rte/*/seed-0")
    assert not complete(folder) and any((folder / "trainer").glob("checkpoint-*"))
    saved = line.split("checkpoint at step")[1].strip()

    resumed = subprocess.run(argv(tmp_path / "killed"), capture_output=True, text=True, env=env)
    assert resumed.returncode == 0, resumed.stderr
    card = read_card(folder / "point.yaml")
    assert card["status"] == "complete" and card["resumed_from"] == f"checkpoint-{saved}"
    assert card["steps_done"] == card["steps_planned"]
    whole = subprocess.run(argv(tmp_path / "whole"), capture_output=True, text=True, env=env)
    assert whole.returncode == 0, whole.stderr
    (other,) = (tmp_path / "whole").glob("glue/*/*/rte/*/seed-0")
    assert read_card(other / "point.yaml")["resumed_from"] is None
    a = json.loads((folder / "predictions.json").read_text())
    b = json.loads((other / "predictions.json").read_text())
    assert a == b


def test_dry_run_counts_runs_and_gpu_hours(tmp_path, monkeypatch, capsys) -> None:
    """Offline, a hub backbone's plan still counts its runs and their GPU-hours (the released
    shape, the shipped H100 calibration); nothing is written but the --json record."""
    import json

    from neobench.cli.main import main
    from neobench.study.estimate import Shape, glue_run_flops

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    argv = ["glue", "--model", "google-bert/bert-base-uncased", "--tasks", "rte,mrpc",
            "--grid", "paper", "--seeds", "0,1", "--dry-run", "--output", str(tmp_path / "o"),
            "--json", str(tmp_path / "plan.json")]  # fmt: skip
    assert main(argv) == 0
    record = json.loads((tmp_path / "plan.json").read_text())
    assert (record["runs"], record["ran"]) == (2 * 40 * 2, 0) and not (tmp_path / "o").exists()
    assert set(record["gpu_hours"]["tasks"]) == {"rte", "mrpc"}
    assert all(h > 0 for h in record["gpu_hours"]["tasks"].values())
    err = capsys.readouterr().err
    assert "160 runs" in err and "GPU-hours on one NVIDIA H100" in err and "upper bound" in err
    # The arithmetic: training and evaluations both scale with the epochs.
    shape = Shape("bert", 85_000_000, {"hidden_size": 768, "num_hidden_layers": 12})
    recipe = load_glue_recipe()
    ten = glue_run_flops(TASKS["rte"], recipe.values, shape)
    five = glue_run_flops(TASKS["rte"], apply_glue_overrides(recipe, {"epochs": "5"}).values, shape)
    assert ten == pytest.approx(2 * five, rel=0.01)
