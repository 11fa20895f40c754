"""Bad input and broken state: one clear message, the right exit code, nothing lost.

Exit code 2: the input is wrong (nothing is written). Exit code 1: the run failed (finished
work is kept, no file that was whole is truncated, no temporary file is left). Each case was
first found by probing the real CLI as a new user would.
"""

import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from neobench.cli.main import main, parse_args


def run(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    text = " ".join((captured.out + captured.err).split())  # undo rich's line wrapping
    assert "Traceback" not in text
    return code, text


@pytest.fixture
def eval_args(tiny_bert, one_repo_mirror):
    return ["eval", "--model", tiny_bert, "--data-dir", one_repo_mirror, "--tasks", "BIOSSES"]


def files_under(folder) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def score(results) -> float:
    (path,) = results.rglob("BIOSSES.json")
    from mteb.results import TaskResult

    return TaskResult.from_disk(path).get_score()


# ------------------------------------------------------------------- eval: bad input, exit 2


@pytest.mark.parametrize("tasks", ["", ",", " , "])
def test_empty_task_list_is_refused_not_read_as_all(capsys, eval_args, tmp_path, tasks):
    code, text = run(capsys, *eval_args[:-1], tasks, "--results", tmp_path / "res")
    assert code == 2 and "--tasks: the list is empty" in text and "leave --tasks out" in text
    assert not (tmp_path / "res").exists()


def test_empty_type_list_is_refused(capsys, eval_args, tmp_path):
    code, text = run(capsys, *eval_args, "--types", "", "--results", tmp_path / "res")
    assert code == 2 and "--types: the list is empty" in text


@pytest.mark.parametrize("budget", ["0", "-1"])
def test_non_positive_token_budget_is_refused(capsys, eval_args, tmp_path, budget):
    code, text = run(capsys, *eval_args, "--token-budget", budget, "--results", tmp_path / "r")
    assert code == 2 and f"--token-budget {budget}: must be a positive number" in text
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("workers", ["0", "several"])
def test_bad_tokenize_workers_are_refused(capsys, eval_args, tmp_path, workers):
    code, text = run(capsys, *eval_args, "--tokenize-workers", workers, "--results", tmp_path / "r")
    assert code == 2 and f"--tokenize-workers {workers}: must be auto or a positive" in text
    assert not (tmp_path / "r").exists()


def test_profile_key_that_is_no_task_suggests_the_task(capsys, eval_args, tmp_path):
    profile = tmp_path / "typo.yaml"
    profile.write_text('instructions:\n  BIOSSESS: "typo"\n  STS12: "fine"\n')
    code, text = run(capsys, *eval_args, "--instructions", profile, "--results", tmp_path / "res")
    assert code == 2 and "Unknown mteb task 'BIOSSESS'" in text and "Did you mean 'BIOSSES'" in text
    assert "STS12" not in text  # a profile may leave tasks out; only wrong keys are reported
    assert not (tmp_path / "res").exists()


def test_malformed_instruction_yaml_names_file_and_line(capsys, eval_args, tmp_path):
    profile = tmp_path / "broken.yaml"
    profile.write_text('instructions:\n  BIOSSES: "unclosed\n  STS12: [\n')
    code, text = run(capsys, *eval_args, "--instructions", profile, "--results", tmp_path / "r")
    assert code == 2 and f"instruction profile file {profile}: invalid YAML at line" in text


def test_results_that_is_a_file(capsys, eval_args, tmp_path):
    (tmp_path / "taken").write_text("mine")
    code, text = run(capsys, *eval_args, "--results", tmp_path / "taken")
    assert code == 2 and "--results" in text and "is a file, not a folder" in text
    code, text = run(capsys, *eval_args, "--results", tmp_path / "taken" / "below")
    assert code == 2 and "is a file, so no folder can be made under it" in text
    assert (tmp_path / "taken").read_text() == "mine"


def test_results_on_a_read_only_file_system(capsys, eval_args, tmpfs):
    read_only = tmpfs("ro", read_only=True)
    code, text = run(capsys, *eval_args, "--results", read_only / "eval")
    assert code == 2 and "cannot be written (read-only file system)" in text


def test_all_problems_reported_at_once(capsys, eval_args, tmp_path):
    (tmp_path / "taken").write_text("")
    code, text = run(
        capsys,
        *eval_args[:-1],
        ",",
        "--token-budget",
        "0",
        "--results",
        tmp_path / "taken",
    )
    assert code == 2 and text.count("error:") == 3


# ------------------------------------------------------------ eval: broken state in --results


def test_invalid_run_card_is_named_and_moving_it_aside_recovers(capsys, eval_args, tmp_path):
    res = tmp_path / "res"
    assert run(capsys, *eval_args, "--results", res)[0] == 0
    expected = score(res)
    (card,) = res.rglob("run-*.yaml")
    card.write_text(card.read_text() + "status: [unclosed\n")
    (res.rglob("BIOSSES.json").__next__()).unlink()
    code, text = run(capsys, *eval_args, "--results", res)
    assert code == 2 and f"run card file {card}: invalid YAML at line" in text
    assert "move it out of that folder" in text
    card.rename(tmp_path / card.name)
    assert run(capsys, *eval_args, "--results", res)[0] == 0
    assert score(res) == expected


def test_a_killed_run_is_marked_interrupted_by_the_next(capsys, caplog, eval_args, tmp_path):
    res = tmp_path / "res"
    argv = [sys.executable, "-m", "neobench", *map(str, eval_args), "--results", str(res)]
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not list(res.rglob("run-*.yaml")) and time.monotonic() < deadline:
            assert child.poll() is None, "the run ended before it could be killed"
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    (card,) = res.rglob("run-*.yaml")
    assert yaml.safe_load(card.read_text())["status"] == "running"
    assert run(capsys, *eval_args, "--results", res)[0] == 0
    assert "no longer exists (killed or crashed); marked interrupted" in caplog.text
    killed = yaml.safe_load(card.read_text())
    assert killed["status"] == "interrupted"
    assert killed["interrupted"]["by"]["pid"] == os.getpid()


def fill(folder, leave_bytes: int) -> None:
    """Fill a tmpfs until the next write fails, then free ``leave_bytes``."""
    filler = folder / "filler"
    try:
        with filler.open("wb") as handle:
            while True:
                handle.write(b"\0" * 4096)
                handle.flush()
    except OSError:
        pass
    os.truncate(filler, max(0, filler.stat().st_size - leave_bytes))


def test_full_results_disk_keeps_every_file_whole(capsys, eval_args, tmp_path, tmpfs, mirror):
    reference = tmp_path / "reference"
    assert run(capsys, *eval_args, "--results", reference)[0] == 0
    disk = tmpfs("disk", size_kb=512)
    res = disk / "eval"
    sts = ["--model", eval_args[2], "--data-dir", mirror, "--results", res]
    assert run(capsys, "eval", *sts, "--tasks", "BIOSSES")[0] == 0
    (score_file,) = res.rglob("BIOSSES.json")
    score_file.unlink()  # to be re-run below, now on a full disk
    before = files_under(res)
    fill(disk, leave_bytes=3 * 4096)
    code, text = run(capsys, "eval", *sts, "--tasks", "BIOSSES,STS16")
    assert code == 1 and "the disk is full" in text and "Free space" in text
    after = files_under(res)
    for name, content in before.items():  # nothing truncated, run_settings.jsonl included
        assert after[name] == content, name
    assert not [n for n in after if n.endswith(".tmp") or ".neobench-staging" in n]
    assert not (res / ".neobench-staging").exists()
    for name in after:
        if "/neobench/run-" in name:
            assert yaml.safe_load(after[name])["status"] != "running" or name in before
    (disk / "filler").unlink()
    assert run(capsys, "eval", *sts, "--tasks", "BIOSSES")[0] == 0
    assert score(res) == score(reference)


# ------------------------------------------------------------------------- finetune inputs


def test_overrides_are_accepted_anywhere_after_finetune():
    args = parse_args(
        ["finetune", "max_steps=3", "--model", "M", "lr_schedule=linear", "--output", "O", "seed=1"]
    )
    assert args.overrides == ["max_steps=3", "lr_schedule=linear", "seed=1"]
    assert (args.model, args.output) == ("M", "O")


def test_unknown_flag_after_finetune_is_still_an_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        parse_args(["finetune", "--model", "M", "--output", "O", "--max-steps", "3"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "unrecognized arguments: --max-steps" in err


@pytest.mark.parametrize(
    ("alias", "key"), [("lr", "learning_rate"), ("bs", "batch_size"), ("steps", "max_steps")]
)
def test_common_aliases_get_did_you_mean(capsys, minilm, tmp_path, alias, key):
    out = tmp_path / "o"
    code, text = run(capsys, "finetune", "--model", minilm, "--output", out, f"{alias}=1")
    assert code == 2 and f"Unknown recipe key '{alias}'. Did you mean '{key}'?" in text
    assert not (tmp_path / "o").exists()


def test_empty_datasets_override_is_refused_before_any_folder(capsys, minilm, tmp_path):
    code, text = run(capsys, "finetune", "--model", minilm, "--output", tmp_path / "o", "datasets=")
    assert code == 2 and "override datasets=: names no dataset" in text
    assert not (tmp_path / "o").exists()


def test_output_that_is_a_file(capsys, minilm, tmp_path):
    (tmp_path / "o").write_text("mine")
    code, text = run(capsys, "finetune", "--model", minilm, "--output", tmp_path / "o")
    assert code == 2 and "--output" in text and "is a file, not a folder" in text
    assert (tmp_path / "o").read_text() == "mine"


def test_a_run_that_failed_before_any_checkpoint_can_be_started_again(tiny_bert, tmp_path):
    from test_finetune import TINY, config

    from neobench.core.errors import NeobenchError
    from neobench.train.finetune import finetune

    out = tmp_path / "out"
    small = [*TINY[:2], "datasets=SNLI", "batch_size=8", "checkpoint_every=100"]
    with pytest.raises(NeobenchError, match="became"):
        finetune(config(tiny_bert, out, *small, "max_steps=8", "learning_rate=1e30"))
    card = yaml.safe_load((out / "neobench_run_card.yaml").read_text())
    assert card["status"].startswith("stopped")
    assert not list(out.glob("checkpoints/checkpoint-*"))
    summary = finetune(config(tiny_bert, out, *small, "max_steps=2"))
    assert summary.steps == 2
    card = yaml.safe_load((out / "neobench_run_card.yaml").read_text())
    assert card["status"] == "complete"
    steps = [row["step"] for row in map(yaml.safe_load, (out / "neobench_loss_curve.jsonl").open())]
    assert steps == [1, 2]  # the failed run's curve was not appended to


def test_run_settings_written_by_a_concurrent_shard_are_kept(tiny_bert, mirror, tmp_path):
    """Another shard adds its entry to run_settings.jsonl while this task runs: both survive."""
    from mteb.results.task_result import _read_run_settings_from_file, _write_and_merge_keyed_json

    from neobench.evaluation.runner import EvalConfig, Reporter, run_eval

    res = tmp_path / "res"

    def cfg(task):
        return EvalConfig(
            model=str(tiny_bert), tasks=[task], data_dir=str(mirror), results=str(res),
            device="cpu", cache_dir=str(tmp_path / "cache"),
        )  # fmt: skip

    run_eval(cfg("BIOSSES"))
    (settings,) = res.rglob("run_settings.jsonl")

    class OtherShard(Reporter):
        def task_started(self, task):
            entry = {"task": "STS13", "splits": ["test"], "subsets": ["default"]}
            _write_and_merge_keyed_json(settings, [{**entry, "version": {}, "encode_kwargs": {}}])

    summary = run_eval(cfg("STS16"), OtherShard())
    assert [o.status for o in summary.outcomes] == ["evaluated"]
    tasks = {entry["task"] for entry in _read_run_settings_from_file(settings)}
    assert tasks == {"BIOSSES", "STS13", "STS16"}
    assert not list(res.rglob("*.tmp")) and not (res / ".neobench-staging").exists()
