"""Sweeps in study files (studies/tiny-sweep.yaml): the file's checks, the plan before and after
the selection, the tiny sweep run locally and through the real local Slurm, and the record every
evaluation of a selected point carries into its run card and the table."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import REPO
from test_study import problems, run, scores, squeue_empty

from neobench.cli.main import main
from neobench.core import selection
from neobench.core.cards import EvalCard, EvalModel, finetune_dev
from neobench.core.conditions import Conditions
from neobench.core.errors import NeobenchError
from neobench.study.launchers.local import run_local
from neobench.study.plan import build_plan
from neobench.study.sweep import points

STUDY = REPO / "studies" / "tiny-sweep.yaml"
GRID = {"learning_rate": ["1e-05", "0.001"]}
POINTS = [f"learning_rate={v}" for v in GRID["learning_rate"]]


def write_sweep(folder: Path, mirror: Path | None = None, **finetune) -> Path:
    """studies/tiny-sweep.yaml with finetune keys replaced (None: removed)."""
    data = yaml.safe_load(STUDY.read_text())
    for key, value in finetune.items():
        if value is None:
            data["finetune"].pop(key, None)
        else:
            data["finetune"][key] = value
    if mirror is not None:
        data["data_dir"] = str(mirror)
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "studies" / "tiny-bert.json", folder / "tiny-bert.json")
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# ------------------------------------------------------------------------------ the file


def test_bad_sweeps_are_every_problem_at_once(tmp_path):
    overrides = {
        k: v for k, v in yaml.safe_load(STUDY.read_text())["finetune"]["overrides"].items()
    }
    overrides.pop("dev_rows")
    overrides["warmup_ratio"] = 0.2
    path = write_sweep(
        tmp_path,
        overrides=overrides,
        sweep={"learning_rate": [1e-4], "seed": [0, 1], "warmup_ratio": [0.1, 0.2]}
        | {"learnin": [1, 2]},
        sweep_eval="some",
    )
    found = problems(path, tmp_path / "out")
    text = "\n".join(found)
    assert "finetune.sweep.learning_rate: [0.0001]: a list of at least two distinct values" in text
    assert "finetune.sweep.seed: seeds are replicates, not a sweep" in text
    assert "finetune.sweep.warmup_ratio: also set in finetune.overrides" in text
    assert "learnin" in text and "learning_rate" in text  # the unknown key, and the close one
    assert "finetune.sweep_eval" in text and "selected" in text
    assert "a sweep selects on the dev slice: set finetune.overrides.dev_rows" in text


def test_points_are_every_combination_in_file_order():
    grid = {"learning_rate": ["1e-05", "0.0001"], "warmup_ratio": ["0", "0.1"]}
    labels = [p.label for p in points(grid)]
    assert labels == [
        "learning_rate=1e-05, warmup_ratio=0",
        "learning_rate=1e-05, warmup_ratio=0.1",
        "learning_rate=0.0001, warmup_ratio=0",
        "learning_rate=0.0001, warmup_ratio=0.1",
    ]
    assert len({p.slug for p in points(grid)}) == 4


def test_the_plan_holds_no_eval_job_before_the_selection(capsys, tmp_path):
    """Before every fine-tune of the sweep is complete there is no eval job (and no table) in
    the plan: the selection cannot read what does not exist. The dry run says so, with the
    GPU-hours the evals will request."""
    path = write_sweep(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["slurm"]["eval"]["gpus"] = data["slurm"]["finetune"]["gpus"] = 1
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    plan = build_plan(path, str(tmp_path / "out"))
    assert [j.kind for j in plan.jobs] == ["finetune"] * 2
    assert plan.waiting == ["tiny-bert"] and plan.table is None
    code, text = run(capsys, "study", "run", path, "--output", tmp_path / "out", "--dry-run")
    assert code == 0
    for label in POINTS:
        assert f"tiny-bert {label} - - not yet" in text
    assert "2 jobs (2 finetune)" in text
    # 2 fine-tunes x 1 GPU x 20 min now; 1 eval x 1 GPU x 20 min after the selection
    assert "1.0 GPU-hours requested in all" in text and "0.7 for the jobs still to run" in text
    assert "and 0.3 for the evals planned after the sweep's selection" in text


# ------------------------------------------------------------------ the tiny sweep, run locally


@pytest.fixture(scope="module")
def swept(tmp_path_factory, mirror) -> SimpleNamespace:
    """studies/tiny-sweep.yaml run once with the local launcher."""
    folder = tmp_path_factory.mktemp("tiny-sweep")
    path = write_sweep(folder / "study", mirror)
    out = folder / "out"
    code = main(["study", "run", str(path), "--output", str(out)])
    return SimpleNamespace(path=path, out=out, code=code, mirror=mirror)


def _dev(out: Path) -> dict[str, float]:
    found = {}
    for label, point in zip(POINTS, points(GRID), strict=True):
        dev = finetune_dev(out / "finetune" / f"tiny-bert-{point.slug}-seed0")
        assert dev is not None and dev.value is not None
        found[label] = dev.value
    return found


def check_swept(out: Path) -> selection.Selection:
    """Two fine-tunes, one selected by its dev metric, only it evaluated, the table names it."""
    dev = _dev(out)
    chosen = selection.read_selection(out / "sweeps" / "tiny-bert.json")
    assert chosen.selected == max(dev, key=dev.get)
    assert {p["label"]: p["mean"] for p in chosen.points} == dev
    [folder] = (out / "results").glob("tiny-sweep__tiny-bert/*")  # one model evaluated, once
    assert {p.name for p in folder.glob("*.json")} >= {"BIOSSES.json", "STS16.json"}
    assert not (out / "sensitivity").exists()
    logs = sorted(p.name for p in (out / "logs").glob("eval-*"))
    assert logs == ["eval-tiny-bert-seed0-1of1.log"]
    [card] = folder.glob("neobench/*.yaml")
    sweep = yaml.safe_load(card.read_text())["model"]["sweep"]
    assert sweep["point"] == sweep["selected"] == chosen.selected
    assert sweep["sha256"] == chosen.sha256 and sweep["metric"] == "dev mrr@10"
    table = " ".join((out / "table.md").read_text().split())
    assert f"tiny-sweep/tiny-bert: {chosen.selected} selected by a sweep" in table
    assert "learning_rate in 1e-05, 0.001" in table
    return chosen


def test_tiny_sweep_runs_locally_then_does_nothing(swept, capsys):
    assert swept.code == 0
    chosen = check_swept(swept.out)
    record = swept.out / "sweeps" / "tiny-bert.json"
    made = record.read_text()
    # The choice was written before the first eval job existed: its log started after it.
    eval_log = swept.out / "logs" / "eval-tiny-bert-seed0-1of1.log"
    assert record.stat().st_mtime <= eval_log.stat().st_mtime

    again = build_plan(swept.path, str(swept.out))
    assert not again.pending and not again.waiting and run_local(again) == []
    code, text = run(capsys, "study", "run", swept.path, "--output", swept.out)
    assert code == 0 and "done: 0 job(s) ran" in text
    assert record.read_text() == made  # kept as it was

    code, text = run(capsys, "study", "status", swept.path, "--output", swept.out)
    assert code == 0 and f"tiny-bert {chosen.selected}" in text and " selected" in text
    for label, value in _dev(swept.out).items():
        assert f"{label} {value:.4f} {value:.4f}" in text  # each point's dev metric


@contextlib.contextmanager
def restored(*paths: Path):
    """The files' contents as they were, whatever the test did to them (the run is shared:
    its model paths are recorded, so it cannot be copied elsewhere)."""
    kept = {p: p.read_bytes() for p in paths}
    try:
        yield
    finally:
        for path, data in kept.items():
            path.write_bytes(data)


def test_the_selection_does_not_read_evaluation_results(swept, tmp_path):
    """With the record moved away, the selected row's results made worthless and a result
    planted for another point, the plan selects the same point: only fine-tune cards count."""
    record = swept.out / "sweeps" / "tiny-bert.json"
    before = selection.read_selection(record)
    results = sorted((swept.out / "results").glob("tiny-sweep__tiny-bert/*/*.json"))
    other = next(label for label in POINTS if label != before.selected)
    fake = swept.out / "results" / f"tiny-sweep__tiny-bert-{other.replace('=', '-')}" / "x"
    with restored(record, *results):
        record.unlink()
        for result in results:
            data = json.loads(result.read_text())
            for split in data.get("scores", {}).values():
                for entry in split:
                    entry["main_score"] = 0.0
            result.write_text(json.dumps(data))
        fake.mkdir(parents=True)
        (fake / "BIOSSES.json").write_text(json.dumps({"scores": {"test": [{"main_score": 1}]}}))
        try:
            plan = build_plan(swept.path, str(swept.out))
        finally:
            shutil.rmtree(fake.parent)
        assert [c.selected for c in plan.selections.values()] == [before.selected]
        assert not record.exists()  # reading the plan writes nothing; running it records it
        assert [j.key for j in plan.jobs if j.kind == "eval"] == ["eval/tiny-bert-seed0/1of1"]


def test_changed_fine_tunes_after_the_choice_are_refused(swept):
    record = swept.out / "sweeps" / "tiny-bert.json"
    with restored(record):
        held = json.loads(record.read_text())
        held["selected"] = next(label for label in POINTS if label != held["selected"])
        record.write_text(json.dumps(held))
        found = problems(swept.path, swept.out)
    assert any("a selection made earlier differs" in p and "new output folder" in p for p in found)


def test_sweep_eval_all_files_the_other_points_apart(swept, tmp_path):
    """`sweep_eval: all`: the other points are evaluated too, as fixed-recipe runs under
    OUTPUT/sensitivity (the main table keeps the selected rows only)."""
    path = write_sweep(tmp_path / "all", swept.mirror, sweep_eval="all")
    plan = build_plan(path, str(swept.out))
    [chosen] = plan.selections.values()
    evals = {j.key: j for j in plan.jobs if j.kind == "eval"}
    others = [p for p in points(GRID) if p.label != chosen.selected]
    keys = {f"eval/tiny-bert-{p.slug}-seed0/1of1": p for p in others}
    assert set(evals) == {"eval/tiny-bert-seed0/1of1", *keys}
    for key in keys:
        argv = evals[key].argv
        assert argv[argv.index("--results") + 1] == str(swept.out / "sensitivity")
        assert "--sweep" not in argv and not evals[key].done
    assert "--sweep" in evals["eval/tiny-bert-seed0/1of1"].argv
    assert evals["eval/tiny-bert-seed0/1of1"].done


# ------------------------------------------------------------------ records and conditions


def test_a_selected_row_is_its_sweep_never_a_fixed_recipe(swept):
    chosen = selection.read_selection(swept.out / "sweeps" / "tiny-bert.json")
    folder = chosen.point(chosen.selected)["folders"]["0"]
    told = selection.eval_record(swept.out / "sweeps" / "tiny-bert.json", folder)
    fixed = EvalCard(model=EvalModel(recipe_sha256="a" * 64))
    swept_card = EvalCard(model=EvalModel(recipe_sha256="a" * 64, sweep=told))
    assert Conditions.from_card(swept_card)["recipe"] == f"sweep:{chosen.sha256[:12]}"
    assert "recipe" in Conditions.from_card(fixed).differences(Conditions.from_card(swept_card))


def test_eval_sweep_refuses_a_model_the_sweep_did_not_make(swept, minilm):
    with pytest.raises(NeobenchError, match="is none of the sweep's fine-tunes"):
        selection.eval_record(swept.out / "sweeps" / "tiny-bert.json", str(minilm))
    with pytest.raises(NeobenchError, match="not a sweep selection record"):
        selection.read_selection(swept.path)


# ------------------------------------------------------------- the tiny sweep, through Slurm


@pytest.mark.slurm
def test_tiny_sweep_on_slurm(capsys, swept, slurm_cluster, monkeypatch, tmp_path):
    """Submitted with --wait, after a canary: the two fine-tunes, then (once they ended) the
    selected point's eval and the table; the same choice and scores as the local run; a second
    run submits nothing."""
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    out = tmp_path / "out"
    code, text = run(capsys, "study", "run", swept.path, "--output", out, "--launcher", "slurm",
                     "--wait", "--canary")  # fmt: skip
    assert code == 0, text
    # The canary first (a short fine-tune per model: a sweep has no eval before its choice),
    # submitted and waited for like the real jobs; the study after it.
    assert "canary: 1 short job(s) first" in text and "canary: passed in" in text
    assert "canary/finetune/tiny-bert" in text and ": submitted as Slurm job" in text
    assert text.index("canary: passed in") < text.index("2 job(s) submitted")
    assert (out / "canary" / "finetune").is_dir()  # its output kept apart from the study's
    assert "2 job(s) submitted" in text and "2 more job(s) submitted" in text
    assert text.index("2 job(s) submitted") < text.index("eval/tiny-bert-seed0/1of1: submitted")
    chosen = check_swept(out)
    assert chosen.selected == selection.read_selection(swept.out / "sweeps/tiny-bert.json").selected
    assert scores(out) == pytest.approx(scores(swept.out), abs=1e-6)
    code, text = run(capsys, "study", "run", swept.path, "--output", out, "--launcher", "slurm")
    assert code == 0 and "0 job(s) submitted" in text
    squeue_empty(slurm_cluster.env)
