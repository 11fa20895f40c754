"""Studies: the file's checks, the plan of the paper's comparison, the tiny study run locally."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import REPO

from neobench.cli.main import main
from neobench.core.errors import NeobenchError
from neobench.study.launchers.local import run_local
from neobench.study.plan import build_plan
from neobench.study.store import state

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
    assert "finetune.seeds: 'one', 2.5: a seed is an integer from 0 to 4294967295" in problem


def test_negative_seeds_are_refused_before_planning(tmp_path):
    # numpy cannot seed with them: the fine-tune job would die with a traceback in its log.
    [problem] = problems(write_study(tmp_path, finetune={"seeds": [-1, 0]}))
    assert "finetune.seeds: -1: a seed is an integer from 0 to 4294967295" in problem


def test_report_to_reaches_the_finetune_jobs_and_is_checked(tmp_path, monkeypatch):
    tune = {"recipe": "neobert-mteb-2k", "overrides": {"max_steps": 4}, "seeds": [0]}
    out = str(tmp_path / "out")  # not the file's output: a demo run there would conflict
    plan = build_plan(
        write_study(tmp_path / "a", finetune={**tune, "report_to": "tensorboard"}), out
    )
    tuned = [job for job in plan.jobs if job.kind == "finetune"]
    assert tuned and all("--report-to tensorboard" in " ".join(j.argv) for j in tuned)
    plain = build_plan(write_study(tmp_path / "b", finetune=tune), out)
    assert not any("--report-to" in j.argv for j in plain.jobs)
    [problem] = problems(write_study(tmp_path / "c", finetune={**tune, "report_to": "wandbb"}))
    assert "finetune: Unknown report_to value 'wandbb'. Did you mean 'wandb'?" in problem
    from neobench.train import inputs

    real = inputs.importlib.util.find_spec  # wandb missing, whatever this machine has

    def find_spec(name, *args):
        return None if name == "wandb" else real(name, *args)

    monkeypatch.setattr(inputs.importlib.util, "find_spec", find_spec)
    [problem] = problems(write_study(tmp_path / "d", finetune={**tune, "report_to": "wandb"}))
    assert "finetune: report_to wandb: the wandb package is not installed" in problem
    assert "pip install wandb" in problem


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


def test_a_folder_given_as_the_study_file_is_named_as_a_folder(capsys, tmp_path):
    write_study(tmp_path, models=["./no/such/model"])
    code, text = run(capsys, "study", "run", tmp_path, "--dry-run")
    assert code == 2
    assert f"study file {tmp_path}: is a folder, not a study file" in text
    assert "no such file" not in text
    written = sorted(p.name for p in tmp_path.glob("*.yaml"))
    assert written and f"It holds {', '.join(written)}." in text


# ------------------------------------------------------------------------- the paper's study


def test_dry_run_of_the_paper_comparison(capsys, tmp_path):
    plan = build_plan(STUDIES / "table4-base.yaml", output=str(tmp_path / "out"))
    models, seeds, shards = 6, 3, 8
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
    # The seeds of one backbone are filed under one model name: one row of seed replicates.
    names = {job.model: set() for job in plan.jobs if job.kind == "eval"}
    for job in plan.jobs:
        if job.kind == "eval":
            names[job.model].add(job.argv[job.argv.index("--model-name") + 1])
    assert len(names) == models and all(len(found) == 1 for found in names.values())
    assert len({job.key for job in plan.jobs}) == len(plan.jobs)
    table = plan.jobs[-1]
    assert table.after == [job.key for job in plan.jobs if job.kind == "eval"]
    assert plan.gpu_hours() == pytest.approx(18 * (9 + 40 / 60) + 144 * 1.5 + 0.5 * 0)
    code, text = run(capsys, "study", "run", STUDIES / "table4-base.yaml", "--dry-run",
                     "--output", tmp_path / "out")  # fmt: skip
    assert code == 0
    assert "163 jobs (18 finetune, 144 eval, 1 table): 0 done, 163 to run" in text
    assert "390.0 GPU-hours requested" in text
    assert "neobench finetune --model chandar-lab/NeoBERT" in text
    assert not (tmp_path / "out").exists()  # a dry run makes nothing


# ------------------------------------------------------------------- the tiny study, locally

# Small enough for the test's CPU jobs and for the one-node cluster of scripts/slurm-local.sh.
CPU_JOBS = {kind: {"gpus": 0, "cpus": 1, "mem": "1G", "time": "0:20:00"} for kind in
            ("finetune", "eval", "table")}  # fmt: skip


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, mirror) -> SimpleNamespace:
    """studies/tiny.yaml as shipped (the packaged MiniLM and the tiny config model, CPU jobs in
    its slurm section, which the local launcher ignores), run once locally."""
    folder = tmp_path_factory.mktemp("tiny-study")
    data = yaml.safe_load((STUDIES / "tiny.yaml").read_text())
    changes = {"data_dir": str(mirror)}
    path = write_study(folder / "study", **changes)
    out = folder / "out"
    code = main(["study", "run", str(path), "--output", str(out)])
    return SimpleNamespace(path=path, out=out, code=code, data=data, changes=changes)


def scores(out: Path) -> dict[tuple[str, str], float]:
    """(model folder, task) -> main score."""
    found = {}
    for path in (out / "results").glob("*/*/*.json"):
        if path.name != "model_meta.json":
            score = json.loads(path.read_text())["scores"]["test"][0]["main_score"]
            found[(path.parent.parent.name, path.stem)] = score
    return found


def test_tiny_study_runs_locally_then_only_what_is_missing(tiny):
    """One fine-tune, two eval shards, the table; a second run runs nothing; a deleted task
    result is re-made by its shard's job alone (and the table); changed overrides are refused."""
    path, out = tiny.path, tiny.out
    assert tiny.code == 0
    card = yaml.safe_load((out / "finetune/tiny-bert-seed0/neobench_run_card.yaml").read_text())
    assert card["status"] == "complete" and card["steps"] == 4 and card["seed"] == 0
    [folder] = (out / "results").glob("tiny__tiny-bert/*")
    assert {p.name for p in folder.glob("*.json")} >= {"BIOSSES.json", "STS16.json"}
    table = (out / "table.md").read_text()
    assert "| tiny/tiny-bert |" in table and "| tiny/MiniLM |" in table
    assert "Conditions differ" not in table  # both rows under identical conditions
    # The leaderboard page beside the table, from the job and from `study table --out`.
    assert "tiny/tiny-bert" in (out / "table.html").read_text()
    code = main(["study", "table", str(path), "--output", str(out), "--out", str(out / "t.md")])
    assert code == 0 and "tiny/MiniLM" in (out / "t.html").read_text()

    again = build_plan(path, str(out))
    assert run_local(again) == [] and all(state(again, j) == "done" for j in again.jobs)

    (folder / "STS16.json").unlink()
    plan = build_plan(path, str(out))
    [shard] = [
        j for j in plan.jobs if j.kind == "eval" and "STS16" in j.tasks and j.model == "tiny-bert"
    ]
    assert [j.key for j in plan.pending] == [shard.key, "table"]
    assert [j.key for j in run_local(plan)] == [shard.key, "table"]
    assert (folder / "STS16.json").is_file()

    tune = {**tiny.data["finetune"]}
    tune["overrides"] = {**tune["overrides"], "max_steps": 5}
    changed = write_study(path.parent / "changed", **tiny.changes, finetune=tune)
    found = problems(changed, out)
    assert len(found) == 2  # one per fine-tune already made: MiniLM's and the tiny BERT's
    for problem in found:
        assert "was fine-tuned under other conditions" in problem
        assert "finetune.overrides" in problem and "'max_steps': '5'" in problem

    changed = write_study(
        path.parent / "changed", **tiny.changes, eval={**tiny.data["eval"], "dtype": "bfloat16"}
    )
    found = problems(changed, out)
    assert len(found) == 2  # one per model already evaluated
    problem = next(p for p in found if "tiny/tiny-bert" in p)
    assert "was evaluated for tiny/tiny-bert under other conditions" in problem
    assert "(eval.dtype: auto there, bfloat16 in the study)" in problem


