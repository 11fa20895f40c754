"""Bootstrap intervals and paired tests on units with known truth (no model, no data needed)."""

import numpy as np
import pytest
from scipy.stats import spearmanr

from neobench import bootstrap, units
from neobench.errors import NeobenchError
from neobench.units import Part, TaskUnits, TypeSpec


def _mean(data, idx, _main):
    return float(data["value"][idx].mean())


def _spearman(data, idx, _main):
    return float(spearmanr(data["pred"][idx], data["gold"][idx]).statistic)


@pytest.fixture(autouse=True)
def _types(monkeypatch):
    specs = {
        "Mean": TypeSpec("query", lambda *a: ([], {}), _mean),
        "STS": TypeSpec("pair", lambda *a: ([], {}), _spearman),
    }
    monkeypatch.setattr(units, "registry", lambda: specs)


def _task(values, name="T", ids=None):
    ids = ids or [f"q{i}" for i in range(len(values))]
    part = Part("default", "test", ids, {"value": np.asarray(values, dtype=float)})
    return TaskUnits(name, "Mean", "ndcg_at_10", "query", [part])


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


def test_holm_adjustment():
    assert bootstrap.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert bootstrap.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_benchmark_draws_over_items_and_over_tasks():
    rng = np.random.default_rng(4)
    tasks = [_task(rng.beta(2, 5, size=80), name=f"T{i}") for i in range(6)]
    items = bootstrap.benchmark_draws(tasks, resamples=300)
    over_tasks = bootstrap.benchmark_draws(tasks, resamples=300, over="tasks")
    mean = np.mean([units.main_score(t) for t in tasks])
    assert items.shape == over_tasks.shape == (300,)
    assert abs(items.mean() - mean) < 0.01 and abs(over_tasks.mean() - mean) < 0.01
    with pytest.raises(NeobenchError, match="--over"):
        bootstrap.benchmark_draws(tasks, over="models")


def test_zero_resamples_is_refused():
    with pytest.raises(NeobenchError, match="--resamples 0"):
        bootstrap.interval(_task([0.1, 0.2]), resamples=0)
