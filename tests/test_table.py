"""neobench table on synthetic scores written through mteb's own ResultCache, plus the paper."""

import copy
import csv
import io
import json
from importlib import resources
from statistics import fmean

import mteb
import pytest
import yaml
from mteb.models.model_meta import ModelMeta
from mteb.results import TaskResult
from rich.console import Console

from neobench.cli.main import main
from neobench.core.card_io import write_card
from neobench.core.errors import NeobenchError
from neobench.core.reader import load_runs
from neobench.protocol.tasks import load_benchmark, select_tasks
from neobench.report.render.table import plot, to_csv, to_latex, to_markdown
from neobench.report.render.terminal import print_rich
from neobench.report.table import build_table

MISSING_B = ["SciFact", "STS12", "SummEval"]


@pytest.fixture(scope="module")
def v1_tasks():
    return select_tasks(load_benchmark("MTEB(eng, v1)"))


def synthetic_score(model: str, i: int) -> float:
    return round(0.2 + 0.013 * ((i * 7 + len(model)) % 53), 6)


def write_model(root, tasks, name, max_len, skip=(), recipe=None):
    meta = ModelMeta.create_empty(overwrites={"name": name, "revision": "r1"})
    cache = mteb.ResultCache(root)
    for i, task in enumerate(tasks):
        if task.metadata.name in skip:
            continue
        scores = {
            split: {s: {"main_score": synthetic_score(name, i)} for s in task.hf_subsets}
            for split in task.eval_splits
        }
        cache.save_to_cache(TaskResult.from_task_results(task, scores, evaluation_time=0.0), meta)
    folder = cache.get_task_result_path("_", meta).parent
    write_card(
        folder / "neobench" / "run-1.yaml",
        {
            "benchmark": "MTEB(eng, v1)",
            "conditions": {
                "instructions": "paper",
                "instructions_sha256": "ab" * 32,
                "max_seq_length": max_len,
                "dtype": "float16",
            },
            "environment": {"packages": {"mteb": "2.26.24"}},
            "model": {"recipe_sha256": recipe},
        },
    )
    return folder


@pytest.fixture(scope="module")
def root(tmp_path_factory, v1_tasks):
    root = tmp_path_factory.mktemp("results")
    write_model(root, v1_tasks, "org/model-a", 512)
    write_model(root, v1_tasks, "org/model-b", 256, skip=MISSING_B)
    return root


@pytest.fixture(scope="module")
def table(root, v1_tasks):
    runs, problems = load_runs(root, v1_tasks)
    assert problems == []
    return build_table(runs, v1_tasks, "MTEB(eng, v1)", reference="paper")


def test_type_means_and_avg_over_tasks(root, v1_tasks):
    runs, _ = load_runs(root, v1_tasks)
    table = build_table(runs, v1_tasks, "MTEB(eng, v1)", models=["org/model-a"])
    a = next(r for r in table.rows if r.label == "org/model-a")
    scores = {
        t.metadata.name: synthetic_score("org/model-a", i) * 100 for i, t in enumerate(v1_tasks)
    }
    for type_, n in table.types:
        names = [t.metadata.name for t in v1_tasks if t.metadata.type == type_]
        assert len(names) == n
        assert a.types[type_].value == pytest.approx(fmean(scores[x] for x in names))
    assert a.avg == pytest.approx(fmean(scores.values()))  # plain mean over the 56 tasks
    assert a.mean_types == pytest.approx(fmean(c.value for c in a.types.values()))
    assert abs(a.avg - a.mean_types) > 0.1  # the two averages really differ here
    assert [n for _, n in table.types] == [12, 11, 3, 4, 15, 10, 1]
    assert table.averaged is None and a.avg_text() == f"{a.avg:.1f}"


def test_rows_over_different_tasks_are_averaged_over_the_shared_ones(table, v1_tasks):
    """model-b lacks 3 tasks: both rows' columns average the 53 tasks both hold."""
    a, b = (next(r for r in table.rows if r.label == m) for m in ("org/model-a", "org/model-b"))
    assert sorted(set(t.metadata.name for t in v1_tasks) - set(table.averaged)) == sorted(MISSING_B)
    for row, model in ((a, "org/model-a"), (b, "org/model-b")):
        scores = {t.metadata.name: synthetic_score(model, i) * 100 for i, t in enumerate(v1_tasks)}
        sts = [t.metadata.name for t in v1_tasks if t.metadata.type == "STS"]
        shared_sts = [n for n in sts if n not in MISSING_B]
        assert row.types["STS"].value == pytest.approx(fmean(scores[n] for n in shared_sts))
        assert row.types["STS"].text().endswith("(9/10)")
        assert row.avg == pytest.approx(fmean(scores[n] for n in table.averaged))
        assert row.avg_text().endswith("(53/56)") and row.mean_types is None
        assert row.types["Summarization"].text() == "—"
    note = next(n for n in table.notes if n.startswith("The computed rows hold different tasks"))
    assert "53 of 56 tasks they all hold" in note
    held_by_a = next(n for n in table.notes if n.startswith("org/model-a: incomplete"))
    assert all(m in held_by_a for m in MISSING_B)  # a's tasks left out of the averages


