import pytest

from neobench.core.errors import NeobenchError
from neobench.protocol.tasks import load_benchmark, parse_shard, select_tasks, shard


@pytest.fixture(scope="module")
def v1():
    return load_benchmark("MTEB(eng, v1)")


def test_v1_has_56_tasks_of_7_types_with_mteb_filters(v1):
    tasks = select_tasks(v1)
    assert len(tasks) == 56
    assert len({t.metadata.type for t in tasks}) == 7
    by_name = {t.metadata.name: t for t in tasks}
    assert by_name["MSMARCO"].eval_splits == ["dev"]
    assert by_name["AmazonCounterfactualClassification"].hf_subsets == ["en"]
    assert len(by_name["CQADupstackRetrieval"].tasks) == 12


def test_filters_keep_benchmark_order(v1):
    tasks = select_tasks(v1, tasks=["STSBenchmark", "BIOSSES"], types=["STS"])
    assert [t.metadata.name for t in tasks] == ["BIOSSES", "STSBenchmark"]


def test_unknown_names_are_all_reported_with_suggestions(v1):
    with pytest.raises(NeobenchError) as error:
        select_tasks(v1, tasks=["STSBenchmak", "SciFact"], types=["Retreival"])
    problems = error.value.problems
    assert len(problems) == 2
    assert "Did you mean 'STSBenchmark'" in problems[0]
    assert "Did you mean 'Retrieval'" in problems[1]


def test_unknown_benchmark():
    with pytest.raises(NeobenchError, match="Unknown benchmark"):
        load_benchmark("MTEB(eng, v9)")


@pytest.mark.parametrize("text", ["3/2", "0/2", "1/0", "x", "1-2"])
def test_bad_shards(text):
    with pytest.raises(NeobenchError, match="--shard"):
        parse_shard(text)


def test_shards_partition_the_benchmark_deterministically(v1):
    tasks = select_tasks(v1)
    shards = [[t.metadata.name for t in shard(tasks, k, 4)] for k in range(1, 5)]
    flat = [name for s in shards for name in s]
    assert sorted(flat) == sorted(t.metadata.name for t in tasks)  # complete, no overlap
    assert shards == [[t.metadata.name for t in shard(select_tasks(v1), k, 4)] for k in range(1, 5)]
    assert all(s for s in shards)
    assert shard(tasks, 1, 1) == tasks


def test_a_task_type_given_as_a_task_is_pointed_at_types(v1, tiny_bert, tmp_path, capsys):
    from neobench.cli.main import main

    code = main(["eval", "--model", str(tiny_bert), "--tasks", "STS,STSBenchmak",
                 "--results", str(tmp_path / "r")])  # fmt: skip
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "STS is a task type, not a task: use --types STS" in err
    assert "Did you mean 'STSBenchmark'" in err  # a typo keeps its suggestion
    assert not (tmp_path / "r").exists()
    # compare has no --types: the type's tasks are named instead
    with pytest.raises(NeobenchError) as error:
        select_tasks(v1, tasks=["sts"])
    [problem] = error.value.problems
    assert problem.startswith("sts is a task type, not a task: name its tasks instead (BIOSSES")
    assert "--types" not in problem
