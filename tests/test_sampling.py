import numpy as np
import pytest
from torch.utils.data import BatchSampler, ConcatDataset, SequentialSampler

from neobench.train.sampling import AlphaBatchSampler, draw, probabilities, schedule


def test_frequencies_match_size_to_the_alpha():
    sizes = [100, 400, 1_600, 10_000]
    expected = np.sqrt(sizes) / np.sqrt(sizes).sum()
    assert probabilities(sizes, 0.5) == pytest.approx(expected)
    steps = schedule(sizes, 0.5, seed=0, steps=20_000)
    observed = np.bincount(steps, minlength=len(sizes)) / len(steps)
    # Binomial standard error at 20k draws is <= 0.0036; allow ~3 sigma.
    assert np.abs(observed - expected).max() < 0.011
    assert np.abs(observed - np.array(sizes) / sum(sizes)).max() > 0.2  # not proportional to size


def test_draw_depends_only_on_seed_and_step():
    sizes = [10, 20, 30]
    assert [draw(sizes, 0.5, 7, s) for s in range(50)] == schedule(sizes, 0.5, 7, 50)
    assert schedule(sizes, 0.5, 7, 50) != schedule(sizes, 0.5, 8, 50)
    assert schedule(sizes, 0.5, 7, 80)[:50] == schedule(sizes, 0.5, 7, 50)  # a longer run extends


def _sampler(world: int, steps: int = 30) -> AlphaBatchSampler:
    parts = [list(range(n)) for n in (40, 90, 300)]
    inner = [BatchSampler(SequentialSampler(p), batch_size=12, drop_last=False) for p in parts]
    return AlphaBatchSampler(
        ConcatDataset(parts),
        inner,
        seed=3,
        global_batch_size=12,
        alpha=0.5,
        max_steps=steps,
        world_size=world,
    )


def test_every_rank_gets_its_slice_of_the_same_global_batch():
    single = list(_sampler(1))
    double = list(_sampler(2))
    assert len(single) == 30 and len(double) == 60
    for step, batch in enumerate(single):
        rank0, rank1 = double[2 * step], double[2 * step + 1]
        assert rank0 + rank1 == batch  # the slices, in order, are the single-device batch
        assert len(rank0) == len(rank1) == 6
    offsets = [0, 40, 130, 430]
    for batch in single:  # one dataset per step
        owners = {next(i for i in range(3) if offsets[i] <= j < offsets[i + 1]) for j in batch}
        assert len(owners) == 1


def test_uneven_split_is_refused():
    with pytest.raises(ValueError, match="not divisible"):
        _sampler(5)
