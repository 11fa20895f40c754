"""The GLUE protocol end to end on a real pretrained encoder: the packaged all-MiniLM-L6-v2 on real
STS-B and on real MRPC (../shared/data/glue), one CPU-sized grid point each, through the command
line and read back by `table --glue` with intervals. One test per task: tests/conftest.py gives each
its own worker (PER_TEST), the suite's longest tests otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from neobench.cli.main import main
from neobench.core.card_io import read_card
from neobench.protocol.glue import TASKS, metrics
from neobench.report.glue import glue_table

GLUE_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "glue"
# The small grid's budget (2 epochs on 2,000 rows), two evaluations per epoch on 300 held-out rows,
# 128 tokens: about 250 steps a task. Fewer fail the thresholds: 1 epoch on 1,000 rows at the same
# rate leaves STS-B's Spearman at 0.10 and MRPC at the majority class's F1.
SETTINGS = ("epochs=2", "train_rows=2000", "evals_per_epoch=2", "heldout_max_rows=300",
            "max_seq_length=128")  # fmt: skip


def fine_tune(task: str, folder: Path, minilm: Path) -> Path:
    """One grid point of MiniLM on `task` through `neobench glue`; the seed-0 run folder."""
    grid = folder / "grid.yaml"
    grid.write_text("learning_rate: [1.0e-4]\nbatch_size: [16]\n")
    argv = ["glue", "--model", str(minilm), "--model-name", "all-MiniLM-L6-v2", "--tasks", task,
            "--grid", str(grid), "--data-dir", str(GLUE_DATA), "--output", str(folder / "out"),
            "--device", "cpu", "--json", str(folder / "glue.json"),
            *(f"--set={s}" for s in SETTINGS)]  # fmt: skip
    assert main(argv) == 0
    summary = json.loads((folder / "glue.json").read_text())
    assert summary["runs"] == summary["ran"] == 1
    (run,) = (folder / "out").glob(f"glue/*/*/{task}/*/seed-0")
    return run


def read_back(folder: Path, column: str, score: float, capsys) -> None:
    """The paper's layout: the cell is the run's score inside its interval, the paper's rows too."""
    table = glue_table([folder / "out"], ci=True, reference="paper")
    row = table.row("all-MiniLM-L6-v2")
    assert table.task_names == [column]
    assert row.tasks[column] == pytest.approx(100 * score)
    low, high = row.ci[column]
    assert low < row.tasks[column] < high
    capsys.readouterr()
    assert main(["table", "--glue", "--results", str(folder / "out"), "--ci"]) == 0
    assert "all-MiniLM-L6-v2" in capsys.readouterr().out


@pytest.mark.slow
def test_minilm_learns_stsb(tmp_path, minilm, capsys) -> None:
    run = fine_tune("stsb", tmp_path, minilm)
    # Spearman of the checkpoint chosen on the held-out slice, on validation.
    found = read_card(run / "point.yaml")["validation"]["validation"]
    assert found["spearman"] > 0.80
    read_back(tmp_path, "STS-B", (found["pearson"] + found["spearman"]) / 2, capsys)  # their mean


@pytest.mark.slow
def test_minilm_beats_the_majority_on_mrpc(tmp_path, minilm, capsys) -> None:
    run = fine_tune("mrpc", tmp_path, minilm)
    # F1 above the majority class's (every pair "equivalent") on the same labels.
    labels = np.array(json.loads((run / "predictions.json").read_text())["validation"]["label"])
    majority = metrics(TASKS["mrpc"], np.full_like(labels, np.bincount(labels).argmax()), labels)
    found = read_card(run / "point.yaml")["validation"]["validation"]
    assert found["f1"] > majority["f1"] + 0.02
    read_back(tmp_path, "MRPC", (found["f1"] + found["accuracy"]) / 2, capsys)
