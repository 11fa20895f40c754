"""A units file is used for an interval or a test only when it gives back the stored score.

On a copy of the golden runs (conftest.golden_runs: real MiniLM and tiny-BERT results with units),
one task's units file of one row is altered (its predictions reordered or rescored, as an edit or a
mix-up would) or cut short (as a half-written file would be), for an STS, a Classification and a
Summarization task: `table --ci` shows that cell without an interval and a note naming the file,
`compare` refuses with the same message, and no number is computed from the damaged file. Two
checks, each tested: the sha256 the run card recorded when eval wrote the file, and (for a card
without one) the main score recomputed from the units against the stored result. Both are
type-agnostic (report/verified.py), so these three kinds stand for the others. Values that make
a number meaningless (a handful of resamples, a negative seed) are refused before anything is
read.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import yaml
from conftest import GOLDEN_BASELINE

from neobench.cli.main import main
from neobench.core import results
from neobench.evaluation import units
from neobench.protocol.config import DEFAULT_BENCHMARK
from neobench.report.leaderboard import leaderboard

pytestmark = pytest.mark.slow
ROW = "golden/MiniLM-ft"


def _alter(data: dict, kind: str) -> None:
    """Predictions that no longer give the stored score: reordered, or rescored."""
    for part in data["parts"]:
        arrays = part["data"]
        if kind == "STS":
            arrays["pred"] = arrays["pred"][::-1]
        elif kind == "Classification":
            arrays["gold"] = arrays["gold"][::-1]
        else:
            arrays["term"] = [-t for t in arrays["term"]]


@pytest.fixture
def copied(golden_runs, tmp_path):
    root = tmp_path / "runs"
    shutil.copytree(golden_runs / "runs", root)
    return root


def _units_file(root, task, digest=True):
    """The row's units file of ``task``; ``digest=False`` first removes the sha256 its run card
    recorded (a card written before cards recorded one)."""
    [folder] = [f for f in results.run_folders(root) if "golden__MiniLM-ft" in str(f)]
    if not digest:
        for card in results.card_paths(folder):
            data = yaml.safe_load(card.read_text())
            for entry in data["tasks"].values():
                entry.pop("units_sha256", None)
            card.write_text(yaml.safe_dump(data, sort_keys=False))
    return results.units_path(folder, task)


WHY = {True: "changed since `neobench eval` wrote it", False: "stored result"}


@pytest.mark.parametrize("digest", [True, False], ids=["digest", "recomputed"])
@pytest.mark.parametrize(
    ("task", "kind"),
    [("STS16", "STS"), ("AmazonCounterfactualClassification", "Classification"),
     ("SummEval", "Summarization")],
)  # fmt: skip
def test_altered_units_give_no_interval_and_no_test(copied, task, kind, digest, capsys):
    path = _units_file(copied, task, digest)
    before = units.main_score(units.read(path))
    data = json.loads(path.read_text())
    _alter(data, kind)
    path.write_text(json.dumps(data))
    assert abs(units.main_score(units.read(path)) - before) > 1e-3  # the edit changed the score

    table = leaderboard(
        [copied], DEFAULT_BENCHMARK, per_task=True, ci=True, baseline=GOLDEN_BASELINE
    )
    row = next(r for r in table.rows if r.label.startswith(ROW))
    assert task not in row.ci and task not in row.marks
    assert "Avg." not in row.ci  # Avg. averages the task: no interval either
    other = next(r for r in table.rows if r.label.startswith("golden/tiny-bert-b"))
    assert task in other.ci  # the other rows keep theirs
    assert any(str(path) in note and WHY[digest] in note for note in table.notes)

    code = main(["compare", "--results", str(copied), "--baseline", GOLDEN_BASELINE])
    err = " ".join(capsys.readouterr().err.split())  # rich wraps long lines
    assert code != 0 and path.name in err and WHY[digest] in err and "Traceback" not in err


@pytest.mark.parametrize("digest", [True, False], ids=["digest", "parsed"])
def test_truncated_units_file_is_named(copied, digest, capsys):
    path = _units_file(copied, "BIOSSES", digest)
    why = WHY[True] if digest else "not complete JSON"
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    table = leaderboard([copied], DEFAULT_BENCHMARK, per_task=True, ci=True)
    row = next(r for r in table.rows if r.label.startswith(ROW))
    assert "BIOSSES" not in row.ci
    assert any(str(path) in note and why in note for note in table.notes)
    code = main(["compare", "--results", str(copied), "--baseline", GOLDEN_BASELINE])
    err = " ".join(capsys.readouterr().err.split())
    assert code != 0 and why in err and "Traceback" not in err


def test_intact_units_are_used(golden_runs):
    table = leaderboard([golden_runs / "runs"], DEFAULT_BENCHMARK, per_task=True, ci=True)
    row = next(r for r in table.rows if r.label.startswith(ROW))
    assert {"BIOSSES", "STS16", "SummEval", "AmazonCounterfactualClassification"} <= row.ci.keys()
    assert not any("units file" in note for note in table.notes)
    assert np.isfinite([low for low, _ in row.ci.values()]).all()


@pytest.mark.parametrize("command", ["table", "compare"])
@pytest.mark.parametrize(
    ("flags", "expected"),
    [(["--resamples", "1"], "--resamples 1: at least 100"), (["--seed", "-5"], "--seed -5")],
)
def test_meaningless_settings_are_refused(golden_runs, command, flags, expected, capsys):
    extra = ["--ci"] if command == "table" else []
    code = main([command, "--results", str(golden_runs / "runs"), "--baseline", GOLDEN_BASELINE,
                 *extra, *flags])  # fmt: skip
    err = capsys.readouterr().err
    assert code != 0 and expected in err and "Traceback" not in err


def test_a_deleted_run_card_is_named_with_where_it_was_and_the_fix(copied, capsys):
    # A result whose run card is gone has unknown conditions: table and compare name the card,
    # not the "unknown" conditions it leaves (compare said they were not identical).
    [folder] = [f for f in results.run_folders(copied) if "golden__tiny-bert-b" in str(f)]
    for card in results.card_paths(folder):
        card.unlink()
    result = results.task_path(folder, "BIOSSES")

    table = leaderboard([copied], DEFAULT_BENCHMARK)
    [note] = [n for n in table.notes if str(result) in n]
    assert note.startswith("golden/tiny-bert-b")
    assert "run card" in note and "missing" in note and str(folder / "neobench") in note
    assert "Re-run the same `neobench eval`" in note
    # One note per task of that row only: the other rows' cards are there.
    named = [n for n in table.notes if "run card of the" in n]
    assert len(named) == 4 and all(n.startswith("golden/tiny-bert-b [") for n in named)

    code = main(["compare", "--results", str(copied), "--baseline", GOLDEN_BASELINE,
                 "--models", "golden/tiny-bert-b"])  # fmt: skip
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "Traceback" not in err
    assert "run card of the `neobench eval` that wrote it is missing" in err
    assert "not evaluated under identical conditions" not in err
