"""The CLI: every bad input ends in one clear message, exit code 2, and no result written."""

import subprocess
import sys

import pytest

from neobench.cli.main import main


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
    [
        [],
        ["eval"],
        ["data"],
        ["data", "prefetch"],
        ["data", "verify"],
        ["data", "check"],
        ["ls"],
        ["validate"],
    ],
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


# ---------------------------------------------------------------------------------------------
# The parser is built from the config dataclasses; output reads well in a terminal and in a log.


@pytest.mark.parametrize("command, cls", [("eval", "EvalConfig"), ("finetune", "FinetuneConfig")])
def test_help_names_every_config_field_with_its_default(command, cls, capsys):
    import dataclasses

    from neobench.protocol import config

    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())  # undo argparse's line wrapping
    for f in dataclasses.fields(getattr(config, cls)):
        if f.metadata.get("positional"):
            assert f.metadata["metavar"] in text
        else:
            assert "--" + f.name.replace("_", "-") in text
        assert " ".join(f.metadata["help"].split()[:3]) in text
    assert "--device DEVICE auto | cpu | cuda | cuda:N (default auto)" in text
    assert {"eval": "(default 32)", "finetune": "(default neobert-mteb-2k)"}[command] in text


def test_parsed_defaults_are_the_config_defaults():
    from neobench.cli.main import flags, parse_args
    from neobench.protocol import config

    args = parse_args(["eval", "--model", "m"])
    assert flags.config_from_args(config.EvalConfig, args) == config.EvalConfig(model="m")
    args = parse_args(["finetune", "--model", "m", "--output", "o", "max_steps=3"])
    parsed = flags.config_from_args(config.FinetuneConfig, args)
    assert parsed == config.FinetuneConfig(model="m", output="o", overrides=["max_steps=3"])
    args = parse_args(["eval", "--model", "m", "--tasks", "A, B", "--types", ""])
    parsed = flags.config_from_args(config.EvalConfig, args)
    assert parsed.tasks == ["A", "B"] and parsed.types == []  # given but empty: refused later


def test_a_new_field_becomes_a_flag(capsys):
    import argparse
    import dataclasses

    from neobench.cli import flags
    from neobench.protocol.config import opt

    @dataclasses.dataclass(kw_only=True)
    class Throwaway:
        name: str = opt(help="a required name")
        word: str = opt(help="what to do", positional=True, choices=("run", "stop"))
        count: int = opt(7, "how many")
        limit: int | None = opt(None, "at most this many")
        length: int | str = opt(512, "tokens, or 'model'")
        loud: bool = opt(False, "say more")
        names: list[str] | None = opt(None, "comma-separated names", csv=True)
        roots: list[str] = opt(["."], "repeat to combine")

    parser = argparse.ArgumentParser(prog="throwaway")
    flags.add_fields(parser, Throwaway)
    args = parser.parse_args(["run", "--name", "x", "--count", "3", "--loud", "--names", "a,b"])
    got = flags.config_from_args(Throwaway, args)
    assert got == Throwaway(name="x", word="run", count=3, loud=True, names=["a", "b"])
    args = parser.parse_args(["stop", "--name", "x", "--length", "model", "--roots", "r1"])
    args = parser.parse_args([*["stop", "--name", "x", "--length", "model"], "--roots", "r1"])
    got = flags.config_from_args(
        Throwaway, parser.parse_args(["stop", "--name", "x", "--names", ""])
    )
    assert got.names == [] and got.roots == ["."] and got.length == 512 and got.limit is None
    assert flags.config_from_args(Throwaway, args).roots == ["r1"]
    with pytest.raises(SystemExit):
        parser.parse_args(["run"])  # --name has no default: required
    with pytest.raises(SystemExit):
        parser.parse_args(["walk", "--name", "x"])  # not one of the positional's choices
    capsys.readouterr()
    text = " ".join(parser.format_help().split())
    assert "--count COUNT how many (default 7)" in text and "(default 512)" in text
    assert "--loud say more" in text and "repeat to combine (default .)" in text


def _neobench(*argv, tmp_path, **kwargs):
    """The real entry point with stdout and stderr redirected to files, as on a cluster."""
    out_file, err_file = tmp_path / "out.log", tmp_path / "err.log"
    with out_file.open("w") as stdout, err_file.open("w") as stderr:
        code = subprocess.run(
            [sys.executable, "-m", "neobench", *argv], stdout=stdout, stderr=stderr, **kwargs
        ).returncode
    return code, out_file.read_text(), err_file.read_text()


def test_ls_tasks_redirected_prints_whole_names(tmp_path):
    code, out, _ = _neobench("ls", "tasks", tmp_path=tmp_path)
    assert code == 0 and "…" not in out
    from neobench.protocol import listing

    names = {line.split()[0] for line in out.splitlines()[2:]}
    assert names == {row[0] for row in listing.tasks("MTEB(eng, v1)").rows}
    assert {"AmazonPolarityClassification", "CQADupstackRetrieval"} <= names
    assert "mteb/AmazonReviewsClassification" in out  # the last column too


def test_listings_are_the_library_records_the_cli_prints(capsys):
    from neobench.protocol import listing

    tasks = listing.tasks("MTEB(eng, v1)")
    assert tasks.title == "MTEB(eng, v1): 56 tasks" and len(tasks.rows) == 56
    assert all(len(row) == len(tasks.columns) for row in tasks.rows)
    keys = listing.keys("neobert-mteb-2k")
    assert "learning_rate" in [row[0] for row in keys.rows]
    assert main(["ls", "keys"]) == 0
    printed = capsys.readouterr().out
    assert all(row[0] in printed and row[-1] in printed for row in keys.rows)  # notes whole


def test_long_path_in_an_error_stays_on_one_line(tmp_path):
    deep = tmp_path.joinpath(*[f"a-rather-long-folder-name-{i}" for i in range(6)], "mirror")
    code, _, err = _neobench("data", "verify", str(deep), tmp_path=tmp_path)
    assert code == 2
    assert [line for line in err.splitlines() if str(deep) in line] == [
        f"error: {deep}: no such mirror folder."
    ]


def test_warnings_in_a_log_file_are_plain_whole_lines(tmp_path):
    path = "/" + "/".join(f"a-rather-long-folder-name-{i}" for i in range(6))
    script = (
        "import logging; from neobench.cli import main as cli; cli._quiet_libraries(False); "
        f"logging.getLogger('neobench.x').warning('nothing found in %s', {path!r})"
    )
    with (tmp_path / "err.log").open("w") as stderr:
        subprocess.run([sys.executable, "-c", script], stderr=stderr, check=True)
    assert (tmp_path / "err.log").read_text() == f"warning: nothing found in {path}\n"


def test_table_format_and_roots_are_library_functions(tmp_path):
    from neobench.core.errors import NeobenchError
    from neobench.report.render.table import output_format

    assert output_format(None, str(tmp_path / "t.tex"), None) == "latex"
    assert output_format("csv", None, None) == "csv" and output_format(None, None, None) == "rich"
    with pytest.raises(NeobenchError) as refused:
        output_format("mdd", str(tmp_path / "t"), str(tmp_path / "t.jpg"))
    text = " ".join(refused.value.problems)
    assert "'md'" in text and "*.png" in text  # every problem at once
