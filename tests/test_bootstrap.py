"""Bootstrap intervals and paired tests on units with known truth (no model, no data needed)."""

import numpy as np
import pytest
from scipy.stats import spearmanr

from neobench.core.errors import NeobenchError
from neobench.evaluation import units
from neobench.evaluation.units import Part, TaskUnits, TypeSpec
from neobench.report import bootstrap


def _mean(data, idx, _main):
    return float(data["value"][idx].mean())


def _spearman(data, idx, _main):
    return float(spearmanr(data["pred"][idx], data["gold"][idx]).statistic)


def _means(data, idx, _main):
    return data["value"][idx].mean(axis=1)


@pytest.fixture(autouse=True)
def _types(monkeypatch):
    specs = {
        "Mean": TypeSpec("query", lambda *a: ([], {}), _mean),
        "STS": TypeSpec("pair", lambda *a: ([], {}), _spearman),
        "Blocks": TypeSpec("query", lambda *a: ([], {}), _mean, score_many=_means),
        # a type whose evaluation leaves units out per model, as mteb's SummEval does
        "Drops": TypeSpec("text", lambda *a: ([], {}), _mean, rows=lambda *a: 0),
    }
    monkeypatch.setattr(units, "registry", lambda: specs)


def _task(values, name="T", ids=None, kind="Mean", rows=None):
    ids = ids or [f"q{i}" for i in range(len(values))]
    part = Part("default", "test", ids, {"value": np.asarray(values, dtype=float)}, rows=rows)
    return TaskUnits(name, kind, "ndcg_at_10", "query", [part])


def test_interval_covers_the_truth_about_95_percent_of_the_time():
    # Per-query scores from Beta(2, 5): the true mean is 2/7. 2,000 simulated test sets of 300
    # queries (the coverage estimate's own standard error is then 0.5 points; generator seeds
    # 1-3 gave 93.7%, 95.1%, 94.1%: the percentile interval runs slightly short, as expected).
    rng = np.random.default_rng(1)
    truth, covered, draws = 2 / 7, 0, 2000
    for i in range(draws):
        found = bootstrap.interval(_task(rng.beta(2, 5, size=300)), resamples=500, seed=i)
        covered += found.low <= truth <= found.high
    assert 0.93 <= covered / draws <= 0.97


def test_spearman_interval_holds_its_point_and_is_seeded():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 2)) @ np.linalg.cholesky([[1, 0.6], [0.6, 1]]).T
    part = Part("default", "test", [str(i) for i in range(200)], {"pred": x[:, 0], "gold": x[:, 1]})
    task = TaskUnits("STSB", "STS", "cosine_spearman", "pair", [part])
    first = bootstrap.interval(task, resamples=300, seed=1)
    assert first.low < first.point < first.high
    assert first.point == pytest.approx(spearmanr(x[:, 0], x[:, 1]).statistic)
    assert bootstrap.interval(task, resamples=300, seed=1) == first  # same seed, same numbers
    assert bootstrap.interval(task, resamples=300, seed=2) != first


def test_a_model_against_itself_is_never_different():
    rng = np.random.default_rng(0)
    values = rng.beta(2, 5, size=150)
    result = bootstrap.paired(_task(values), _task(values.copy()), resamples=500)
    assert (result.delta, result.low, result.high, result.p) == (0.0, 0.0, 0.0, 1.0)


def test_a_clearly_worse_model_is_significant_and_the_sign_is_right():
    rng = np.random.default_rng(1)
    good = rng.beta(5, 2, size=200)
    worse = np.clip(good - 0.05 + rng.normal(0, 0.05, size=200), 0, 1)
    result = bootstrap.paired(_task(good), _task(worse), resamples=1000)
    assert result.delta < 0 and result.high < 0 and result.p < 0.01
    # A tiny noise-only difference is not significant.
    same = np.clip(good + rng.normal(0, 0.02, size=200), 0, 1)
    assert bootstrap.paired(_task(good), _task(same), resamples=1000).p > 0.05


def test_units_are_paired_by_id_not_position():
    rng = np.random.default_rng(2)
    values = rng.beta(2, 5, size=50)
    ids = [f"q{i}" for i in range(50)]
    order = rng.permutation(50)
    shuffled = _task(values[order], ids=[ids[i] for i in order])
    result = bootstrap.paired(_task(values, ids=ids), shuffled, resamples=200)
    assert result.delta == 0.0 and result.p == 1.0 and result.low == result.high == 0.0


def test_different_items_are_refused():
    with pytest.raises(NeobenchError, match="different items"):
        bootstrap.paired(_task([0.1, 0.2, 0.3]), _task([0.1, 0.2, 0.3], ids=["a", "b", "c"]))


