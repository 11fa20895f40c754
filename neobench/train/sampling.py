"""One dataset per optimisation step, drawn with probability n_i^alpha / sum_j n_j^alpha, from
(seed, s) alone (why: docs/recipe.md, "Why the batch is global"). accelerate's batch-sampler
sharding hands batch i to rank i % world, so the sampler yields each step's per-rank slices in
a row.
"""

from __future__ import annotations

from itertools import accumulate
from typing import TYPE_CHECKING

import numpy as np
from sentence_transformers.base.sampler import MultiDatasetDefaultBatchSampler

if TYPE_CHECKING:
    from collections.abc import Iterator

    import torch
    from torch.utils.data import BatchSampler, ConcatDataset


def probabilities(sizes: list[int], alpha: float) -> np.ndarray:
    """p_i = n_i^alpha / sum_j n_j^alpha."""
    weights = np.asarray(sizes, dtype=np.float64) ** alpha
    return weights / weights.sum()


def draw(sizes: list[int], alpha: float, seed: int, step: int) -> int:
    """The dataset index of one step: a function of (seed, step) only."""
    rng = np.random.default_rng([seed, step, 0x6E62])
    return int(rng.choice(len(sizes), p=probabilities(sizes, alpha)))


def schedule(sizes: list[int], alpha: float, seed: int, steps: int) -> list[int]:
    return [draw(sizes, alpha, seed, step) for step in range(steps)]


class AlphaBatchSampler(MultiDatasetDefaultBatchSampler):
    """A sentence-transformers multi-dataset batch sampler for the recipe's dataset mixing.
    ``global_batch_size`` is queries per step; each rank gets ``// world_size`` consecutive
    examples of it. Within a dataset, examples follow a permutation of (seed, index, pass)."""

    def __init__(
        self,
        dataset: ConcatDataset,
        batch_samplers: list[BatchSampler],
        generator: torch.Generator | None = None,
        seed: int = 0,
        *,
        global_batch_size: int,
        alpha: float,
        max_steps: int,
        world_size: int = 1,
    ) -> None:
        super().__init__(dataset, batch_samplers, generator, seed)
        if global_batch_size % world_size:
            raise ValueError(
                f"batch size {global_batch_size} is not divisible by {world_size} devices"
            )
        self.global_batch_size = global_batch_size
        self.alpha = alpha
        self.max_steps = max_steps
        self.world_size = world_size
        self.sizes = [len(d) for d in dataset.datasets]

    def __iter__(self) -> Iterator[list[int]]:
        offsets = [0, *accumulate(self.sizes)]
        passes = [0] * len(self.sizes)
        orders = [self._order(i, 0) for i in range(len(self.sizes))]
        cursors = [0] * len(self.sizes)
        per_rank = self.global_batch_size // self.world_size
        for step in range(self.max_steps):
            i = draw(self.sizes, self.alpha, self.seed, step)
            if cursors[i] + self.global_batch_size > self.sizes[i]:
                # Not enough left for a full batch: start the next pass over this dataset.
                passes[i] += 1
                orders[i], cursors[i] = self._order(i, passes[i]), 0
            batch = orders[i][cursors[i] : cursors[i] + self.global_batch_size]
            cursors[i] += self.global_batch_size
            for rank in range(self.world_size):
                yield [offsets[i] + int(j) for j in batch[rank * per_rank : (rank + 1) * per_rank]]

    def _order(self, dataset_index: int, pass_index: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, dataset_index, pass_index, 0x7065])
        return rng.permutation(self.sizes[dataset_index])

    def __len__(self) -> int:
        return self.max_steps * self.world_size
