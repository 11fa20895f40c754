"""neobench from Python (neobench/api.py): the CLI's functions with keyword arguments, typed
results with to_pandas(), one family of errors, and the docs example run offline."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import subprocess
import sys
import warnings

import pytest
from conftest import GOLDEN_BASELINE, GOLDEN_TASKS, REPO

import neobench as nb
from neobench.cli.main import main
from neobench.core.conditions import RECORD
from neobench.report.frames import COMPARE_SCORES


def test_an_unknown_keyword_is_refused_with_the_closest_name():
    with pytest.raises(nb.NeobenchError) as error:
        nb.leaderboard("runs", cii=True, basline="x")
    assert error.value.problems == [
        "leaderboard(): unknown keyword 'cii'. Did you mean 'ci'?",
        "leaderboard(): unknown keyword 'basline'. Did you mean 'baseline'?",
    ]


def test_the_leaderboard_frame_holds_the_csv_numbers(golden_runs, tmp_path, capsys):
    runs = golden_runs / "runs"
    board = nb.leaderboard(runs, ci=True, baseline=GOLDEN_BASELINE)
    frame = board.to_pandas()
    out = tmp_path / "table.csv"
    assert main(["table", "--results", str(runs), "--ci", "--baseline", GOLDEN_BASELINE,
                 "--out", str(out)]) == 0  # fmt: skip
    lines = [line for line in out.read_text().splitlines() if not line.startswith("#")]
    written = {row["label"]: row for row in csv.DictReader(io.StringIO("\n".join(lines)))}
    computed = frame[~frame["quoted"]]
    assert sorted(computed["label"]) == sorted(written)
    for _, row in computed.iterrows():  # the run named in separate fields, as in the CSV
        assert (row["model"], row["revision"]) == (
            written[row["label"]]["model"],
            written[row["label"]]["revision"],
        )
        for key in RECORD:  # and its conditions, under the CSV's (and compare's) names
            value = "" if row[key] is None or row[key] != row[key] else str(row[key])  # NaN
            assert value == written[row["label"]][key], key
    for _, row in computed.iterrows():
        # the CSV rounds to one decimal; the frame keeps the computed value
        assert row["Avg."] == pytest.approx(float(written[row["label"]]["avg"]), abs=0.051)
        low = float(written[row["label"]]["STS_ci_low"])
        assert row["STS_ci_low"] == pytest.approx(low, abs=0.051)
    marks = set(computed["Avg._mark"].dropna())
    assert marks <= {"above", "below"}


def test_the_comparison_frame_is_compares_json(golden_runs, tmp_path):
    runs = golden_runs / "runs"
    found = nb.compare(runs, GOLDEN_BASELINE, resamples=200)
    out = tmp_path / "compare.json"
    assert main(["compare", "--results", str(runs), "--baseline", GOLDEN_BASELINE,
                 "--resamples", "200", "--out", str(out)]) == 0  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    frame = found.to_pandas()
    assert len(frame) == len(rows) and list(frame.columns) == list(rows[0])
    for mine, theirs in zip(frame.to_dict("records"), rows, strict=True):
        assert (mine["model"], mine["task"]) == (theirs["model"], theirs["task"])
        # the JSON keeps mteb's 0-1; the frame, like every frame, 0-100; p-values as they are
        for key in COMPARE_SCORES:
            if theirs[key] is None:
                assert math.isnan(mine[key]), key
            else:
                assert mine[key] == pytest.approx(100 * theirs[key]), key
        assert mine["p"] == pytest.approx(theirs["p"])
        assert mine["p_holm"] == pytest.approx(theirs["p_holm"])
    assert (frame[list(COMPARE_SCORES)].dtypes == "float64").all()


def test_runs_and_a_study_as_frames(golden_runs, tmp_path):
    runs = nb.load_runs(golden_runs / "runs")
    frame = runs.to_pandas()
    assert set(frame["task"]) == set(GOLDEN_TASKS.split(","))
    assert {"label", "model", "revision", "main_score", "max_seq_length"} <= set(frame.columns)
    assert frame["main_score"].dtype == "float64" and frame["main_score"].between(0, 100).all()
    study = nb.load_study(REPO / "studies" / "tiny.yaml", output=tmp_path / "out")
    jobs = study.to_pandas()
    assert list(jobs["kind"]).count("eval") == 4 and set(jobs["state"]) == {"pending"}
    assert not (tmp_path / "out").exists()  # planning makes nothing


# One fresh process serves the two tests below: the docs example runs in it as `python
# docs/examples/python_api.py RESULTS` would run it (its first evaluation of MiniLM on BIOSSES),
# then every neobench module is imported and the same evaluation asked again. Fresh, because
# which neobench modules are imported, and in which order, is what decides whether a package
# attribute shadows an API function.
EXAMPLE_THEN_EVERY_MODULE = """
import importlib, pkgutil, runpy, sys

