"""`neobench table --plot` (the forest plot's data, and its PNG) and the --ci columns of the
CSV / Markdown / LaTeX outputs, on results with per-item units whose values are known."""

import copy
import csv
import io
import struct

import mteb
import numpy as np
import pytest
from mteb.models.model_meta import ModelMeta
from mteb.results import TaskResult

from neobench.cli.main import main
from neobench.core.errors import NeobenchError
from neobench.evaluation import units
from neobench.evaluation.units import Part, TaskUnits, TypeSpec
from neobench.report.columns import AVG
from neobench.report.leaderboard import leaderboard
from neobench.report.render import forest
from neobench.report.render.table import plot, to_csv, to_latex, to_markdown

TASKS = ["SciFact", "ArguAna", "NFCorpus"]  # 3 of the 15 Retrieval tasks: a partial column


def _mean(data, idx, _main):
    return float(data["value"][idx].mean())


def write_model(root, name, values_by_task):
    """mteb task files whose main score is the mean of known per-query values, and their units."""
    meta = ModelMeta.create_empty(overwrites={"name": name, "revision": "r1"})
    cache = mteb.ResultCache(root)
    for task_name, values in values_by_task.items():
        task = mteb.get_task(task_name)
        scores = {"test": {"default": {"main_score": float(np.mean(values))}}}
        cache.save_to_cache(TaskResult.from_task_results(task, scores, evaluation_time=0.0), meta)
        part = Part("default", "test", [f"q{i}" for i in range(len(values))], {"value": values})
        path = units.path_for(cache.get_task_result_path(task_name, meta).parent, task_name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            units.to_json(TaskUnits(task_name, "Retrieval", "ndcg_at_10", "query", [part]))
        )


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("ci-results")
    rng = np.random.default_rng(0)
    good = {t: rng.beta(5, 2, size=150) for t in TASKS}
    write_model(root, "org/base", good)
    worse = {t: np.clip(v - 0.1 + rng.normal(0, 0.03, v.size), 0, 1) for t, v in good.items()}
    write_model(root, "org/worse", worse)
    write_model(root, "org/two", {t: good[t] for t in TASKS[:2]})  # NFCorpus missing
    return root


@pytest.fixture(scope="module")
def retrieval_units():
    # Retrieval units here are per-query values whose mean is the main score (as in test_compare).
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(units, "registry", lambda: {"Retrieval": TypeSpec("query", None, _mean)})
        yield


def build(root, **options):
    return leaderboard([str(root)], "MTEB(eng, v1)", reference="paper", resamples=200, **options)


@pytest.fixture(scope="module")
def ci_table(root, retrieval_units):
    return build(root, ci=True, baseline="org/base")


def rows_of(table):
    return {row.label: i for i, row in enumerate(table.rows)}


def test_panels_hold_points_intervals_and_styles(ci_table):
    found = forest.panels(ci_table)
    assert [p.column for p in found] == [t for t, _ in ci_table.types] + [AVG]
    assert found[-1].title == "Avg. (56 tasks)"
    at = rows_of(ci_table)
    retrieval = next(p for p in found if p.column == "Retrieval")
    base, worse, two = (retrieval.points[at[m]] for m in ("org/base", "org/worse", "org/two"))
    for point in (base, worse, two):  # computed rows: a point inside its 95% interval
        assert point.low is not None and point.low <= point.value <= point.high
    assert (base.style, worse.style) == ("baseline", "below")
    assert retrieval.baseline == base.value
    # org/two holds 2 of the 3 tasks: every computed row is averaged over those 2 (report/table)
    assert (base.partial, two.partial) == ("2/15", "2/15")  # partial: drawn hollow with k/n
    paper = [retrieval.points[i] for i, row in enumerate(ci_table.rows) if row.quoted]
    assert len(paper) == 10
    assert all(p.style == "paper" and p.low is None and p.high is None for p in paper)
    assert all(p.partial == "" for p in paper)
    # No computed row has a Classification score: no point (not a zero).
    panel = next(p for p in found if p.column == "Classification")
    assert sorted(panel.points) == [i for i, row in enumerate(ci_table.rows) if row.quoted]
    assert panel.baseline is None
    # Avg. over the 2 shared tasks: a partial point per computed row.
    avg = found[-1]
    assert {avg.points[at[m]].partial for m in ("org/base", "org/worse", "org/two")} == {"2/56"}


