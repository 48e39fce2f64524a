"""balancer=pcgrad: projecting conflicting gradients (Yu, Kumar, Gupta, Levine, Hausman and Finn 2020),
through TorchJD's PCGrad (the three other Jacobian balancers come from there too).

For each task i, in turn for every other task j in a random order: when g_i . g_j < 0 (they
conflict), the component of g_i along g_j is removed, g_i <- g_i - (g_i . g_j) / |g_j|^2 * g_j,
with g_j the original gradient (the paper's Algorithm 1). The shared encoder's update is the
sum of the projected gradients; each task's head keeps its own gradient. TorchJD computes it as
weights on the rows from their Gramian. Its orders come from torch's CPU generator: here seeded
by (seed, step) inside a fork of it, so a resumed run and every rank draw the same orders, and
the training's own random streams are left as they were.
"""

from __future__ import annotations

import numpy as np
import torch
from torchjd.aggregation import PCGrad as TorchJDPCGrad

from mtl.train.optim.balancers import register_balancer
from mtl.train.optim.balancers.jacobian import Aggregated


@register_balancer("pcgrad")
class PCGrad(Aggregated):
    """TorchJD's PCGrad; the step's orders seeded by (seed, step). Logged weights: each task's
    row weight in the shared update (its gradient's share after the projections)."""

    def __init__(self, tasks: list[str], weights: list[float], seed: int = 0):
        super().__init__(tasks, weights, seed)
        self.aggregator = TorchJDPCGrad()

    def weights(self, gradients: torch.Tensor, step: int) -> torch.Tensor:
        seed = int(np.random.SeedSequence([self.seed, step]).generate_state(1)[0])
        with torch.random.fork_rng(devices=[]):  # the CPU generator only, restored after
            torch.manual_seed(seed)
            return self.aggregator.weighting(gradients)
