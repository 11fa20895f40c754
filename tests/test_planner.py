"""`neobench plan`: the seeds planner (neobench/report/planner.py), its power model against the
paired test by simulation (benchmarks/calibration.py), and a study's dry run with a pilot."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from conftest import REPO, benchmark_script, cli

from neobench.core.errors import NeobenchError
from neobench.report import planner, stats
from neobench.report.columns import AVG

calibration = benchmark_script("calibration")
TWO_SEEDS = "golden/tiny-bert"  # the golden runs' row of two seeds


def test_power_rises_with_the_difference_and_the_seeds_and_is_alpha_at_none():
    items_only = planner.Noise(seed_sd=0.0, item_sd=1.0, paired=True)
    assert planner.power(items_only, 0.0, 1) == pytest.approx(0.05, abs=1e-9)
    noisy = planner.Noise(seed_sd=2.0, item_sd=0.5, paired=True)
    assert (
        planner.power(noisy, 1.0, 3) < planner.power(noisy, 2.0, 3) < planner.power(noisy, 2.0, 10)
    )
    # Three seeds: the bootstrap sees 2/3 of their variance, so it calls too much significant.
    assert planner.power(noisy, 0.0, 3) > 0.07
    found = planner.detectable(noisy, 5)
    assert planner.power(noisy, found, 5) == pytest.approx(0.8, abs=1e-3)
    needed = planner.seeds_for(noisy, 2.0)
    assert needed is not None
    assert planner.power(noisy, 2.0, needed) >= 0.8 > planner.power(noisy, 2.0, needed - 1)
    # The items alone hide a difference this small whatever the seeds: more items would show it.
    assert planner.seeds_for(planner.Noise(0.1, 3.0, True), 1.0) is None


@pytest.mark.parametrize("seed_scale", [1.0, calibration.SEED_SCALE])
def test_the_planned_power_is_the_simulated_power_of_the_paired_test(seed_scale):
    """The difference the planner calls detectable at 80% on the design's noise, tested over
    simulated experiments with the paired test on Avg.: within 5 points (the golden seed spread,
    and one 20 times larger, where seeds matter)."""
    figures = calibration.planner_check(repetitions=250, seeds=3, resamples=200,
                                        seed_scale=seed_scale, null=False)  # fmt: skip
    assert figures.predicted == pytest.approx(0.8, abs=0.005)
    assert abs(figures.simulated - figures.predicted) <= 0.05, figures.lines()


@pytest.mark.parametrize("seed_scale", [1.0, calibration.SEED_SCALE])
def test_a_pilot_measures_the_design_s_noise(seed_scale):
    """A simulated pilot of two rows and ten seeds, measured as `neobench plan` measures a real
    one: each part of the noise within 20% of the design's."""
    calibration.register()
    shapes = tuple(s.with_seed_sd(seed_scale) for s in calibration.golden_shapes())
    truth = calibration.true_noise(shapes)
    found = calibration._pilot_noise(np.random.default_rng(0), shapes, 10, stats.Settings(400))
    for part in ("seed_sd", "item_sd", "seed_item_sd"):
        assert getattr(found, part) == pytest.approx(getattr(truth, part), rel=0.2), part


def test_plan_on_a_two_seed_run(golden_runs, capsys):
    cli("plan", "--results", golden_runs / "runs", "--models", TWO_SEEDS, "--delta", "0.5")
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith(f"Pilot: {TWO_SEEDS} ") and "4 tasks" in lines[0]
    assert lines[1].split()[:3] == ["column", "seed", "sd"]
    assert [line.split()[0] for line in lines[2:]] == [
        AVG,
        "STS",
        "Summarization",
        "Classification",
    ]
    assert "an upper bound" in captured.err  # one row: the pairing's gain is unknown
    found = planner.plan_seeds([golden_runs / "runs"], "MTEB(eng, v1)", delta=0.5)
    avg = found.columns[0]
    assert avg.column == AVG and avg.noise.paired and avg.power is not None
    assert list(found.to_pandas()["column"]) == [AVG, "STS", "Summarization", "Classification"]


def test_a_pilot_without_seed_replicates_or_a_bad_question_is_refused(golden_runs):
    with pytest.raises(NeobenchError, match="no row of seed replicates"):
        planner.plan_seeds([golden_runs / "runs"], "MTEB(eng, v1)", models=["golden/MiniLM"])
    with pytest.raises(NeobenchError) as error:
        planner.plan_seeds([golden_runs / "runs"], "MTEB(eng, v1)", seeds=0, delta=-1)
    assert len(error.value.problems) == 2  # both at once


def test_a_study_s_dry_run_plans_its_seeds_on_the_pilot_it_holds(golden_runs, tmp_path, capsys):
    output = tmp_path / "out"
    shutil.copytree(golden_runs / "runs", output)
    cli("study", "run", REPO / "studies" / "tiny.yaml", "--output", output, "--dry-run")
    err = capsys.readouterr().err
    assert "Seeds planner, the study's results as a pilot:" in err
    assert "detectable (1 seeds)" in err  # studies/tiny.yaml fine-tunes one seed per backbone
