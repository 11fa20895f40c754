"""A study's glue section: checked with every problem at once, planned as one job per model x
task x grid point x seed with its GPU-hours; a study of GLUE runs alone (eval: none) run locally
(real RTE, a tiny BERT) after its canary, then skipped once complete; the shipped
studies/glue-base.yaml planned offline."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml
from conftest import REPO, tiny_model

from neobench.cli.main import main
from neobench.core.errors import NeobenchError
from neobench.study.kinds import JobKind
from neobench.study.plan import build_plan

GLUE_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "glue"


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


def _glue_only(folder: Path, model: str, **top) -> Path:
    """A study of one GLUE run and nothing else: RTE at the one point of its grid, seed 0, on
    48 training rows for one epoch."""
    grid = folder / "grid.yaml"
    grid.write_text("learning_rate: [3.0e-4]\nbatch_size: [16]\n")
    data = {"name": "glue-only", "output": str(folder / "out"),
            "models": [{"model": model, "name": "m"}], "finetune": "none", "eval": "none",
            "glue": {"tasks": ["rte"], "grid": str(grid), "data_dir": str(GLUE_DATA),
                     "overrides": {"epochs": 1, "train_rows": 48, "max_seq_length": 48,
                                   "heldout_max_rows": 32}}} | top  # fmt: skip
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_eval_none_needs_glue_and_no_finetune(tmp_path, minilm) -> None:
    path = _glue_only(tmp_path, str(minilm), glue=None, finetune={"seeds": [0]})
    with pytest.raises(NeobenchError) as error:
        build_plan(path)
    text = "\n".join(error.value.problems)
    assert "eval: none: the study would run nothing; give a glue section" in text
    assert "eval: none: the fine-tunes would never be evaluated" in text
    assert len(error.value.problems) == 2


@pytest.mark.slow
def test_glue_job_runs_locally_after_its_canary_then_is_skipped(tmp_path, minilm, capsys) -> None:
    model = tiny_model(tmp_path / "tiny", minilm, 0)
    path = _glue_only(tmp_path, str(model))
    plan = build_plan(path)
    assert [j.key for j in plan.jobs] == ["glue/m/rte/batch_size=16,learning_rate=0.0003/seed0",
                                          "table/glue"]  # no eval, no MTEB table  # fmt: skip
    assert main(["study", "run", str(path), "--launcher", "local", "--canary"]) == 0
    out = tmp_path / "out"
    # The canary ran the model's first GLUE run short (32 rows, one epoch) in its own folder.
    (canary,) = (out / "canary").glob("glue/*/*/rte/*/seed-0/point.yaml")
    card = yaml.safe_load(canary.read_text())
    assert card["status"] == "complete" and card["rows"]["fit"] == 32
    (run,) = out.glob("glue/glue-only__m/*/rte/*/seed-0/point.yaml")
    assert yaml.safe_load(run.read_text())["status"] == "complete"
    assert all(j.done for j in build_plan(path).jobs)
    assert "glue-only/m" in (out / "glue-table.md").read_text()
    assert '"layout":"tasks"' in (out / "glue-table.html").read_text()  # its page, beside it
    assert not (out / "table.md").exists()
    capsys.readouterr()
    assert main(["study", "run", str(path), "--launcher", "local"]) == 0
    assert "0 job(s) ran" in capsys.readouterr().err
    assert main(["study", "table", str(path)]) == 0  # its only table: the GLUE one
    assert "glue-only/m" in capsys.readouterr().out


def test_shipped_glue_base_is_planned_offline(tmp_path, capsys, monkeypatch) -> None:
    """studies/glue-base.yaml: Table 4's six base backbones on the paper's grid (40 points), the
    eight averaged tasks, three seeds; no hub needed to plan it."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("NEOBENCH_CACHE", str(tmp_path / "home"))  # the shipped H100 figures
    out = tmp_path / "out"
    code = main(["study", "run", str(REPO / "studies" / "glue-base.yaml"), "--dry-run",
                 "--output", str(out)])  # fmt: skip
    said = capsys.readouterr()
    text = " ".join((said.out + said.err).split())
    assert code == 0 and "Traceback" not in text
    assert "5761 jobs (5760 glue, 1 table)" in text  # 6 x 8 x 40 x 3, then the table
    assert "5760 glue jobs:" in text and "(an upper bound: every epoch" in text
    assert "GPU-hours" in text and "per model: BERT-base" in text
    assert "warning:" not in text  # its time limit follows the longest run's estimate
    assert not out.exists()


@pytest.mark.slurm
def test_glue_jobs_on_slurm_in_arrays_of_the_cluster_size(
    tmp_path, minilm, slurm_cluster, monkeypatch, capsys
) -> None:
    """Three GLUE runs (RTE, three seeds) through the local Slurm, in arrays of at most two (as
    if the cluster's MaxArraySize were 2: the paper's grid is thousands of runs), then the GLUE
    table after them; a second run submits nothing."""
    from neobench.study.launchers import slurm
    from neobench.study.store import read_record

    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    assert slurm.max_array_size() == 1001  # read from the cluster: Slurm's default
    monkeypatch.setattr(slurm, "max_array_size", lambda: 2)
    model = tiny_model(tmp_path / "tiny", minilm, 0)
    cpu = {"gpus": 0, "cpus": 1, "mem": "1G", "time": "0:20:00"}
    path = _glue_only(tmp_path, str(model), slurm={"glue": cpu, "table": cpu})
    data = yaml.safe_load(path.read_text())
    data["glue"]["seeds"] = [0, 1, 2]
    path.write_text(yaml.safe_dump(data))
    assert main(["study", "run", str(path), "--launcher", "slurm", "--wait"]) == 0
    plan = build_plan(path)
    assert all(j.done for j in plan.jobs)
    ids = [read_record(plan, j).launcher_job_id for j in plan.jobs if j.kind is JobKind.GLUE]
    arrays = Counter(str(i).split("_")[0] for i in ids)  # an array's elements are ID_K
    assert sorted(arrays.values()) == [1, 2]
    assert "glue-only/m" in (tmp_path / "out" / "glue-table.md").read_text()
    capsys.readouterr()
    assert main(["study", "run", str(path), "--launcher", "slurm"]) == 0
    assert "0 job(s) submitted" in capsys.readouterr().err