script, model, results = sys.argv[1:4]
sys.argv = [script, results]
runpy.run_path(script, run_name="__main__")
print("--- every module imported", flush=True)
import neobench as nb
from neobench import api

for module in pkgutil.walk_packages(nb.__path__, "neobench."):
    if ".cli" in module.name or module.name.endswith("__main__"):
        continue
    importlib.import_module(module.name)
second = nb.evaluate(model, model_name="MiniLM", tasks=["BIOSSES"], results=results)
shadowed = [n for n in nb.API if getattr(nb, n) is not getattr(api, n)]
print("statuses", [(o.task, o.status) for o in second.outcomes])
print("shadowed", shadowed)
"""


@pytest.fixture(scope="module")
def example_process(tmp_path_factory, minilm, mirror) -> tuple[str, str]:
    """The docs example's output, and what the same process printed after it."""
    env = {**os.environ, "NEOBENCH_DATA_DIR": str(mirror), "HF_HUB_OFFLINE": "1"}
    script = REPO / "docs" / "examples" / "python_api.py"
    argv = [sys.executable, "-c", EXAMPLE_THEN_EVERY_MODULE, str(script), str(minilm),
            str(tmp_path_factory.mktemp("example") / "runs")]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    example, _, after = done.stdout.partition("--- every module imported")
    return example, after


@pytest.mark.slow
def test_the_docs_example_runs_offline(example_process):
    example, _ = example_process
    assert "BIOSSES" in example and "STS16" in example and "evaluated" in example
    assert "STS_ci_low" in example and "MiniLM" in example
    assert "refused: Unknown --baseline model 'MiniLM-typo'. Did you mean 'MiniLM'?" in example


@pytest.mark.slow
def test_every_api_name_stays_the_function_whatever_is_imported(example_process):
    example, after = example_process
    # the example evaluated MiniLM on BIOSSES; asked again after every import, it is found
    assert re.search(r"^\s*BIOSSES\s+STS\s+evaluated\s", example, re.MULTILINE), example
    assert "statuses [('BIOSSES', 'cached')]" in after
    assert "shadowed []" in after


def test_every_api_name_is_listed_by_dir():
    # tab completion in a notebook lists dir(module); the API's names load on first use
    assert set(nb.API) <= set(dir(nb)) and set(nb.API) <= set(nb.__all__)
    assert {"__version__", "API"} <= set(dir(nb))


def _cells(board, columns, suffix=""):
    """A leaderboard frame's cells, one row per (label, column): column -> ``task``."""
    named = [column + suffix for column in columns]
    cells = board[~board["quoted"]].melt(["label"], named, var_name="task", value_name="cell")
    return cells.assign(task=cells["task"].str.removesuffix(suffix))


