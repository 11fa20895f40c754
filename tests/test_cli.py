"""The CLI: every bad input ends in one clear message, exit code 2, and no result written."""

import subprocess
import sys

import pytest

from neobench.cli import main


def run(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, " ".join((captured.out + captured.err).split())  # undo rich's line wrapping


@pytest.fixture
def eval_args(minilm, one_repo_mirror, tmp_path):
    return [
        "eval",
        "--model",
        str(minilm),
        "--data-dir",
        str(one_repo_mirror),
        "--results",
        str(tmp_path / "res"),
        "--tasks",
        "BIOSSES",
    ]


def assert_nothing_written(tmp_path):
    assert not list((tmp_path / "res").rglob("*.json"))


def test_unknown_task_suggests(capsys, eval_args, tmp_path):
    code, text = run(capsys, *eval_args[:-1], "STSBenchmak")
    assert (
        code == 2 and "Unknown task 'STSBenchmak'" in text and "Did you mean 'STSBenchmark'" in text
    )
    assert_nothing_written(tmp_path)


def test_unknown_type(capsys, eval_args):
    code, text = run(capsys, *eval_args, "--types", "Retreival")
    assert code == 2 and "Unknown task type 'Retreival'" in text and "'Retrieval'" in text


def test_unknown_instruction_profile(capsys, eval_args):
    code, text = run(capsys, *eval_args, "--instructions", "paper-v2")
    assert code == 2 and "Unknown instruction profile 'paper-v2'" in text and "'paper'" in text


def test_missing_model_path(capsys, eval_args, tmp_path):
    args = list(eval_args)
    args[2] = str(tmp_path / "no-such-model")
    code, text = run(capsys, *args)
    assert code == 2 and "no such folder" in text


def test_causal_lm_folder(capsys, eval_args, tiny_gpt2, tmp_path):
    args = list(eval_args)
    args[2] = str(tiny_gpt2)
    code, text = run(capsys, *args)
    assert code == 2 and "'gpt2'" in text and "not a bidirectional encoder" in text
    assert_nothing_written(tmp_path)


def test_mirror_missing_a_task(capsys, eval_args, one_repo_mirror, tmp_path):
    code, text = run(capsys, *eval_args[:-1], "BIOSSES,STS12")
    assert code == 2
    assert "Task STS12 needs dataset repo 'mteb/sts12-sts'" in text
    assert (
        f'neobench data prefetch --benchmark "MTEB(eng, v1)" --tasks STS12 --out {one_repo_mirror}'
        in text
    )
    assert_nothing_written(tmp_path)


def test_shard_out_of_range(capsys, eval_args):
    code, text = run(capsys, *eval_args, "--shard", "3/2")
    assert code == 2 and "--shard 3/2" in text and "between 1 and N" in text


def test_all_config_problems_are_reported_at_once(capsys, eval_args):
    code, text = run(
        capsys,
        *eval_args[:-1],
        "STSBenchmak",
        "--types",
        "STSS",
        "--instructions",
        "papr",
        "--shard",
        "0/2",
        "--batch-size",
        "0",
    )
    assert code == 2
    for needle in ("'STSBenchmark'", "'STS'", "'paper'", "--shard 0/2", "--batch-size 0"):
        assert needle in text


def test_offline_without_mirror_names_the_repo_and_the_fix(capsys, minilm, tmp_path):
    code, text = run(
        capsys,
        "eval",
        "--model",
        str(minilm),
        "--tasks",
        "SciFact",
        "--results",
        str(tmp_path / "res"),
    )
    assert code == 2
    assert "'mteb/scifact'" in text and "HF_HUB_OFFLINE is set" in text and "data prefetch" in text


def test_data_dir_that_does_not_exist(capsys, eval_args, tmp_path):
    args = list(eval_args)
    args[args.index("--data-dir") + 1] = str(tmp_path / "nowhere")
    code, text = run(capsys, *args)
    assert code == 2 and "no such folder" in text and "prefetch" in text


def test_prefetch_offline_fails_fast(capsys, tmp_path):
    code, text = run(capsys, "data", "prefetch", "--tasks", "BIOSSES", "--out", str(tmp_path / "m"))
    assert code == 2 and "needs the Hugging Face hub" in text


def test_verify_reports_present_missing_and_loadable(capsys, mirror):
    code, text = run(capsys, "data", "verify", str(mirror), "--tasks", "BIOSSES,STS12,STS17")
    assert code == 1  # STS17 is not in the sample mirror
    assert "2 ok" in text and "1 missing" in text and "--tasks STS17" in text


def test_validate_and_ls(capsys):
    assert run(capsys, "validate")[0] == 0
    code, text = run(capsys, "ls", "tasks", "--benchmark", "MTEB(eng, v2)")
    assert code == 0 and "41 tasks" in text
    code, text = run(capsys, "ls", "recipes")
    assert code == 0 and "neobert-mteb-2k" in text
    code, text = run(capsys, "ls", "datasets")
    assert code == 0 and "22 datasets" in text
    code, text = run(capsys, "ls", "keys")
    assert code == 0 and "learning_rate" in text and "authors-code" in text


@pytest.mark.parametrize(
    "command",
    [[], ["eval"], ["data"], ["data", "prefetch"], ["data", "verify"], ["ls"], ["validate"]],
)
def test_every_subcommand_help_has_an_example(command, capsys):
    # In-process: the same parser as the entry point, without paying the import of torch and
    # transformers once per command (tested once below through the real entry point).
    with pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0 and "example" in out and "neobench " in out


def test_the_entry_point_runs():
    out = subprocess.run(
        [sys.executable, "-m", "neobench", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "example" in out and "neobench " in out


def test_missing_aggregate_points_prefetch_at_the_benchmark_task(capsys, eval_args):
    code, text = run(capsys, *eval_args[:-1], "CQADupstackRetrieval")
    assert code == 2
    assert "Task CQADupstackGamingRetrieval needs dataset repo 'mteb/cqadupstack-gaming'" in text
    assert "--tasks CQADupstackRetrieval --out" in text
