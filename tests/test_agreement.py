"""The table's ▲/▼ against a baseline and compare's `significant` come from one engine
(report/stats.family), so they agree cell by cell: checked on four real rows, one of them a row
of seed replicates, for every task column and Avg."""

from __future__ import annotations

import pytest
from conftest import GOLDEN_BASELINE

from neobench.protocol.config import DEFAULT_BENCHMARK
from neobench.report.columns import AVG, DOWN, UP
from neobench.report.compare import compare
from neobench.report.leaderboard import leaderboard

pytestmark = pytest.mark.slow


def test_table_marks_equal_compare_significance(golden_runs):
    results = [golden_runs / "runs"]
    table = leaderboard(results, DEFAULT_BENCHMARK, per_task=True, baseline=GOLDEN_BASELINE)
    comparison = compare(results, GOLDEN_BASELINE, benchmark=DEFAULT_BENCHMARK)
    rows = {row.label: row for row in table.rows if not row.quoted}
    assert len(rows) >= 4 and any("seeds)" in label for label in rows)
    checked = 0
    for found in comparison.rows:
        row = rows[found.label]
        expected = (UP if found.delta > 0 else DOWN) if found.significant else None
        assert row.marks.get(found.task) == expected, (found.label, found.task)
        checked += 1
    # Every computed row but the baseline, every task it holds and Avg.: nothing left unchecked.
    assert checked == sum(len(r.tasks) + 1 for label, r in rows.items() if label != table.baseline)
    assert {f.task for f in comparison.rows} >= {AVG}
    assert any(f.significant for f in comparison.rows)
    assert any(not f.significant for f in comparison.rows)