# --------------------------------------------------------------- the tiny study, through Slurm


def squeue_empty(env: dict[str, str], timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        listed = subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True)
        if not listed.stdout.strip():
            return
        time.sleep(2)
    pytest.fail(f"Slurm jobs still queued after {timeout_s} s")


@pytest.mark.slurm
def test_tiny_study_on_slurm(capsys, tiny, slurm_cluster, monkeypatch, tmp_path):
    """The tiny study's BERT submitted through submitit (MiniLM's jobs are the same kinds):
    every card records its Slurm job, the scores are the local launcher's, a second run submits
    nothing, a missing result submits its shard and the table only, and a cancelled job is
    reported failed. (The canary on Slurm: test_sweep.py.)"""
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    [bert] = [m for m in tiny.data["models"] if m["name"] == "tiny-bert"]
    path = write_study(tmp_path / "study", **tiny.changes, models=[bert], baseline=None)
    out = tmp_path / "out"
    code, text = run(capsys, "study", "run", path, "--output", out, "--launcher", "slurm", "--wait")
    assert code == 0, text
    assert "4 job(s) submitted" in text and "every job ended" in text
    cards = [*out.glob("finetune/*/neobench_run_card.yaml"), *out.glob("results/*/*/neobench/*")]
    assert len(cards) == 1 + 2  # the fine-tune, two eval shards
    for card in cards:
        assert yaml.safe_load(card.read_text())["environment"]["slurm"]["slurm_job_id"]
    local = {k: v for k, v in scores(tiny.out).items() if k[0] == "tiny__tiny-bert"}
    assert scores(out) == pytest.approx(local, abs=1e-6)
    assert set(scores(out)) == {("tiny__tiny-bert", t) for t in ("BIOSSES", "STS16")}
    assert "| tiny/tiny-bert |" in (out / "table.md").read_text()

    code, text = run(capsys, "study", "run", path, "--output", out, "--launcher", "slurm")
    assert code == 0 and "0 job(s) submitted" in text

    [result] = out.glob("results/tiny__tiny-bert/*/BIOSSES.json")
    result.unlink()
    # Submitted held (sbatch --hold), so that the scancel below finds them not ended, however
    # fast the shard would run (its eval takes seconds).
    held = {**tiny.data["slurm"], "sbatch": ["--hold"]}
    path = write_study(tmp_path / "study", **tiny.changes, models=[bert], baseline=None, slurm=held)
    code, text = run(capsys, "study", "run", path, "--output", out, "--launcher", "slurm")
    assert code == 0 and "2 job(s) submitted" in text
    jobs = build_plan(path, str(out)).jobs
    shard = next(j for j in jobs if "BIOSSES" in j.tasks and j.model == "tiny-bert")
    assert f"{shard.key}: submitted as Slurm job" in text and "table: submitted" in text
    user = ["--user", getpass.getuser()]
    subprocess.run(["scancel", *user], env=slurm_cluster.env, check=True)
    squeue_empty(slurm_cluster.env)
    code, text = run(capsys, "study", "status", path, "--output", out)
    assert f"eval {shard.shard[0]}/2 failed" in text and "table failed" in text
    # How each ended, in Slurm's word, with the line that says why
    assert f"failed: {shard.key}: CANCELLED" in text, text
    # What the next run submits again: the cancelled pieces, nothing else.
    assert [j.key for j in build_plan(path, str(out)).pending] == [shard.key, "table"]