def test_the_frames_join_on_one_scale(golden_runs):
    root, tasks = golden_runs / "runs", GOLDEN_TASKS.split(",")
    runs = nb.load_runs(root).to_pandas()
    per_task = nb.leaderboard(root, per_task=True, ci=True, resamples=200).to_pandas()
    board = nb.leaderboard(root, ci=True, resamples=200, reference="paper").to_pandas()
    found = nb.compare(root, GOLDEN_BASELINE, resamples=200).to_pandas()
    # load_runs' main_score is the leaderboard's per-task cell, joined on the same names
    joined = _cells(per_task, tasks).merge(runs, on=["label", "task"], validate="one_to_one")
    assert len(joined) == len(runs) and (joined["cell"] == joined["main_score"]).all()
    assert runs["main_score"].between(1, 100).all()  # 0-100, not mteb's 0-1
    # compare's scores are the stored ones, as load_runs gives them (not recomputed from the
    # units, which differ in the sixth decimal of 0-1: mteb's rounding)
    paired = found.merge(runs, on=["label", "task"], validate="one_to_one")
    assert len(paired) == len(found) - found["label"].nunique()  # all but each model's Avg.
    assert (paired["score"] - paired["main_score"]).abs().max() < 1e-9
    baseline = runs[runs["model"] == GOLDEN_BASELINE].set_index("task")["main_score"]
    assert (paired["baseline_score"] - paired["task"].map(baseline)).abs().max() < 1e-9
    # one engine draws both: compare's interval of a score is the table's, on the same scale
    for side, suffix in (("score_ci_low", "_ci_low"), ("score_ci_high", "_ci_high")):
        bounds = found.merge(_cells(per_task, tasks, suffix), on=["label", "task"])
        assert len(bounds) == len(paired) and (bounds[side] == bounds["cell"]).all()
    spread = found.merge(_cells(per_task, tasks, "_sd"), on=["label", "task"])
    assert spread["seed_sd"].isna().equals(spread["cell"].isna()) and spread["cell"].notna().any()
    assert (spread["seed_sd"] - spread["cell"]).abs().max() < 1e-9  # NaN (single runs) skipped
    averages = found[found["task"] == "Avg."].merge(board, on="label")
    assert len(averages) == 3 and ((averages["score"] - averages["Avg."]).abs() < 1e-9).all()
    assert list(averages["score_ci_low"]) == pytest.approx(list(averages["Avg._ci_low"]))
    # every score, difference and bound float64, NaN where absent: the types no run holds, the
    # paper rows' intervals, the seed sd of single runs
    types = ["Classification", "Clustering", "PairClassification", "Reranking", "Retrieval",
             "STS", "Summarization"]  # fmt: skip
    numbers = [*(f"{t}{s}" for t in [*types, "Avg."] for s in ("", "_ci_low", "_ci_high")),
               "mean_task_type"]  # fmt: skip
    assert (board[numbers].dtypes == "float64").all()
    assert (found[list(COMPARE_SCORES)].dtypes == "float64").all()
    assert (per_task[[f"{t}{s}" for t in tasks for s in ("", "_ci_low", "_sd")]].dtypes
            == "float64").all()  # fmt: skip
    computed = board[~board["quoted"]]
    assert computed["Clustering"].isna().all() and computed["mean_task_type"].isna().all()
    assert board.loc[board["quoted"], "Avg._ci_low"].isna().all()
    assert board.loc[board["quoted"], "Clustering"].notna().all()  # the paper's numbers, 0-100


def test_a_failed_task_is_nan_in_the_evaluate_frame(tmp_path):
    from neobench.evaluation.outcomes import EvalSummary, TaskOutcome

    summary = EvalSummary(tmp_path, None, model="org/model", revision="local-0")
    summary.outcomes = [TaskOutcome("BIOSSES", "STS", "failed", error="ValueError: x")]
    frame = summary.to_pandas()
    assert frame["main_score"].dtype == "float64" and frame["main_score"].isna().all()
    assert list(frame[["model", "revision", "task"]].iloc[0]) == ["org/model", "local-0", "BIOSSES"]
    empty = EvalSummary(tmp_path, None).to_pandas()
    assert empty.empty and {"model", "task", "main_score"} <= set(empty.columns)


