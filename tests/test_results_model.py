"""The results folder as one model (neobench/core/results.py): a stored score that differs from
the run card that wrote it is never shown as a score, and a second benchmark's eval into the same
folder leaves the first benchmark's table and comparisons working."""

import json

import pytest
from conftest import read_json

from neobench.cli.main import main
from neobench.core import results

pytestmark = pytest.mark.slow

V2 = "MTEB(eng, v2)"


def evaluate(model, name, root, mirror, *extra) -> None:
    argv = ["eval", "--model", str(model), "--model-name", name, "--results", str(root),
            "--data-dir", str(mirror), "--max-seq-length", "128", *extra]  # fmt: skip
    assert main(argv) == 0, argv


@pytest.fixture(scope="module")
def two_models(tmp_path_factory, minilm, tiny_bert, mirror):
    """MiniLM and a tiny BERT on two MTEB(eng, v1) tasks, with units."""
    root = tmp_path_factory.mktemp("runs")
    for model, name in ((minilm, "t/MiniLM"), (tiny_bert, "t/tiny")):
        evaluate(model, name, root, mirror, "--tasks", "BIOSSES")
    return root


def test_a_changed_score_is_marked_named_and_refused(tmp_path, minilm, mirror, capsys):
    root = tmp_path / "runs"
    evaluate(minilm, "t/MiniLM", root, mirror, "--tasks", "BIOSSES", "--no-predictions")
    [folder] = results.run_folders(root)
    path = results.task_path(folder, "BIOSSES")
    data = read_json(path)
    recorded = data["scores"]["test"][0]["main_score"]
    data["scores"]["test"][0]["main_score"] = 0.99  # edited by hand
    path.write_text(json.dumps(data))
    capsys.readouterr()

    assert main(["table", "--results", str(root), "--per-task", "--format", "md"]) == 0
    shown = capsys.readouterr().out
    row = next(line for line in shown.splitlines() if line.startswith("| t/MiniLM"))
    assert "✗" in row and "99.0" not in row and f"{100 * recorded:.1f}" not in row
    assert str(path) in shown and "re-run the same `neobench eval`" in shown
    assert f"recorded {recorded:.6f}" in shown

    import neobench as nb

    runs = nb.load_runs(root)
    assert "BIOSSES" not in runs[0].scores and "BIOSSES" in runs[0].mismatched
    frame = nb.leaderboard(root).to_pandas()
    assert list(frame["changed_tasks"]) == [1]

    # compare names the file before anything else (its units are absent too)
    evaluate(minilm, "t/other", root, mirror, "--tasks", "BIOSSES")
    capsys.readouterr()
    assert main(["compare", "--results", str(root), "--baseline", "t/MiniLM"]) != 0
    said = capsys.readouterr().err
    assert "differ from their run cards" in said and str(path) in said


def test_a_second_benchmark_in_the_folder_keeps_both_usable(two_models, tiny_bert, mirror, capsys):
    """The tiny BERT makes the second benchmark's eval (STS12's 6,000 sentences): which model
    wrote a result does not matter to the folder, and the tiny one encodes them in seconds."""
    root = two_models
    import neobench as nb

    again = nb.evaluate(tiny_bert, model_name="t/tiny", results=root, data_dir=mirror,
                        max_seq_length="128", benchmark=V2, tasks=["BIOSSES", "STS12"])  # fmt: skip
    assert {o.task: o.status for o in again.outcomes} == {
        "BIOSSES": "cached",
        "STS12": "evaluated",
    }
    capsys.readouterr()
    # MTEB(eng, v1) as before (STS12, in both benchmarks, only t/tiny holds: left out here)
    compared = ["--tasks", "BIOSSES"]
    assert main(["compare", "--results", str(root), "--baseline", "t/MiniLM", *compared]) == 0
    capsys.readouterr()
    assert main(["table", "--results", str(root), "--strict", "--format", "json"]) == 0
    v1 = json.loads(capsys.readouterr().out)
    tiny_row = next(r for r in v1["rows"] if r["model"] == "t/tiny")
    assert tiny_row["columns"]["Avg."]["tasks"] == [1, 56]  # STS12 is not shared with t/MiniLM
    # MTEB(eng, v2): BIOSSES written by the v1 eval serves it, STS12 by the v2 one
    assert main(["table", "--results", str(root), "--benchmark", V2, "--per-task",
                 "--format", "json"]) == 0  # fmt: skip
    v2 = json.loads(capsys.readouterr().out)
    tiny_row = next(r for r in v2["rows"] if r["model"] == "t/tiny")
    assert tiny_row["columns"]["BIOSSES"]["score"] is not None
    assert tiny_row["columns"]["STS12"]["score"] is not None
    assert tiny_row["benchmark"].startswith("mixed")  # both cards wrote what v2 reads
