"""`neobench table --ranks`: ranks with 95% intervals and letter groups from the paired tests
between every two rows (neobench/report/ranks.py), calibrated by simulation
(benchmarks/calibration.py: results with known true differences around the golden runs')."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from conftest import benchmark_script, cli

from neobench.core.errors import NeobenchError
from neobench.report import ranks, stats
from neobench.report.columns import AVG
from neobench.report.leaderboard import leaderboard

calibration = benchmark_script("calibration")


def test_letters_are_shared_exactly_by_the_rows_not_told_apart():
    order = ["a", "b", "c", "d"]
    different = {frozenset(p) for p in (("a", "c"), ("a", "d"), ("b", "d"))}
    assert ranks.compact_letters(order, different) == {"a": "a", "b": "ab", "c": "bc", "d": "c"}
    assert ranks.compact_letters(order, set()) == dict.fromkeys(order, "a")
    rng = np.random.default_rng(0)
    for _ in range(200):  # any pattern of differences: a common letter iff not different
        n = int(rng.integers(2, 8))
        labels = [f"r{i}" for i in range(n)]
        pairs = [frozenset(p) for p in itertools.combinations(labels, 2)]
        chosen = {p for p in pairs if rng.random() < 0.5}
        letters = ranks.compact_letters(labels, chosen)
        for pair in pairs:
            a, b = sorted(pair)
            assert bool(set(letters[a]) & set(letters[b])) == (pair not in chosen), (chosen, pair)


def _sides(truth: list[float], seeds: int = 1, resamples: int = 400) -> dict[str, stats.Side]:
    calibration.register()
    shapes = calibration.golden_shapes()
    settings = stats.Settings(resamples)
    scale = calibration.paired_se(shapes, seeds)
    rng = np.random.default_rng(7)
    return calibration.simulated_sides(rng, shapes, np.asarray(truth) * scale, seeds, settings)


def test_far_rows_get_their_own_rank_and_letter_and_equal_rows_share_them():
    settings = stats.Settings(400)
    names = [s.name for s in calibration.golden_shapes()]
    found = ranks.rank_column(_sides([0.0, 40.0, 80.0]), names, AVG, settings)
    shown = {label: (r.point, r.low, r.high, r.group) for label, r in found.items()}
    assert shown == {"row0": (3, 3, 3, "c"), "row1": (2, 2, 2, "b"), "row2": (1, 1, 1, "a")}
    same = _sides([0.0, 0.0])
    same["row1"] = same["row0"]  # the same run twice: difference 0, p = 1
    found = ranks.rank_column(same, names, AVG, settings)
    assert {(r.low, r.high, r.group) for r in found.values()} == {(1, 2, "a")}


def test_too_few_resamples_for_the_pairs_are_refused_with_the_number_needed():
    assert ranks.least_resamples(10, 0.05) == 900  # 45 pairs: 1/901 < 0.05/45
    ranks.check(10, stats.Settings(900))
    with pytest.raises(NeobenchError, match=r"11 ranked rows make 55 pairs.*--resamples 1,100"):
        ranks.check(11, stats.Settings(1000))


def test_rank_intervals_and_groups_are_calibrated_by_simulation():
    """Known truth, many tables: the intervals hold the true rank, the tied rows share a letter
    at the nominal rate or above, and the far rows are told apart (the tests are not blind).
    Full figures: `python benchmarks/calibration.py` (docs/uncertainty.md, Ranks and groups)."""
    figures = calibration.simulate(repetitions=60, seeds=3, resamples=300)
    assert figures.covered / figures.rows >= 0.93, figures.lines()
    assert figures.tied_share / figures.repetitions >= 0.95, figures.lines()
    assert figures.extremes_apart / figures.repetitions >= 0.7, figures.lines()


def test_table_ranks_in_every_output(golden_runs, tmp_path):
    results = golden_runs / "runs"
    table = leaderboard([results], "MTEB(eng, v1)", ranks=True, per_type=True)
    ranked = [row for row in table.rows if AVG in row.ranks]
    assert len(ranked) == 4 and sorted(r.ranks[AVG].point for r in ranked) == [1, 2, 3, 4]
    for row in ranked:  # the rank agrees with the order of the Avg. cells
        higher = sum(other.avg > row.avg for other in ranked)
        assert row.ranks[AVG].point == 1 + higher
        assert row.ranks[AVG].low <= row.ranks[AVG].point <= row.ranks[AVG].high
    frame = table.to_pandas()
    assert {"rank", "rank_ci_low", "rank_ci_high", "group", "STS_rank", "STS_group"} <= set(frame)
    out = tmp_path / "t.csv"
    cli("table", "--results", results, "--ranks", "--out", out)
    header = next(line for line in out.read_text().splitlines() if not line.startswith("#"))
    assert ",avg,rank,rank_ci_low,rank_ci_high,group," in header


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--per-type"], "--per-type ranks the rows on each task type: give it with --ranks"),
        (["--ranks", "--per-type", "--per-task"], "--per-type with --per-task"),
    ],
)
def test_rank_flags_that_do_not_go_together(flags, message, capsys):
    from neobench.cli.main import main

    assert main(["table", "--results", str(Path(".")), *flags]) != 0
    assert message in capsys.readouterr().err