def test_the_canary_is_sent_first_for_a_large_slurm_study_only(tmp_path):
    from neobench.study import canary

    plan = build_plan(STUDIES / "table4-base.yaml", output=str(tmp_path / "out"))
    assert canary.wanted(plan, "slurm", asked=False, refused=False)  # 351 GPU-hours
    assert not canary.wanted(plan, "slurm", asked=False, refused=True)
    assert not canary.wanted(plan, "local", asked=False, refused=False)
    jobs = canary.canary_plan(plan, "BIOSSES").jobs
    assert [j.kind for j in jobs] == ["finetune", "eval"] * 6  # one of each per backbone
    tune, ev = jobs[0], jobs[1]
    assert tune.resources == plan.jobs[0].resources  # the real jobs' resources and flags
    assert "max_steps=2" in tune.argv and "--resume" not in tune.argv
    assert ev.after == [tune.key] and ev.argv[ev.argv.index("--model") + 1] == str(tune.output)
    assert ev.argv[ev.argv.index("--tasks") + 1] == "BIOSSES" and "--shard" not in ev.argv
    assert str(tmp_path / "out" / "canary") in ev.argv  # its results apart from the study's


def test_a_failing_canary_stops_the_study_before_any_job(capsys, mirror, tmp_path, tiny_bert):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(tiny_bert, broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    models = [{"model": str(broken), "name": "broken"}]
    ev = {"benchmark": "MTEB(eng, v1)", "tasks": ["BIOSSES"], "shards": 1}
    path = write_study(tmp_path / "study", data_dir=str(mirror), models=models, eval=ev,
                       baseline=None)  # fmt: skip
    out = tmp_path / "out"
    code, text = run(capsys, "study", "run", path, "--output", out, "--canary")
    assert code != 0
    assert "the canary failed (finetune/broken-seed0" not in text  # keys are the canary's
    assert "the canary failed (canary/finetune/broken-seed0:" in text
    assert "nothing of the study was submitted" in text
    assert not (out / "finetune").exists() and not (out / "results").exists()
    assert all(p.name.startswith("canary-") for p in (out / "jobs").iterdir())


def test_no_partition_and_no_default_one_is_refused_before_submitting(
    capsys, mirror, tmp_path, monkeypatch
):
    """A cluster whose sinfo lists no default partition (marked '*'): refused, nothing sent."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, output in (("sinfo", "gpu\ncpu"), ("sbatch", "")):
        (bin_dir / name).write_text(f"#!/bin/sh\nprintf '{output}\\n'\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    path = write_study(tmp_path / "study", data_dir=str(mirror), slurm=CPU_JOBS)
    out = tmp_path / "out"
    code, text = run(capsys, "study", "run", path, "--output", out, "--launcher", "slurm")
    assert code == 2
    assert "slurm.partition: the study names no partition and this cluster has no default" in text
    assert "(sinfo lists: cpu, gpu)" in text
    assert not out.exists()  # nothing built, recorded or submitted
