"""`neobench publish`: the results repository's layout that mteb reads back with equal scores, the
model card's front matter read back by huggingface_hub, `--submit` as a branch of a local
repository shaped like the results repository, refusals before anything is written, and
`--verify` re-running published tasks. The runs are the frozen golden ones (conftest.py), their
fine-tune's folder rebuilt from its frozen card."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import GOLDEN

from neobench.cli.main import main

FOLDER = "lab__minilm-ft"


def run(capsys, *argv) -> tuple[int, str]:
    code = main(["publish", *map(str, argv)])
    captured = capsys.readouterr()
    text = " ".join((captured.out + captured.err).split())
    assert "Traceback" not in text
    return code, text


@pytest.fixture(scope="module")
def golden(tmp_path_factory, minilm) -> Path:
    """The golden results root under a new folder (its cards' /golden paths pointed there), and
    the fine-tuned MiniLM's folder they name: the packaged model's files with the frozen card."""
    from neobench.core.cards import FINETUNE_CARD

    root = tmp_path_factory.mktemp("golden")
    shutil.copytree(GOLDEN / "runs", root / "runs")
    for path in (root / "runs").rglob("*"):
        if path.suffix in (".json", ".yaml", ".jsonl") and path.is_file():
            path.write_text(path.read_text().replace("/golden", str(root)))
    tuned = root / "models" / "minilm-ft"
    shutil.copytree(minilm, tuned)
    card = (GOLDEN / "finetune-card.yaml").read_text().replace("/golden", str(root))
    (tuned / FINETUNE_CARD).write_text(card)
    return root


@pytest.fixture(scope="module")
def published(golden) -> Path:
    out = golden / "out"
    code = main(["publish", "--results", str(golden / "runs"), "--model", "golden/MiniLM-ft",
                 "--name", "lab/minilm-ft", "--out", str(out)])  # fmt: skip
    assert code == 0
    return out


def test_mteb_reads_the_published_folder_with_the_same_scores(golden, published):
    import mteb
    from mteb.results import TaskResult

    from neobench.core.results import run_folders, task_files

    [folder] = [f for f in run_folders(golden / "runs") if "golden__MiniLM-ft" in f.parts]
    original = task_files(folder)
    loaded = mteb.ResultCache(published).load_results(load_experiments="match_name")
    [model] = loaded.model_results
    assert model.model_name == "lab/minilm-ft"
    scores = {t.task_name: t.get_score() for t in model.task_results}
    assert scores == {p.stem: TaskResult.from_disk(p).get_score() for p in original}
    [meta_file] = published.rglob("model_meta.json")
    meta = json.loads(meta_file.read_text())
    assert meta["name"] == "lab/minilm-ft" and meta["revision"] == meta_file.parts[-4]
    from safetensors.torch import load_file

    weights = load_file(golden / "models/minilm-ft/model.safetensors")  # the folder's own
    assert meta["n_parameters"] == sum(w.numel() for w in weights.values())
    assert meta["memory_usage_mb"] == round(meta["n_parameters"] * 4 / 2**20, 1)
    assert meta["release_date"] and meta["embed_dim"] == 384 and meta["max_tokens"] == 128
    assert meta["training_datasets"] and "STSBenchmark" in meta["training_datasets"]
    assert (
        meta["public_training_code"].startswith("neobench ")
        and "neobert-mteb-2k" in (meta["public_training_code"])
    )
    assert set(meta["framework"]) >= {"Sentence Transformers", "PyTorch"}


def test_the_card_reads_back_with_its_model_index(published):
    from huggingface_hub import ModelCard

    card = ModelCard.load(published / "README.md")
    data = card.data
    assert data.library_name == "sentence-transformers" and "mteb" in data.tags
    assert data.model_name == "lab/minilm-ft"
    tasks = {r.dataset_name.split(" (")[0]: r for r in data.eval_results}
    assert set(tasks) == {"BIOSSES", "STS16", "SummEval", "AmazonCounterfactualClassification"}
    assert all(0 < r.metric_value < 1 and r.source_name == "MTEB" for r in tasks.values())
    body = card.text
    for part in (
        "## Recipe: neobert-mteb-2k",
        "| max_steps | 4 |",
        "## Reproduce",
        "neobench finetune --model",
        "neobench eval --model",
        "## Versions",
        "±",
    ):
        assert part in body, part  # fmt: skip


def test_seed_replicates_publish_every_revision(golden, tmp_path, capsys):
    code, text = run(capsys, "--results", golden / "runs", "--model", "golden/tiny-bert",
                     "--name", "lab/tiny-bert", "--out", tmp_path / "out")  # fmt: skip
    assert code == 0 and "8 result file(s) of 2 revision(s) of lab/tiny-bert" in text
    revisions = {p.parts[-4] for p in (tmp_path / "out").rglob("BIOSSES.json")}
    assert len(revisions) == 2 and "the card of seed" in text
    # The card says what its table holds: the seeds' mean and sd, the two-level bootstrap's ±.
    about, rows = card_prose(tmp_path / "out")
    assert "This folder is seed 0 of seeds 0, 1 (the seed whose average is the median)" in about
    assert "each the mean over the 2 seeds, with the seeds' standard deviation (sd)" in about
    assert "two-level bootstrap over the seeds and each task's test items" in about
    assert all("±" in row and " sd " in row for row in rows)


def card_prose(out: Path) -> tuple[str, list[str]]:
    """(the card's paragraph on what its scores are, the rows of its table)."""
    body = (out / "README.md").read_text()
    [about] = [line for line in body.splitlines() if "The scores below" in line]
    rows = [line for line in body.splitlines() if line.startswith("| golden/")]
    return about, rows


def test_a_single_seed_card_speaks_of_one_seed(published):
    about, rows = card_prose(published)
    assert "This folder is the fine-tune with seed 0 (one seed)" in about
    assert "the 95% bootstrap interval (±) over each task's test items" in about
    assert "seeds" not in about and "(sd)" not in about
    assert rows and all("±" in row for row in rows)


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def results_clone(tmp_path) -> tuple[Path, Path]:
    """(a bare repository shaped like embeddings-benchmark/results, a clone of it)."""
    seed = tmp_path / "seed"
    (seed / "results" / "other__model" / "abc").mkdir(parents=True)
    (seed / "results" / "other__model" / "abc" / "BIOSSES.json").write_text("{}\n")
    (seed / "README.md").write_text("results\n")
    git("init", "-q", "-b", "main", cwd=seed)
    git("-c", "user.name=t", "-c", "user.email=t@t", "add", ".", cwd=seed)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "seed", cwd=seed)
    origin = tmp_path / "origin.git"
    git("clone", "-q", "--bare", str(seed), str(origin), cwd=tmp_path)
    clone = tmp_path / "clone"
    git("clone", "-q", str(origin), str(clone), cwd=tmp_path)
    git("config", "user.name", "t", cwd=clone)
    git("config", "user.email", "t@t", cwd=clone)
    return origin, clone


def test_submit_makes_a_branch_of_the_results_clone(golden, results_clone, tmp_path, capsys):
    origin, clone = results_clone
    code, text = run(capsys, "--results", golden / "runs", "--model", "golden/MiniLM-ft",
                     "--name", "lab/minilm-ft", "--out", tmp_path / "out", "--submit", clone,
                     "--results-remote", origin)  # fmt: skip
    branch = git("branch", "--show-current", cwd=clone)
    assert branch.startswith("mteb-results-")
    assert code == 0 and f"submit: 4 result file(s) committed to branch {branch}" in text
    added = git("show", "--name-only", "--format=%s", "HEAD", cwd=clone).splitlines()
    assert added[0].startswith("Add MTEB results of lab/minilm-ft")
    assert {Path(p).name for p in added[1:] if p} >= {"BIOSSES.json", "model_meta.json"}
    assert all(p.startswith(f"results/{FOLDER}/") for p in added[1:] if p)
    assert git("status", "--porcelain", cwd=clone) == ""


def test_refusals_come_before_anything_is_written(golden, results_clone, tmp_path, capsys,
                                                 monkeypatch):  # fmt: skip
    from huggingface_hub import constants

    origin, clone = results_clone
    out = tmp_path / "out"
    base = ["--results", golden / "runs", "--model", "golden/MiniLM-ft", "--name",
            "lab/minilm-ft", "--out", out]  # fmt: skip
    cases = [
        (["--submit", tmp_path], "not a git repository"),
        (["--submit", clone], f"its origin is {origin}, not the results repository"),
        (["--push-to-hub", "lab/minilm-ft"], "HF_HUB_OFFLINE is set"),
        (["--name", "minilm-ft"], "files a model by its hub id, org/name"),
        (["--push-to-hub", "lab/minilm|ft"], "--push-to-hub 'lab/minilm|ft': not a hub repo id"),
    ]
    for extra, said in cases:
        code, text = run(capsys, *base, *extra)
        assert code == 2 and said in text, (extra, text)
        assert not out.exists()
    # A clone of the real repository, offline: its origin cannot be fetched.
    from neobench.publishing.results import RESULTS_REMOTE

    git("remote", "set-url", "origin", RESULTS_REMOTE, cwd=clone)
    code, text = run(capsys, *base, "--submit", clone)
    assert code == 2 and f"its origin {RESULTS_REMOTE} cannot be reached" in text
    assert not out.exists() and git("branch", "--show-current", cwd=clone) == "main"
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    code, text = run(capsys, *base, "--push-to-hub", "lab/minilm-ft")
    assert code == 2 and "no Hugging Face token" in text and not out.exists()
    out.mkdir()
    (out / "x").write_text("kept")
    code, text = run(capsys, *base)
    assert code == 2 and "exists and is not empty" in text and (out / "x").read_text() == "kept"


def test_a_changed_score_is_not_published(golden, tmp_path, capsys):
    root = tmp_path / "runs"
    shutil.copytree(golden / "runs", root)
    [path] = root.rglob("golden__MiniLM-ft/**/BIOSSES.json")
    data = json.loads(path.read_text())
    data["scores"]["test"][0]["main_score"] = 0.99
    path.write_text(json.dumps(data))
    code, text = run(capsys, "--results", root, "--model", "golden/MiniLM-ft", "--name",
                     "lab/minilm-ft", "--out", tmp_path / "out")  # fmt: skip
    assert code == 2 and "cannot be published as they are" in text and "BIOSSES" in text
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_verify_reruns_published_tasks_within_the_maintainers_tolerance(
    minilm, mirror, tmp_path, capsys
):
    results = tmp_path / "runs"
    assert main(["eval", "--model", str(minilm), "--model-name", "lab/minilm", "--tasks",
                 "BIOSSES,STS16", "--results", str(results), "--data-dir", str(mirror),
                 "--no-cache"]) == 0  # fmt: skip
    capsys.readouterr()
    code, text = run(capsys, "--results", results, "--model", "lab/minilm", "--out",
                     tmp_path / "out", "--verify", "2", "--data-dir", mirror)  # fmt: skip
    assert code == 0, text
    assert text.count("within 0.001)") == 2 and "verify: 2 of 2 task(s) within 0.001" in text
    assert "verify BIOSSES: published 0." in text and "verify STS16: published 0." in text


def test_names_the_hub_refuses_are_refused_before_anything_is_written(golden, tmp_path, capsys):
    out = tmp_path / "out"
    for name in ("org/", "lab/módel", "lab/mini|lm", "lab/minilm--ft"):
        code, text = run(capsys, "--results", golden / "runs", "--model", "golden/MiniLM-ft",
                         "--name", name, "--out", out)  # fmt: skip
        assert code == 2 and f"--name {name!r}: the results repository files a model" in text
        assert "(huggingface_hub: " in text and "Pass --name org/name" in text, text
        assert not out.exists() and not list(tmp_path.iterdir())


def golden_elsewhere(root: Path) -> Path:
    """The golden results root under ``root``, its cards' /golden paths pointed there, where no
    model folder was made: the fine-tuned MiniLM's folder its run card records is not there."""
    shutil.copytree(GOLDEN / "runs", root / "runs")
    for path in (root / "runs").rglob("*"):
        if path.suffix in (".json", ".yaml", ".jsonl") and path.is_file():
            path.write_text(path.read_text().replace("/golden", str(root)))
    return root / "runs"


def test_verify_needs_are_checked_before_anything_is_written(golden, tmp_path, capsys):
    runs = golden_elsewhere(tmp_path / "moved")
    out = tmp_path / "out"
    code, text = run(capsys, "--results", runs, "--model", "golden/MiniLM-ft", "--name",
                     "lab/minilm-ft", "--out", out, "--verify", "1")  # fmt: skip
    folder = tmp_path / "moved" / "models" / "minilm-ft"
    assert code == 2 and not out.exists(), text
    assert (
        f"--verify 1: the model folder {folder} that the run card of golden/MiniLM-ft seed 0 "
        "records (" in text
    )
    assert "run-20261127T111258Z-shard1of1-6430.yaml) is not on this machine" in text
    assert "restore it there, or publish without --verify" in text and "wrote" not in text
    # The model folder is there (the golden fixture's), the data is not.
    base = ["--results", golden / "runs", "--model", "golden/MiniLM-ft", "--name",
            "lab/minilm-ft", "--out", out, "--verify", "1"]  # fmt: skip
    (tmp_path / "empty").mkdir()
    code, text = run(capsys, *base, "--data-dir", tmp_path / "empty")
    assert code == 2 and not out.exists(), text
    assert "which is not in the mirror" in text and "(--data-dir)" in text
    assert "neobench data prefetch" in text and "publish without --verify" in text
    code, text = run(capsys, *base, "--data-dir", tmp_path / "nowhere")
    assert code == 2 and not out.exists(), text
    assert f"the mirror {tmp_path / 'nowhere'} (--data-dir) is not a folder here" in text


def test_out_on_a_read_only_file_system(golden, tmpfs, capsys):
    read_only = tmpfs("ro", read_only=True)
    base = ["--results", golden / "runs", "--model", "golden/MiniLM-ft", "--name",
            "lab/minilm-ft"]  # fmt: skip
    for out in (read_only / "pub", read_only):  # a new folder under it, and it (empty) itself
        code, text = run(capsys, *base, "--out", out)
        assert code == 2, text
        assert f"--out {out}: {read_only} cannot be written (read-only file system)" in text
        assert "Pass a new folder you can write" in text and ".pub-" not in text


def test_submit_to_a_read_only_clone(golden, results_clone, tmpfs, tmp_path, capsys):
    origin, _ = results_clone
    disk = tmpfs("disk", size_kb=1024)
    clone = disk / "clone"
    git("clone", "-q", str(origin), str(clone), cwd=tmp_path)
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    out = tmp_path / "out"
    code, text = run(capsys, "--results", golden / "runs", "--model", "golden/MiniLM-ft",
                     "--name", "lab/minilm-ft", "--out", out, "--submit", clone,
                     "--results-remote", origin)  # fmt: skip
    assert code == 2 and not out.exists(), text
    assert f"--submit {clone}: {clone} cannot be written (read-only file system)" in text


@pytest.fixture(scope="module")
def without_units(tmp_path_factory, minilm, mirror) -> Path:
    """A results root holding MiniLM evaluated on BIOSSES with --no-predictions (no per-item
    units, so no intervals), under a model name the hub refuses."""
    root = tmp_path_factory.mktemp("no-predictions") / "runs"
    assert main(["eval", "--model", str(minilm), "--model-name", "t/mini|lm", "--tasks",
                 "BIOSSES", "--results", str(root), "--data-dir", str(mirror), "--no-cache",
                 "--no-predictions"]) == 0  # fmt: skip
    return root


@pytest.mark.slow
def test_a_run_without_units_publishes_a_card_without_intervals(without_units, tmp_path, capsys):
    capsys.readouterr()
    out = tmp_path / "out"
    # Its own name is the default --name: refused as the hub would.
    code, text = run(capsys, "--results", without_units, "--model", "t/mini|lm", "--out", out)
    assert code == 2 and not out.exists(), text
    assert "--name not given, and the run's name 't/mini|lm': the results repository" in text
    assert "(huggingface_hub: " in text and "Pass --name org/name" in text
    code, text = run(capsys, "--results", without_units, "--model", "t/mini|lm", "--name",
                     "lab/mini-lm", "--out", out)  # fmt: skip
    assert code == 0, text
    body = (out / "README.md").read_text()
    [about] = [line for line in body.splitlines() if "The scores below" in line]
    assert "without intervals: the run kept no per-item scores to resample" in about
    assert "bootstrap" not in about and "seed" not in about
    [row] = [line for line in body.splitlines() if line.startswith("| t/mini")]
    assert "±" not in row and "±" not in body


def test_publish_is_a_library_function(golden, tmp_path):
    """`nb.publish` does what the CLI does and returns what happened; the CLI prints its lines."""
    import neobench as nb

    out = tmp_path / "api"
    done = nb.publish(golden / "runs", "golden/MiniLM-ft", out, name="lab/minilm-ft")
    assert done.out == out and done.ok and not done.verified
    assert done.written and done.read_back == len(done.written)
    assert all(path.is_file() and out in path.parents for path in done.written)
    assert (out / "README.md").is_file()
    assert done.lines()[0].startswith(f"wrote {out}: {len(done.written)} result file(s)")
    with pytest.raises(nb.NeobenchError, match="exists and is not empty"):
        nb.publish(golden / "runs", "golden/MiniLM-ft", out)
    with pytest.raises(nb.NeobenchError, match="Did you mean 'verify'"):
        nb.publish(golden / "runs", "golden/MiniLM-ft", tmp_path / "other", verfy=1)


def test_mteb_s_eval_results_go_only_to_the_repo_the_results_are_filed_under(golden):
    """mteb's push_eval_results uploads to the results' model name: another --push-to-hub repo,
    or results under experiments/, is said, not pushed elsewhere."""
    from neobench.publishing import card, results

    pub = results.prepare(golden / "runs", "golden/MiniLM-ft", "lab/minilm-ft", "MTEB(eng, v1)",
                          True)  # fmt: skip
    why = card.eval_results_problem(pub, "lab/other")
    assert why == "the results are filed under lab/minilm-ft, not lab/other (give --name lab/other)"
    # The golden runs were evaluated under the paper's instructions (experiments/).
    assert pub.pointed.meta.experiment_kwargs
    found = card.eval_results_problem(pub, "lab/minilm-ft")
    assert found == "the run was evaluated under other conditions than mteb's plain ones"