def test_units_one_model_left_out_are_left_out_of_both():
    """SummEval-like: mteb drops, per model, the texts it scores all alike; the two are paired
    on the texts both kept, each score recomputed on those."""
    rng = np.random.default_rng(5)
    values = rng.beta(2, 5, size=60)
    ids = [str(i) for i in range(60)]
    base = _task(values, ids=ids, kind="Drops", rows=60)
    keep = [i for i in range(60) if i not in (3, 17, 40)]
    other = _task(values[keep] + 0.01, ids=[ids[i] for i in keep], kind="Drops", rows=60)
    pair = bootstrap.shared(base, other)
    assert (pair.only_baseline, pair.only_other, pair.dropped) == (3, 0, 3)
    assert pair.baseline.parts[0].ids == pair.other.parts[0].ids == [ids[i] for i in keep]
    result = bootstrap.paired(base, other, resamples=300)
    assert result.baseline == pytest.approx(values[keep].mean())
    assert result.delta == pytest.approx(0.01) and result.low == pytest.approx(0.01)
    # Both sides may miss some; the shared ones are paired in the baseline's order.
    mixed = _task(values[::-1][:50], ids=ids[::-1][:50], kind="Drops", rows=60)
    pair = bootstrap.shared(other, mixed)
    assert (pair.only_baseline, pair.only_other) == (9, 2)  # 0-9 but 3; 17 and 40
    assert pair.other.parts[0].ids == pair.baseline.parts[0].ids
    assert np.array_equal(
        pair.other.parts[0].data["value"], values[[int(u) for u in pair.other.parts[0].ids]]
    )
    # A model against itself: still exactly nothing.
    same = bootstrap.paired(other, _task(values[keep] + 0.01, ids=[ids[i] for i in keep],
                                         kind="Drops", rows=60), resamples=300)  # fmt: skip
    assert (same.delta, same.low, same.high, same.p) == (0.0, 0.0, 0.0, 1.0)


@pytest.mark.parametrize(
    ("kind", "rows", "other_ids"),
    [
        ("Mean", (60, 60), [str(i) for i in range(1, 60)]),  # a type that never drops units
        ("Drops", (60, 80), [str(i) for i in range(1, 60)]),  # other data: more texts
        ("Drops", (60, 60), [f"x{i}" for i in range(59)]),  # nothing shared
    ],
)
def test_units_that_differ_otherwise_are_still_refused(kind, rows, other_ids):
    values = np.linspace(0, 1, 60)
    base = _task(values, ids=[str(i) for i in range(60)], kind=kind, rows=rows[0])
    other = _task(values[1:], ids=other_ids, kind=kind, rows=rows[1])
    with pytest.raises(NeobenchError, match="computed on different items"):
        bootstrap.paired(base, other)


def test_blocks_of_resamples_give_the_same_draws_as_one_at_a_time():
    values = np.random.default_rng(6).beta(2, 5, size=90)
    blocks = bootstrap.task_draws(_task(values, kind="Blocks"), resamples=50, seed=3)
    one_by_one = bootstrap.task_draws(_task(values), resamples=50, seed=3)
    assert np.allclose(blocks, one_by_one, rtol=0, atol=1e-15)


def test_aggregate_is_the_mean_over_subtasks_and_resamples_within_each():
    """CQADupstack-like: subtask A has two parts, B one; mteb averages A's parts, then A and B."""
    rng = np.random.default_rng(7)
    parts = [
        Part("en", "test", ["a", "b", "c"], {"value": np.array([0.1, 0.2, 0.3])}, subtask="A"),
        Part("de", "test", ["a", "b"], {"value": np.array([0.5, 0.7])}, subtask="A"),
        Part("default", "test", ["q1", "q2"], {"value": rng.random(2)}, subtask="B"),
    ]
    agg = TaskUnits("Agg", "Mean", "ndcg_at_10", "query", parts)
    b = parts[2].data["value"].mean()
    assert units.main_score(agg) == pytest.approx(((0.2 + 0.6) / 2 + b) / 2)
    draws = bootstrap.task_draws(agg, resamples=40, seed=1)
    per_part = [
        [_mean(p.data, row, "") for row in bootstrap._indices(agg, i, 40, 1)]
        for i, p in enumerate(parts)
    ]
    expected = ((np.asarray(per_part[0]) + per_part[1]) / 2 + per_part[2]) / 2
    assert np.allclose(draws, expected, rtol=0, atol=1e-15)
    other = TaskUnits("Agg", "Mean", "ndcg_at_10", "query", [*parts[:2], Part(
        "default", "test", ["q1", "q2"], {"value": np.zeros(2)}, subtask="C")])  # fmt: skip
    with pytest.raises(NeobenchError, match="different subsets or splits"):
        bootstrap.paired(agg, other)


def test_holm_adjustment():
    assert bootstrap.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert bootstrap.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_zero_resamples_is_refused():
    with pytest.raises(NeobenchError, match="--resamples 0"):
        bootstrap.interval(_task([0.1, 0.2]), resamples=0)


def test_draws_in_blocks_are_the_draws_of_one_call(monkeypatch):
    """Resamples drawn a few rows at a time (bounded memory) are the ones drawn all at once."""
    values = np.random.default_rng(8).beta(2, 5, size=70)
    task = _task(values)
    monkeypatch.setattr(bootstrap, "BLOCK", 3 * 70 + 5)  # 3 rows a block, a short last one
    draws = bootstrap.task_draws(task, resamples=20, seed=4)
    at_once = [_mean(task.parts[0].data, row, "") for row in bootstrap._indices(task, 0, 20, 4)]
    assert draws.tolist() == at_once