def test_incomplete_rows_are_marked(table):
    b = next(r for r in table.rows if r.label == "org/model-b")
    assert sorted(b.missing) == sorted(MISSING_B)
    note = next(n for n in table.notes if n.startswith("org/model-b: incomplete"))
    assert "3 of 56 tasks missing" in note and all(m in note for m in MISSING_B)
    assert table.cells(b)[-1] == "3"


def test_conditions_footnote_names_the_differing_field(table):
    note = next(n for n in table.notes if n.startswith("Conditions differ"))
    assert note.startswith("Conditions differ between rows. max_seq_length:")
    assert "512 (org/model-a)" in note and "256 (org/model-b)" in note


def test_strict_refuses_mixed_conditions(root, v1_tasks):
    runs, _ = load_runs(root, v1_tasks)
    with pytest.raises(NeobenchError, match="max_seq_length"):
        build_table(runs, v1_tasks, "MTEB(eng, v1)", strict=True)
    same = build_table(runs, v1_tasks, "MTEB(eng, v1)", models=["org/model-a"], strict=True)
    assert [r.label for r in same.rows] == ["org/model-a"]


def test_a_base_model_and_its_fine_tunes_can_be_compared(tmp_path, v1_tasks):
    """Same evaluation conditions: a released model next to its fine-tunes passes --strict
    (labelled "not fine-tuned"); fine-tunes under two different recipes do not."""
    write_model(tmp_path, v1_tasks, "org/base", 512)
    write_model(tmp_path, v1_tasks, "org/tuned", 512, recipe="1" * 64)
    write_model(tmp_path, v1_tasks, "org/tuned-other", 512, recipe="2" * 64)
    runs, _ = load_runs(tmp_path, v1_tasks)
    pair = build_table(
        runs, v1_tasks, "MTEB(eng, v1)", models=["org/base", "org/tuned"], strict=True
    )
    base, tuned = pair.rows
    assert (base.name, tuned.name) == ("org/base (not fine-tuned)", "org/tuned")
    assert pair.cells(base)[0] == "org/base (not fine-tuned)"
    note = next(n for n in pair.notes if n.startswith("(not fine-tuned)"))
    assert "recipe 111111111111" in note
    with pytest.raises(NeobenchError) as refused:
        build_table(runs, v1_tasks, "MTEB(eng, v1)", strict=True)
    message = str(refused.value)
    assert "recipe (among fine-tuned rows): 111111111111 (org/tuned), 222222222222" in message
    assert "org/base" not in message  # the released model is not part of the recipe question
    alone = build_table(runs, v1_tasks, "MTEB(eng, v1)", models=["org/base"], strict=True)
    assert alone.rows[0].name == "org/base"  # nothing to tell it apart from: no label


def test_paper_rows_are_quoted_and_marked(table):
    paper = [r for r in table.rows if r.quoted]
    assert len(paper) == 10 and all(r.label.endswith("(paper)") for r in paper)
    neo = next(r for r in paper if r.label.startswith("NeoBERT"))
    assert (neo.types["Retrieval"].value, neo.avg) == (31.6, 51.3)


def test_recomputing_the_paper_avg_from_its_type_columns():
    data = yaml.safe_load(
        resources.files("neobench.report.references").joinpath("paper_table4.yaml").read_text()
    )
    counts = data["task_counts"]
    assert sum(counts.values()) == 56
    for name, values in data["rows"].items():
        row = dict(zip(data["columns"], values, strict=True))
        over_tasks = sum(row[t] * n for t, n in counts.items()) / 56
        over_types = fmean(row[t] for t in counts)
        # Each published type mean and the Avg. are rounded to 0.1: |error| <= 0.05 + 0.05.
        assert abs(over_tasks - row["Avg"]) <= 0.1 + 1e-9, name
        assert abs(over_types - row["Avg"]) > 1.0, name  # the paper does NOT average type means


