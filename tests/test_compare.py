"""neobench compare on results folders written through mteb's ResultCache, with per-item units
files whose values are known (no model needed)."""

import csv
import json

import mteb
import numpy as np
import pytest
from mteb.models.model_meta import ModelMeta
from mteb.results import TaskResult

from neobench.cli.main import main
from neobench.evaluation import units
from neobench.evaluation.units import Part, TaskUnits, TypeSpec
from neobench.report.compare import record_keys

TASKS = ["SciFact", "ArguAna", "NFCorpus"]


def _mean(data, idx, _main):
    return float(data["value"][idx].mean())


@pytest.fixture(autouse=True)
def _retrieval_as_mean(monkeypatch):
    # Retrieval units are per-query values whose mean is the main score (neobench/evaluation/units).
    monkeypatch.setattr(units, "registry", lambda: {"Retrieval": TypeSpec("query", None, _mean)})


def write_model(root, name, values_by_task, ids=None):
    """A model's results: mteb task files with the units' mean as main score, and units files."""
    meta = ModelMeta.create_empty(overwrites={"name": name, "revision": "r1"})
    cache = mteb.ResultCache(root)
    folder = None
    for task_name, values in values_by_task.items():
        task = mteb.get_task(task_name)
        score = float(np.mean(values))
        scores = {"test": {"default": {"main_score": score}}}
        cache.save_to_cache(TaskResult.from_task_results(task, scores, evaluation_time=0.0), meta)
        folder = cache.get_task_result_path(task_name, meta).parent
        part = Part("default", "test", ids or [f"q{i}" for i in range(len(values))], {
            "value": np.asarray(values)
        })  # fmt: skip
        found = TaskUnits(task_name, "Retrieval", "ndcg_at_10", "query", [part])
        path = units.path_for(folder, task_name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(units.to_json(found))
    return folder


@pytest.fixture()
def root(tmp_path):
    rng = np.random.default_rng(0)
    good = {t: rng.beta(5, 2, size=120) for t in TASKS}
    write_model(tmp_path, "org/base", good)
    write_model(tmp_path, "org/base-copy", {t: v.copy() for t, v in good.items()})
    worse = {t: np.clip(v - 0.08 + rng.normal(0, 0.03, v.size), 0, 1) for t, v in good.items()}
    write_model(tmp_path, "org/worse", worse)
    return tmp_path


def _compare(root, tmp_path, *extra):
    out = tmp_path / "out.json"
    code = main(["compare", "--results", str(root), "--baseline", "org/base", "--tasks",
                 ",".join(TASKS), "--resamples", "300", "--out", str(out), *extra])  # fmt: skip
    return code, (json.loads(out.read_text()) if out.exists() else None)


def test_a_copy_is_never_different_and_a_worse_model_is(root, tmp_path):
    code, found = _compare(root, tmp_path)
    assert code == 0
    assert (found["baseline"], found["resamples"], found["seed"], found["alpha"]) == (
        "org/base", 300, 0, 0.05,
    )  # fmt: skip
    rows = {(r["label"], r["task"]): r for r in found["rows"]}
    assert len(rows) == 2 * (len(TASKS) + 1)
    for task in [*TASKS, "Avg."]:
        same = rows[("org/base-copy", task)]
        assert (same["delta"], same["ci_low"], same["ci_high"], same["p"]) == (0, 0, 0, 1)
        assert same["significant"] is False
        worse = rows[("org/worse", task)]
        assert worse["delta"] < 0 and worse["ci_high"] < 0 and worse["significant"] is True
        assert worse["p"] <= worse["p_holm"] <= 1
        assert worse["score_ci_low"] < worse["score"] < worse["score_ci_high"]
    # The run in separate fields (no label to parse), the statistics, the conditions: the same
    # keys in every row.
    keys = ["label", "model", "revision", "experiment", "seeds", "task", "baseline_score", "score",
            "score_ci_low", "score_ci_high", "delta", "ci_low", "ci_high", "p", "p_holm",
            "significant", "in_domain", "seed_sd", "finetuned", "recipe_sha256", "instructions",
            "instructions_sha256", "max_seq_length", "dtype", "benchmark", "mteb"]  # fmt: skip
    assert all(list(row) == keys for row in found["rows"])
    first = found["rows"][0]
    assert first["in_domain"] is None  # these synthetic models declare no training
    assert (first["model"], first["seeds"], first["seed_sd"]) == ("org/base-copy", None, None)
    assert first["revision"] and first["finetuned"] is False and first["recipe_sha256"] is None
    assert found["baseline_fields"]["model"] == "org/base"


def test_csv_names_the_baseline_and_its_rows_carry_the_fields_of_the_json_rows(root, tmp_path):
    out = tmp_path / "out.csv"
    assert main(["compare", "--results", str(root), "--baseline", "org/base", "--tasks",
                 ",".join(TASKS), "--resamples", "100", "--out", str(out)]) == 0  # fmt: skip
    # "#" lines first, as the table's CSV has them: the first names the baseline.
    lines = out.read_text().splitlines()
    assert lines[0] == "# neobench compare: baseline org/base"
    rows = list(csv.DictReader(line for line in lines if not line.startswith("#")))
    assert all(list(row) == record_keys() for row in rows)
    worse = next(r for r in rows if r["model"] == "org/worse" and r["task"] == "Avg.")
    assert (worse["label"], worse["seeds"], worse["significant"]) == ("org/worse", "", "True")
    assert (worse["revision"], worse["finetuned"], worse["recipe_sha256"]) == ("r1", "False", "")
    assert worse["instructions"] == ""  # no run card here: not recorded is empty


def test_a_pipe_in_a_model_name_keeps_the_markdown_columns(tmp_path):
    rng = np.random.default_rng(5)
    write_model(tmp_path, "org/base", {t: rng.random(40) for t in TASKS})
    write_model(tmp_path, "org/a|b", {t: rng.random(40) for t in TASKS})
    compared, table = tmp_path / "c.md", tmp_path / "t.md"
    assert main(["compare", "--results", str(tmp_path), "--baseline", "org/base",
                 "--resamples", "100", "--out", str(compared)]) == 0  # fmt: skip
    assert main(["table", "--results", str(tmp_path), "--out", str(table)]) == 0
    for path in (compared, table):
        lines = [x for x in path.read_text().splitlines() if x.startswith("|")]
        header, rows = lines[0], [x for x in lines[2:] if "org/a" in x]
        assert rows and all("org/a\\|b" in x for x in rows)
        # as many cell borders as the header's: the escaped "|" is no border
        borders = header.count("|")
        assert all(x.replace("\\|", "").count("|") == borders for x in rows)


def test_same_inputs_and_seed_give_byte_identical_output(root, tmp_path):
    first = tmp_path / "a.md"
    second = tmp_path / "b.md"
    for out in (first, second):
        assert main(["compare", "--results", str(root), "--baseline", "org/base",
                     "--resamples", "200", "--out", str(out)]) == 0  # fmt: skip
    assert first.read_bytes() == second.read_bytes()
    assert "org/worse" in first.read_text() and "lower" in first.read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--baseline", "org/bsae"], "Did you mean 'org/base'"),
        (["--baseline", "org/base", "--resamples", "0"], "--resamples 0"),
        (["--baseline", "org/base", "--out", "x.txt"], "*.md, *.csv or *.json"),
    ],
)
def test_bad_inputs(root, tmp_path, capsys, args, message):
    assert main(["compare", "--results", str(root), *args]) == 2
    assert message in capsys.readouterr().err


