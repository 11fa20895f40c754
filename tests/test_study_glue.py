"""A study's glue section: checked with every problem at once, planned as one job per model x
task x grid point x seed with its GPU-hours, run locally (real RTE and STS-B, a tiny BERT), then
skipped once complete."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import tiny_model

from neobench.cli.main import main
from neobench.core.errors import NeobenchError
from neobench.study.kinds import JobKind
from neobench.study.plan import build_plan

GLUE_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "glue"
HUB = Path(__file__).resolve().parents[2] / "shared" / "data" / "hub"


def _study(folder: Path, models: list[str], **glue) -> Path:
    grid = folder / "grid.yaml"
    grid.write_text("learning_rate: [1.0e-4, 3.0e-4]\nbatch_size: [16]\n")
    section = {"tasks": ["rte", "stsb"], "grid": str(grid), "seeds": [0, 1],
               "overrides": {"epochs": 1, "train_rows": 96, "max_seq_length": 48},
               "data_dir": str(GLUE_DATA)} | glue  # fmt: skip
    data = {
        "name": "glue-tiny",
        "output": str(folder / "out"),
        "models": [{"model": m, "name": f"m{i}"} for i, m in enumerate(models)],
        "eval": {"tasks": ["BIOSSES"]},
        "glue": section,
    }
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_bad_glue_section_every_problem_at_once(tmp_path, minilm) -> None:
    path = _study(tmp_path, [str(minilm)], tasks=["rte", "mrcp", "qnli"], grid="paper-tabel6",
                  overrides={"learnig_rate": 1e-5}, seeds=[0, 0], epochs=3)  # fmt: skip
    with pytest.raises(NeobenchError) as error:
        build_plan(path)
    text = "\n".join(error.value.problems)
    assert "glue: Unknown key 'epochs'" in text  # epochs belongs in overrides
    assert "glue.seeds: [0, 0]" in text
    assert "Did you mean 'mrpc'" in text and "Did you mean 'learning_rate'" in text
    assert "Did you mean 'paper-table6'" in text
    assert "GLUE task qnli" in text  # no data for it in the folder
    assert len(error.value.problems) == 6


def test_plan_is_models_x_tasks_x_points_x_seeds(tmp_path, minilm, capsys) -> None:
    path = _study(tmp_path, [str(minilm), str(minilm)])
    plan = build_plan(path)
    runs = [j for j in plan.jobs if j.kind is JobKind.GLUE]
    assert len(runs) == 2 * 2 * 2 * 2 and len({j.key for j in runs}) == len(runs)
    first = runs[0]
    assert first.key == "glue/m0/rte/batch_size=16,learning_rate=0.0001/seed0"
    assert first.argv[first.argv.index("--point") + 1] == "batch_size=16,learning_rate=0.0001"
    assert first.argv[first.argv.index("--model") + 1] == str(minilm)  # the backbone, not a tune
    (table,) = [j for j in plan.jobs if j.key == "table/glue"]
    assert table.after == [j.key for j in runs] and "--glue" in table.argv
    code = main(["study", "run", str(path), "--dry-run"])
    said = capsys.readouterr()
    text = " ".join((said.out + said.err).split())
    assert code == 0 and "16 glue jobs" in text and "an upper bound" in text


@pytest.mark.slow
def test_glue_jobs_run_locally_then_are_skipped(tmp_path, minilm, monkeypatch, capsys) -> None:
    monkeypatch.setenv("NEOBENCH_DATA_DIR", str(HUB))
    model = tiny_model(tmp_path / "tiny", minilm, 0)
    path = _study(tmp_path, [str(model)], seeds=[0])
    path.write_text(path.read_text().replace("train_rows: 96", "train_rows: 64"))
    assert main(["study", "run", str(path), "--launcher", "local", "--canary"]) == 0
    # The canary ran the model's first GLUE run short (32 rows, one epoch) in its own folder.
    (canary,) = (tmp_path / "out" / "canary").glob("glue/*/*/rte/*/seed-0/point.yaml")
    card = yaml.safe_load(canary.read_text())
    assert card["status"] == "complete" and card["rows"]["fit"] == 32
    plan = build_plan(path)
    runs = [j for j in plan.jobs if j.kind is JobKind.GLUE]
    assert len(runs) == 4 and all(j.done for j in plan.jobs)
    out = tmp_path / "out"
    table = (out / "glue-table.md").read_text()
    assert "glue-tiny/m0" in table and "| RTE | STS-B |" in table
    assert len(list(out.glob("glue/*/*/*/*/seed-0/point.yaml"))) == 4
    capsys.readouterr()
    assert main(["study", "run", str(path), "--launcher", "local"]) == 0
    assert "0 job(s) ran" in capsys.readouterr().err
