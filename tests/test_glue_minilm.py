"""The GLUE protocol end to end on a real pretrained encoder: the packaged all-MiniLM-L6-v2 on real
STS-B and MRPC (../shared/data/glue), one CPU-sized grid point, through the command line and
read back by `table --glue` with intervals."""

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


@pytest.mark.slow
def test_minilm_learns_stsb_and_mrpc(tmp_path, minilm, capsys) -> None:
    grid = tmp_path / "grid.yaml"
    grid.write_text("learning_rate: [1.0e-4]\nbatch_size: [16]\n")
    # The small grid's budget (2 epochs on 2,000 rows), two evaluations per epoch on 300
    # held-out rows, 128 tokens: about 250 steps a task.
    settings = ["epochs=2", "train_rows=2000", "evals_per_epoch=2", "heldout_max_rows=300",
                "max_seq_length=128"]  # fmt: skip
    argv = ["glue", "--model", str(minilm), "--model-name", "all-MiniLM-L6-v2", "--tasks",
            "stsb,mrpc", "--grid", str(grid), "--data-dir", str(GLUE_DATA), "--output",
            str(tmp_path / "out"), "--device", "cpu", "--json", str(tmp_path / "glue.json"),
            *(f"--set={s}" for s in settings)]  # fmt: skip
    assert main(argv) == 0
    summary = json.loads((tmp_path / "glue.json").read_text())
    assert summary["runs"] == summary["ran"] == 2
    (stsb,) = (tmp_path / "out").glob("glue/*/*/stsb/*/seed-0")
    (mrpc,) = (tmp_path / "out").glob("glue/*/*/mrpc/*/seed-0")
    # STS-B: Spearman of the checkpoint chosen on the held-out slice, on validation.
    assert read_card(stsb / "point.yaml")["validation"]["validation"]["spearman"] > 0.80
    # MRPC: F1 above the majority class's (every pair "equivalent") on the same labels.
    labels = np.array(json.loads((mrpc / "predictions.json").read_text())["validation"]["label"])
    majority = metrics(TASKS["mrpc"], np.full_like(labels, np.bincount(labels).argmax()), labels)
    found = read_card(mrpc / "point.yaml")["validation"]["validation"]
    assert found["f1"] > majority["f1"] + 0.02
    # Read back: the paper's layout, intervals around each cell, the paper's rows beside it.
    table = glue_table([tmp_path / "out"], ci=True, reference="paper")
    row = table.row("all-MiniLM-L6-v2")
    assert table.task_names == ["MRPC", "STS-B"]
    correlations = read_card(stsb / "point.yaml")["validation"]["validation"]
    mean = (correlations["pearson"] + correlations["spearman"]) / 2
    assert row.tasks["STS-B"] == pytest.approx(100 * mean)  # the paper's score: their mean
    assert all(row.ci[c][0] < v < row.ci[c][1] for c, v in row.tasks.items())
    capsys.readouterr()
    assert main(["table", "--glue", "--results", str(tmp_path / "out"), "--ci"]) == 0
    assert "all-MiniLM-L6-v2" in capsys.readouterr().out
