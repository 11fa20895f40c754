"""Studies: the file's checks, the plan of the paper's comparison, the tiny study run locally."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import REPO

from neobench.cli import main
from neobench.errors import NeobenchError
from neobench.study.launch import run_local, state
from neobench.study.plan import build_plan

STUDIES = REPO / "studies"


def run(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    text = " ".join((captured.out + captured.err).split())  # undo rich's line wrapping
    assert "Traceback" not in text
    return code, text


def write_study(folder: Path, **changes) -> Path:
    """studies/tiny.yaml with some keys replaced (None: removed), beside its model config."""
    data = yaml.safe_load((STUDIES / "tiny.yaml").read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tiny-bert.json").write_text((STUDIES / "tiny-bert.json").read_text())
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def problems(path: Path, out: Path | None = None) -> list[str]:
    with pytest.raises(NeobenchError) as error:
        build_plan(path, str(out) if out else None)
    return error.value.problems


# ------------------------------------------------------------------------------ bad study files


def test_unknown_key_says_did_you_mean(tmp_path):
    data = yaml.safe_load((STUDIES / "tiny.yaml").read_text())
    data["modles"] = data.pop("models")
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(data))
    found = problems(tmp_path / "study.yaml")
    assert any("Unknown key 'modles'. Did you mean 'models'?" in p for p in found)
    assert any("missing 'models'" in p for p in found)


def test_unknown_model_path(tmp_path):
    path = write_study(tmp_path, models=[{"model": "./no/such/model", "name": "mine"}])
    [problem] = problems(path)
    assert "models[0]: ./no/such/model: no such folder" in problem


def test_unknown_recipe(tmp_path):
    tune = {"recipe": "neobert-mteb-3k", "seeds": [0]}
    [problem] = problems(write_study(tmp_path, finetune=tune))
    assert "finetune: Unknown recipe 'neobert-mteb-3k'. Did you mean 'neobert-mteb-2k'?" in problem


def test_unknown_task(tmp_path):
    [problem] = problems(write_study(tmp_path, eval={"tasks": ["BIOSES"], "shards": 2}))
    assert "eval: Unknown task 'BIOSES' in MTEB(eng, v1). Did you mean 'BIOSSES'?" in problem


def test_seeds_must_be_integers(tmp_path):
    [problem] = problems(write_study(tmp_path, finetune={"seeds": [0, "one", 2.5]}))
    assert "finetune.seeds: 'one', 2.5: seeds are a list of integers" in problem


def test_every_problem_at_once_through_the_cli(capsys, tmp_path):
    path = write_study(
        tmp_path,
        models=["./no/such/model"],
        finetune={"recipe": "neobert-mteb-2k", "overrides": {"max_step": 3}, "seeds": ["a"]},
        eval={"tasks": ["STS16"], "shard": 2},
        reference="papers",
    )
    code, text = run(capsys, "study", "run", path, "--dry-run")
    assert code == 2
    for expected in (
        "models[0]: ./no/such/model: no such folder",
        "finetune.seeds: 'a'",
        "Unknown recipe key 'max_step'. Did you mean 'max_steps'?",
        "eval: Unknown key 'shard'. Did you mean 'shards'?",
        "Unknown reference value 'papers'. Did you mean 'paper'?",
    ):
        assert expected in text
    assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------------- the paper's study


def test_dry_run_of_the_paper_comparison(capsys, tmp_path):
    plan = build_plan(STUDIES / "table4-base.yaml", output=str(tmp_path / "out"))
    models, seeds, shards = 5, 3, 8
    kinds = [job.kind for job in plan.jobs]
    assert kinds.count("finetune") == models * seeds
    assert kinds.count("eval") == models * seeds * shards
    assert kinds == [*kinds[:-1], "table"] and kinds.count("table") == 1
    tunes = {job.key: job for job in plan.jobs if job.kind == "finetune"}
    for job in plan.jobs:
        if job.kind == "eval":
            [before] = job.after
            tune = tunes[before]
            assert (tune.model, tune.seed) == (job.model, job.seed)
            assert job.argv[job.argv.index("--model") + 1] == str(tune.output)
            assert "--shard" in job.argv and job.resources.gpus == 1
    table = plan.jobs[-1]
    assert table.after == [job.key for job in plan.jobs if job.kind == "eval"]
    assert plan.gpu_hours() == pytest.approx(15 * 6 + 120 * 8 + 0.5 * 0)
    code, text = run(capsys, "study", "run", STUDIES / "table4-base.yaml", "--dry-run",
                     "--output", tmp_path / "out")  # fmt: skip
    assert code == 0
    assert "136 jobs (15 finetune, 120 eval, 1 table): 0 done, 136 to run" in text
    assert "1,050.0 GPU-hours requested" in text
    assert "neobench finetune --model chandar-lab/NeoBERT" in text
    assert not (tmp_path / "out").exists()  # a dry run makes nothing


# ------------------------------------------------------------------- the tiny study, locally


def test_tiny_study_runs_locally_then_only_what_is_missing(capsys, tmp_path, mirror, monkeypatch):
    """The tiny study with its config model (MiniLM's fine-tune costs minutes on a CPU): one
    fine-tune, two eval shards, the table; a second run runs nothing; a deleted task result
    is re-made by its shard's job alone (and the table); changed overrides are refused."""
    monkeypatch.setenv("NEOBENCH_DATA_DIR", str(mirror))
    tiny = yaml.safe_load((STUDIES / "tiny.yaml").read_text())
    path = write_study(
        tmp_path / "study",
        models=[m for m in tiny["models"] if m["name"] == "tiny-bert"],
        baseline="tiny-bert",
    )
    out = tmp_path / "out"
    code, text = run(capsys, "study", "run", path, "--output", out)
    assert code == 0, text
    assert "4 jobs (1 finetune, 2 eval, 1 table): 0 done, 4 to run" in text
    card = yaml.safe_load((out / "finetune/tiny-bert-seed0/neobench_run_card.yaml").read_text())
    assert card["status"] == "complete" and card["steps"] == 4 and card["seed"] == 0
    [folder] = (out / "results").glob("tiny__tiny-bert-seed0/*")
    assert {p.name for p in folder.glob("*.json")} >= {"BIOSSES.json", "STS16.json"}
    assert "tiny/tiny-bert-seed0" in (out / "table.md").read_text()

    again = build_plan(path, str(out))
    assert run_local(again) == [] and all(state(again, j) == "done" for j in again.jobs)

    (folder / "STS16.json").unlink()
    plan = build_plan(path, str(out))
    [shard] = [j for j in plan.jobs if j.kind == "eval" and "STS16" in j.tasks]
    assert [j.key for j in plan.pending] == [shard.key, "table"]
    assert [j.key for j in run_local(plan)] == [shard.key, "table"]
    assert (folder / "STS16.json").is_file()

    tiny["finetune"]["overrides"]["max_steps"] = 5
    changed = write_study(
        tmp_path / "study",
        models=[m for m in tiny["models"] if m["name"] == "tiny-bert"],
        baseline="tiny-bert",
        finetune=tiny["finetune"],
    )
    [problem] = problems(changed, out)
    assert "was fine-tuned under other conditions" in problem
    assert "finetune.overrides" in problem and "'max_steps': '5'" in problem
