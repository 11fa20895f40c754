"""neobench from Python (neobench/api.py): the CLI's functions with keyword arguments, typed
results with to_pandas(), one family of errors, and the docs example run offline."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest
from conftest import GOLDEN_BASELINE, GOLDEN_TASKS, REPO

import neobench as nb
from neobench.cli.main import main


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
        assert mine["delta"] == pytest.approx(theirs["delta"])
        assert mine["p_holm"] == pytest.approx(theirs["p_holm"])


def test_runs_and_a_study_as_frames(golden_runs, tmp_path):
    runs = nb.load_runs(golden_runs / "runs")
    frame = runs.to_pandas()
    assert set(frame["task"]) == set(GOLDEN_TASKS.split(","))
    assert {"model", "revision", "main_score", "max_seq_length"} <= set(frame.columns)
    study = nb.load_study(REPO / "studies" / "tiny.yaml", output=tmp_path / "out")
    jobs = study.to_pandas()
    assert list(jobs["kind"]).count("eval") == 4 and set(jobs["state"]) == {"pending"}
    assert not (tmp_path / "out").exists()  # planning makes nothing


@pytest.mark.slow
def test_the_docs_example_runs_offline(tmp_path, mirror):
    env = {**os.environ, "NEOBENCH_DATA_DIR": str(mirror), "HF_HUB_OFFLINE": "1"}
    script = REPO / "docs" / "examples" / "python_api.py"
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "runs")], env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "BIOSSES" in done.stdout and "STS16" in done.stdout and "evaluated" in done.stdout
    assert "STS_ci_low" in done.stdout and "MiniLM" in done.stdout
    assert "refused: Unknown --baseline model 'MiniLM-typo'. Did you mean 'MiniLM'?" in done.stdout


# Run in a fresh process: which neobench modules are imported, and in which order, is what
# decides whether a package attribute shadows an API function.
API_NAMES_SURVIVE_IMPORTS = """
import importlib, pkgutil, sys
import neobench as nb
from neobench import api

model, mirror, results = sys.argv[1:4]
first = nb.evaluate(model, tasks=["BIOSSES"], results=results, data_dir=mirror)
for module in pkgutil.walk_packages(nb.__path__, "neobench."):
    if ".cli" in module.name or module.name.endswith("__main__"):
        continue
    importlib.import_module(module.name)
second = nb.evaluate(model, tasks=["BIOSSES"], results=results, data_dir=mirror)
shadowed = [n for n in nb.API if getattr(nb, n) is not getattr(api, n)]
print("statuses", [o.status for o in first.outcomes], [o.status for o in second.outcomes])
print("shadowed", shadowed)
"""


@pytest.mark.slow
def test_every_api_name_stays_the_function_whatever_is_imported(tmp_path, minilm, mirror):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    argv = [sys.executable, "-c", API_NAMES_SURVIVE_IMPORTS, str(minilm), str(mirror),
            str(tmp_path / "runs")]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "statuses ['evaluated'] ['cached']" in done.stdout
    assert "shadowed []" in done.stdout