def test_the_progress_switches_are_off_inside_a_call_and_restored():
    import datasets
    from transformers.utils import logging as transformers

    from neobench.api import _quiet

    def shown():
        return transformers.is_progress_bar_enabled(), datasets.is_progress_bar_enabled()

    def switch(on):
        with warnings.catch_warnings():  # a switch an environment variable holds only warns
            warnings.simplefilter("ignore")
            transformers.enable_progress_bar() if on[0] else transformers.disable_progress_bar()
            datasets.enable_progress_bars() if on[1] else datasets.disable_progress_bars()

    before = shown()
    switch((True, True))  # as a notebook has them (an earlier CLI call here turned them off)
    try:
        shown_now = shown()
        assert shown_now[0]
        with _quiet(True):
            assert shown() == (False, False)
        assert shown() == shown_now
        with _quiet(False):  # progress=True: as the user has them
            assert shown() == shown_now
    finally:
        switch(before)


@pytest.mark.slow
def test_an_evaluation_joins_its_runs_and_table_and_prints_nothing(tiny_bert, mirror, tmp_path,
                                                                  capfd):  # fmt: skip
    results = tmp_path / "runs"
    capfd.readouterr()
    run = nb.evaluate(tiny_bert, tasks="BIOSSES", results=results, data_dir=mirror)
    assert capfd.readouterr() == ("", "")  # no progress bar, no "Loading weights"
    evaluated = run.to_pandas()
    assert list(evaluated["status"]) == ["evaluated"]
    runs = nb.load_runs(results).to_pandas()
    keys = ["model", "revision", "experiment", "task"]
    joined = evaluated.merge(runs, on=keys, suffixes=("_eval", "_runs"), validate="one_to_one")
    assert len(joined) == 1
    assert (joined["main_score_eval"] == joined["main_score_runs"]).all()
    assert (joined["main_score_eval"] == 100 * run.outcomes[0].main_score).all()
    board = nb.leaderboard(results).to_pandas()
    row = board.merge(runs, on=["label", "model", "revision"], validate="one_to_one").iloc[0]
    assert row["STS"] == row["Avg."] == row["main_score"]  # BIOSSES, the one STS task
    assert board["Retrieval"].dtype == "float64" and board["Retrieval"].isna().all()


@pytest.mark.slow
def test_a_model_in_memory_scores_as_the_cli_on_its_saved_folder(minilm_model, mirror, tmp_path):
    """A notebook's SentenceTransformer: evaluated from memory, it is filed under its weights'
    content hash, as `neobench eval` files the folder it was saved to, with the same score."""
    from neobench.cli.main import main
    from neobench.core.cards import read_eval_card
    from neobench.core.results import card_paths, run_folders
    from neobench.models.fingerprint import fingerprint

    saved = tmp_path / "saved"
    minilm_model.save(str(saved))
    cli_results, api_results = tmp_path / "cli", tmp_path / "api"
    code = main(["eval", "--model", str(saved), "--model-name", "local/in-memory", "--tasks",
                 "BIOSSES", "--results", str(cli_results), "--data-dir", str(mirror)])  # fmt: skip
    assert code == 0
    run = nb.evaluate(minilm_model, tasks="BIOSSES", results=api_results, data_dir=mirror)
    assert run.model == "local/in-memory" and run.revision == fingerprint(saved)
    [cli_folder], [api_folder] = run_folders(cli_results), run_folders(api_results)
    assert cli_folder.relative_to(cli_results) == api_folder.relative_to(api_results)
    cli_card = read_eval_card(card_paths(cli_folder)[0])
    api_card = read_eval_card(card_paths(api_folder)[0])
    assert api_card.model.revision == cli_card.model.revision == fingerprint(saved)
    assert api_card.tasks["BIOSSES"]["main_score"] == cli_card.tasks["BIOSSES"]["main_score"]
    assert run.outcomes[0].main_score == cli_card.tasks["BIOSSES"]["main_score"]


def test_evaluate_refuses_what_is_not_a_model():
    with pytest.raises(nb.NeobenchError, match="give a model folder, a hub id or a Sentence"):
        nb.evaluate(object(), tasks="BIOSSES")