def test_different_tasks_or_items_are_refused(tmp_path, capsys):
    rng = np.random.default_rng(1)
    write_model(tmp_path, "org/base", {t: rng.random(40) for t in TASKS})
    write_model(tmp_path, "org/fewer", {t: rng.random(40) for t in TASKS[:2]})
    assert main(["compare", "--results", str(tmp_path), "--baseline", "org/base"]) == 2
    assert "different tasks" in capsys.readouterr().err
    other = tmp_path / "other"
    write_model(other, "org/base", {"SciFact": rng.random(40)})
    write_model(other, "org/shifted", {"SciFact": rng.random(40)}, ids=[f"x{i}" for i in range(40)])
    assert main(["compare", "--results", str(other), "--baseline", "org/base"]) == 2
    assert "different items" in capsys.readouterr().err


def test_models_evaluated_under_different_conditions_are_refused(root, tmp_path, capsys):
    from neobench.core.card_io import write_card

    for name, length in (("org__base", 512), ("org__worse", 256)):
        folder = next(root.rglob(f"{name}/r1"))
        card = {"benchmark": "MTEB(eng, v1)", "conditions": {"max_seq_length": length}}
        write_card(folder / "neobench" / "run-1.yaml", card)
    code = main(["compare", "--results", str(root), "--baseline", "org/base",
                 "--models", "org/worse", "--tasks", ",".join(TASKS)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert "not evaluated under identical conditions" in err
    assert "org/worse vs org/base: max_seq_length 256 vs 512" in err


def test_results_without_units_are_named_with_the_fix(tmp_path, capsys):
    rng = np.random.default_rng(2)
    write_model(tmp_path, "org/base", {t: rng.random(40) for t in TASKS})
    folder = write_model(tmp_path, "org/other", {t: rng.random(40) for t in TASKS})
    units.path_for(folder, "NFCorpus").unlink()
    code = main(["compare", "--results", str(tmp_path), "--baseline", "org/base"])
    err = capsys.readouterr().err
    assert code == 2
    assert "org/other: no per-item predictions for NFCorpus" in err and "re-run" in err


def test_a_corrupt_result_file_is_named_not_taken_for_a_missing_task(tmp_path, capsys):
    rng = np.random.default_rng(3)
    write_model(tmp_path, "org/base", {t: rng.random(40) for t in TASKS})
    folder = write_model(tmp_path, "org/other", {t: rng.random(40) for t in TASKS})
    path = folder / "NFCorpus.json"
    path.write_text(path.read_text()[:50])  # truncated, as by a full disk or a killed copy
    code = main(["compare", "--results", str(tmp_path), "--baseline", "org/base"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2
    assert f"org/other: {path}: unreadable (" in err and "NFCorpus cannot be compared" in err
    assert "different tasks" not in err
    # Leaving the task out compares the rest.
    code = main(["compare", "--results", str(tmp_path), "--baseline", "org/base",
                 "--tasks", "SciFact,ArguAna"])  # fmt: skip
    assert code == 0


def test_table_ci_and_baseline_marks(root, tmp_path):
    out = tmp_path / "t.md"
    code = main(["table", "--results", str(root), "--ci", "--baseline", "org/base",
                 "--resamples", "300", "--out", str(out)])  # fmt: skip
    assert code == 0
    text = out.read_text()
    lines = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("|")}
    # Retrieval holds the 3 tasks (3/15): an interval on every computed row, ▼ on the worse one.
    assert "±" in lines["org/base"] and "±" in lines["org/worse"]
    assert "▼" in lines["org/worse"] and "▲" not in lines["org/worse"]
    assert "▼" not in lines["org/base-copy"] and "▲" not in lines["org/base-copy"]
    assert "± = half the width of the 95% bootstrap interval" in text
    assert "significantly above / below org/base" in text
    again = tmp_path / "t2.md"
    main(["table", "--results", str(root), "--ci", "--baseline", "org/base",
          "--resamples", "300", "--out", str(again)])  # fmt: skip
    assert again.read_bytes() == out.read_bytes()


def test_table_ci_without_predictions_is_refused(tmp_path, capsys):
    rng = np.random.default_rng(3)
    folder = write_model(tmp_path, "org/base", {"SciFact": rng.random(30)})
    units.path_for(folder, "SciFact").unlink()
    assert main(["table", "--results", str(tmp_path), "--ci"]) == 2
    err = capsys.readouterr().err
    assert "none of the results has per-item predictions" in err and "re-run" in err
    assert main(["table", "--results", str(tmp_path), "--ci", "--resamples", "0"]) == 2
    assert "--resamples 0" in capsys.readouterr().err


def test_table_ci_over_tasks_says_so(root, tmp_path):
    out = tmp_path / "t.md"
    code = main(["table", "--results", str(root), "--ci", "--over", "tasks", "--baseline",
                 "org/base", "--resamples", "300", "--out", str(out)])  # fmt: skip
    assert code == 0
    text = out.read_text()
    assert "'if the tasks were drawn again'" in text and "±" in text
    assert main(["table", "--results", str(root), "--ci", "--over", "models"]) == 2


def test_summeval_texts_one_model_dropped_are_left_out_with_a_note(tmp_path, monkeypatch):
    """mteb drops, per model, the SummEval texts whose summaries it scores all alike: the two
    are compared on the texts both kept, and the output says how many were left out."""
    spec = TypeSpec("text", None, _mean, rows=lambda *a: 100)
    monkeypatch.setattr(units, "registry", lambda: {"Summarization": spec})
    terms = np.random.default_rng(4).random(100)
    kept = [i for i in range(100) if i not in (5, 6)]
    for name, rows in (("org/base", range(100)), ("org/drops", kept), ("org/again", kept)):
        folder = write_model(tmp_path, name, {"SummEval": terms[list(rows)]})
        part = Part("default", "test", [str(i) for i in rows], {"value": terms[list(rows)]})
        part.rows = 100
        found = TaskUnits("SummEval", "Summarization", "cosine_spearman", "text", [part])
        units.path_for(folder, "SummEval").write_text(units.to_json(found))
    out = tmp_path / "out.json"
    assert main(["compare", "--results", str(tmp_path), "--baseline", "org/base", "--resamples",
                 "200", "--out", str(out)]) == 0  # fmt: skip
    found = json.loads(out.read_text())
    rows = {(r["model"], r["task"]): r for r in found["rows"]}  # labels: the names alone here
    for model in ("org/drops", "org/again"):
        row = rows[(model, "SummEval")]
        assert row["baseline_score"] == row["score"] == pytest.approx(terms[kept].mean())
        assert (row["delta"], row["ci_low"], row["ci_high"], row["p"]) == (0, 0, 0, 1)
    assert found["notes"][0] == (
        "SummEval: org/again and the baseline compared on the 98 texts both kept; 2 left out "
        "(2 kept only by the baseline, 0 only by org/again: mteb leaves out a model's texts it "
        "scores all alike), and both scores recomputed on the shared ones."
    )
    # The table's marks pair the same way: on the shared texts the two are identical.
    table = tmp_path / "t.md"
    assert main(["table", "--results", str(tmp_path), "--ci", "--baseline", "org/base",
                 "--resamples", "200", "--out", str(table), "--per-task"]) == 0  # fmt: skip
    lines = [x for x in table.read_text().splitlines() if x.startswith("| org/drops")]
    assert lines and "▲" not in lines[0] and "▼" not in lines[0]