def test_renderers_state_their_sources(table, tmp_path):
    md = to_markdown(table)
    assert (
        "| Model | Class. (12) | Clust. (11) |" in md
        and "Sources:" in md
        and "run-1.yaml sha256:" in md
    )
    lines = [x for x in to_csv(table).splitlines() if not x.startswith("#")]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    assert (
        rows[0]["model"] == "org/model-a"
        and float(rows[1]["avg"]) == pytest.approx(table.rows[1].avg, abs=0.05)
        and rows[1]["missing_tasks"] == "3"
    )
    assert to_csv(table).startswith("# neobench table")
    tex = to_latex(table)
    assert "\\toprule" in tex and "\\bottomrule" in tex and "% source:" in tex
    png = tmp_path / "t.png"
    plot(table, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_per_task_columns(root, v1_tasks):
    runs, _ = load_runs(root, v1_tasks)
    per_task = build_table(runs, v1_tasks, "MTEB(eng, v1)", per_task=True)
    assert per_task.header()[1:57] == [t.metadata.name for t in v1_tasks]


def test_per_task_shows_the_tasks_some_row_holds(tmp_path, v1_tasks):
    held = {"BIOSSES", "STS16"}
    skip = [t.metadata.name for t in v1_tasks if t.metadata.name not in held]
    write_model(tmp_path, v1_tasks, "org/two", 512, skip=skip)
    runs, _ = load_runs(tmp_path, v1_tasks)
    table = build_table(runs, v1_tasks, "MTEB(eng, v1)", per_task=True, reference="paper")
    shown = [t.metadata.name for t in v1_tasks if t.metadata.name in held]  # benchmark order
    assert table.header() == ["Model", *shown, "Avg.", "Missing"]
    assert (
        "Per task: the 2 tasks the rows hold are shown; the other 54 of the 56 tasks of "
        "MTEB(eng, v1) no row holds." in table.notes
    )
    header = next(line for line in to_csv(table).splitlines() if not line.startswith("#"))
    assert [c for c in header.split(",") if c in held or c.endswith("Classification")] == shown


def test_json_and_csv_rows_name_the_run_and_its_conditions_apart(root, tmp_path, capsys):
    out = tmp_path / "t.json"
    assert main(["table", "--results", str(root), "--reference", "paper", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    rows = {row["label"]: row for row in data["rows"]}
    a = rows["org/model-a"]
    assert (a["model"], a["revision"], a["experiment"], a["seeds"]) == ("org/model-a", "r1",
                                                                        None, None)  # fmt: skip
    assert (a["instructions"], a["max_seq_length"], a["dtype"]) == ("paper", 512, "float16")
    assert (a["finetuned"], a["recipe_sha256"], a["benchmark"]) == (False, None, "MTEB(eng, v1)")
    assert data["columns"][-1] == "Avg." and a["columns"]["Avg."]["tasks"] == [53, 56]
    assert rows["org/model-b"]["max_seq_length"] == 256
    assert sorted(rows["org/model-b"]["missing_tasks"]) == sorted(MISSING_B)
    paper = rows["NeoBERT-4096 (paper)"]
    assert paper["model"] == "NeoBERT-4096" and paper["quoted"] and paper["revision"] is None
    # --format json prints the same document.
    capsys.readouterr()
    assert main(["table", "--results", str(root), "--reference", "paper", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == data
    csv_rows = list(csv.DictReader(io.StringIO("\n".join(
        line for line in to_csv(load_table(root)).splitlines() if not line.startswith("#")
    ))))  # fmt: skip
    b = next(row for row in csv_rows if row["model"] == "org/model-b")
    assert (b["label"], b["revision"], b["max_seq_length"], b["dtype"]) == (
        "org/model-b", "r1", "256", "float16",
    )  # fmt: skip


def load_table(root):
    tasks = select_tasks(load_benchmark("MTEB(eng, v1)"))
    runs, _ = load_runs(root, tasks)
    return build_table(runs, tasks, "MTEB(eng, v1)")


def test_corrupted_json_is_named_skipped_and_reported(root, v1_tasks, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    bad = next(copy.rglob("org__model-a/r1/STS13.json"))
    bad.write_text("{not json")
    runs, problems = load_runs(copy, v1_tasks)
    assert len(problems) == 1 and "STS13.json" in problems[0] and "skipped" in problems[0]
    table = build_table(runs, v1_tasks, "MTEB(eng, v1)", problems=problems)
    a = next(r for r in table.rows if r.label == "org/model-a")
    assert a.missing == ["STS13"] and any("STS13.json" in n for n in table.notes)


def test_bad_inputs(tmp_path, root, v1_tasks, capsys):
    with pytest.raises(NeobenchError, match="no results/ folder"):
        load_runs(tmp_path / "nowhere", v1_tasks)
    (tmp_path / "empty" / "results").mkdir(parents=True)
    with pytest.raises(NeobenchError, match="no task results yet"):
        load_runs(tmp_path / "empty", v1_tasks)
    runs, _ = load_runs(root, v1_tasks)
    with pytest.raises(NeobenchError, match="Did you mean 'org/model-a'"):
        build_table(runs, v1_tasks, "MTEB(eng, v1)", models=["org/modle-a"])
    assert main(["table", "--results", str(root), "--models", "org/modle-a"]) == 2
    assert "Did you mean" in capsys.readouterr().err


def test_cli_writes_every_format(root, tmp_path, capsys):
    for name in ("t.md", "t.csv", "t.tex"):
        assert (
            main(
                [
                    "table",
                    "--results",
                    str(root),
                    "--out",
                    str(tmp_path / name),
                    "--reference",
                    "paper",
                ]
            )
            == 0
        )
    assert main(["table", "--results", str(root), "--plot", str(tmp_path / "t.png")]) == 0
    assert {p.name for p in tmp_path.iterdir()} == {"t.md", "t.csv", "t.tex", "t.png"}
    assert main(["table", "--results", str(root), "--strict"]) == 2


LONG_NAMES = ["sentence-transformers/all-MiniLM-L6-v2", "local/some-very-long-folder-name-xyz"]


@pytest.fixture(scope="module")
def long_runs(tmp_path_factory, v1_tasks):
    root = tmp_path_factory.mktemp("long")
    write_model(root, v1_tasks, LONG_NAMES[0], 512)
    write_model(root, v1_tasks, LONG_NAMES[1], 256, skip=MISSING_B)
    return load_runs(root, v1_tasks)[0]


def rendered(table, *, terminal: bool, width: int = 100) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=terminal, color_system=None)
    print_rich(table, console)
    return buffer.getvalue()


def score_cells(table) -> set[str]:
    return {cell for row in table.rows for cell in table.cells(row)[1:] if cell}


@pytest.mark.parametrize("per_task", [False, True])
def test_piped_rich_table_prints_every_name_whole(long_runs, v1_tasks, per_task):
    table = build_table(long_runs, v1_tasks, "MTEB(eng, v1)", reference="paper", per_task=per_task)
    text = rendered(table, terminal=False, width=80)
    assert "…" not in text
    lines = text.splitlines()
    rows = {line.split("  ")[0] for line in lines}
    assert set(LONG_NAMES) <= rows  # each name whole, on the line of its scores
    header = next(line for line in lines if line.startswith("Model "))
    assert all(name in header for name in table.header())
    assert all(note in lines for note in table.notes)  # notes one line each, unwrapped


def test_terminal_rich_table_fits_100_columns(long_runs, v1_tasks):
    table = build_table(long_runs, v1_tasks, "MTEB(eng, v1)", reference="paper")
    text = rendered(table, terminal=True)
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 100
    assert all(cell in text for cell in score_cells(table))  # scores never cut or wrapped
    flat = "".join(text.split())
    assert all(name in flat for name in LONG_NAMES)  # names wrap, nothing is dropped


@pytest.mark.parametrize("width", [100, 60])
def test_terminal_per_task_table_is_readable(long_runs, v1_tasks, width):
    table = build_table(long_runs, v1_tasks, "MTEB(eng, v1)", per_task=True)
    text = rendered(table, terminal=True, width=width)
    assert "…" not in text
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    rows = {line.split("  ")[0] for line in lines}
    assert set(table.task_names) <= rows  # one row per task, its name whole
    assert all(cell in text for cell in score_cells(table))


def test_rich_table_keeps_brackets_in_labels(table):
    # An experiment suffix such as "[max_seq_length_256]" is text, not rich markup.
    bracketed = copy.deepcopy(table)
    bracketed.rows[0].label = "org/model-a [max_seq_length_256]"
    assert "org/model-a [max_seq_length_256]" in rendered(bracketed, terminal=False)
    flat = "".join(rendered(bracketed, terminal=True, width=200).split())
    assert "org/model-a[max_seq_length_256]" in flat
