"""balancer=pcgrad: projecting conflicting gradients (Yu, Kumar, Gupta, Levine, Hausman and Finn 2020).

For each task i, in turn for every other task j in a random order: when g_i . g_j < 0 (they
conflict), the component of g_i along g_j is removed, g_i <- g_i - (g_i . g_j) / |g_j|^2 * g_j,
with g_j the original gradient (the paper's Algorithm 1). The shared encoder's update is the
sum of the projected gradients; each task's head keeps its own gradient. The order is drawn
from a generator seeded by (seed, step), so a resumed run and every rank draw the same.
"""

from __future__ import annotations

import numpy as np
import torch

from mtl.train.optim.balancers import register_balancer
from mtl.train.optim.balancers.base import Balancer, Combined


@register_balancer("pcgrad")
class PCGrad(Balancer):
    def combine(self, gradients: torch.Tensor, losses: torch.Tensor, step: int) -> Combined:
        rng = np.random.default_rng([self.seed, step])
        projected = gradients.clone()
        squared = (gradients * gradients).sum(dim=1).clamp_min(1e-20)
        for i in range(len(gradients)):
            for j in rng.permutation(len(gradients)):
                if j == i:
                    continue
                # Only a conflict (a negative dot product) is projected away; without an `if`, so
                # the GPU is not waited for.
                conflict = (projected[i] @ gradients[j]).clamp(max=0)
                projected[i] -= conflict / squared[j] * gradients[j]
        ones = torch.ones(len(gradients), device=gradients.device)
        return Combined(projected.sum(dim=0), ones, self.loss_weights.to(gradients.device))