def test_complete_rows_get_an_avg_point_with_its_interval(ci_table):
    table = copy.deepcopy(ci_table)
    row = table.rows[rows_of(table)["org/worse"]]
    row.avg, row.ci[AVG], row.avg_of = 61.0, (59.5, 62.4), (56, 56)  # as if it held all 56
    avg = forest.panels(table)[-1]
    point = avg.points[rows_of(table)["org/worse"]]
    assert (point.value, point.low, point.high, point.partial) == (61.0, 59.5, 62.4, "")


def test_without_ci_points_only(root, retrieval_units):
    table = build(root)
    points = [p for panel in forest.panels(table) for p in panel.points.values()]
    assert points and all(p.low is None and p.high is None for p in points)
    assert {p.style for p in points} == {"computed", "paper"}
    assert all(panel.baseline is None for panel in forest.panels(table))


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_png_is_written_whole_and_the_same_twice(ci_table, tmp_path):
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    plot(ci_table, first)
    plot(ci_table, second)
    width, height = png_size(first)
    assert 1500 <= width <= 4000 and 900 <= height <= 4000  # 8 panels of 13 rows, 150 dpi
    assert first.stat().st_size > 50_000
    assert first.read_bytes() == second.read_bytes()


def test_per_task_panels_and_their_limit(root, retrieval_units, tmp_path, monkeypatch, capsys):
    table = build(root, ci=True, per_task=True)
    found = forest.panels(table)
    assert [p.column for p in found] == [t for t in table.task_names if t in TASKS] + [AVG]
    nfcorpus = next(p for p in found if p.column == "NFCorpus")
    assert rows_of(table)["org/two"] not in nfcorpus.points  # the task it lacks
    plot(table, tmp_path / "t.png")
    assert png_size(tmp_path / "t.png")[0] >= 1500
    monkeypatch.setattr(forest, "MAX_TASK_PANELS", 2)
    with pytest.raises(NeobenchError, match="--plot with --per-task: the rows hold scores on 3"):
        forest.panels(table)
    args = ["table", "--results", str(root), "--per-task", "--plot", str(tmp_path / "p.png")]
    assert main(args) == 2
    assert "at most 2 task panels" in capsys.readouterr().err


def data_rows(text):
    return list(
        csv.DictReader(io.StringIO("\n".join(x for x in text.splitlines() if x[:1] != "#")))
    )


def test_csv_with_ci_keeps_numbers_and_adds_interval_columns(ci_table):
    rows = {r["label"]: r for r in data_rows(to_csv(ci_table))}
    for model in ("org/base", "org/worse", "org/two"):
        row = rows[model]
        low, value, high = (float(row[f"Retrieval{s}"]) for s in ("_ci_low", "", "_ci_high"))
        assert low <= value <= high
        assert row["Classification"] == row["Classification_ci_low"] == ""  # no score, no interval
        low, value, high = (float(row[f"avg{s}"]) for s in ("_ci_low", "", "_ci_high"))
        assert low <= value <= high and row["avg_tasks"] == "2/56"  # over the shared tasks
    assert rows["org/worse"]["Retrieval_mark"] == "below"
    assert rows["org/base"]["Retrieval_mark"] == rows["org/two"]["Retrieval_mark"] == ""
    paper = rows["NeoBERT-4096 (paper)"]
    assert float(paper["Retrieval"]) == 31.6 and paper["Retrieval_ci_low"] == ""
    assert not any("±" in v for row in rows.values() for v in row.values())


def test_csv_per_task_with_ci(root, retrieval_units):
    rows = {r["label"]: r for r in data_rows(to_csv(build(root, ci=True, per_task=True)))}
    assert "SciFact_mark" not in rows["org/base"]  # marks only with --baseline
    for task in TASKS:
        low, value, high = (float(rows["org/base"][task + s]) for s in ("_ci_low", "", "_ci_high"))
        assert low <= value <= high


def test_markdown_and_latex_carry_the_legend(ci_table):
    legend = [n for n in ci_table.notes if n.startswith(("±", "▲"))]
    assert len(legend) == 2
    md = to_markdown(ci_table)
    assert all(f"- {note}" in md for note in legend) and " ±" in md and "▼" in md
    tex = to_latex(ci_table)
    typeset = [line for line in tex.splitlines() if not line.startswith("%")]
    assert not any(c in line for line in typeset for c in "±▲▼")  # only as math in LaTeX
    assert "$\\pm$" in tex and "$\\blacktriangledown$" in tex
    assert "$\\pm$ = half the width of the 95\\% bootstrap interval" in tex  # typeset legend
