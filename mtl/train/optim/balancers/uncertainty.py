"""balancer=uncertainty: homoscedastic-uncertainty weights (Kendall, Gal and Cipolla 2018).

Each task i has a learned s_i = log sigma_i^2 (starting at 0). For a classification loss the
paper's likelihood gives (its eq. 10, with 1/sigma^2 for a softmax) the total

    sum_i  exp(-s_i) * w_i * L_i  +  s_i / 2

whose minimum over s_i is at exp(s_i) = 2 w_i L_i: a task with a larger loss gets a smaller
weight, and the s_i / 2 term keeps every weight from falling to 0. The s_i are parameters of the
run's optimizer and are saved in checkpoints. (All of mtl's objectives are softmax
cross-entropies, so the regression form 1/(2 sigma^2) of the paper is not used.)
"""

from __future__ import annotations

import torch
from torch import nn

from mtl.train.optim.balancers import register_balancer
from mtl.train.optim.balancers.base import Balancer, Combined


@register_balancer("uncertainty")
class Uncertainty(Balancer):
    def __init__(self, tasks: list[str], weights: list[float], seed: int = 0):
        super().__init__(tasks, weights, seed)
        self.log_variances = nn.Parameter(torch.zeros(len(tasks)))

    def task_loss(self, index: int, loss: torch.Tensor) -> torch.Tensor:
        precision = torch.exp(-self.log_variances[index])
        return super().task_loss(index, loss) * precision

    def regulariser(self, world_size: int) -> torch.Tensor:
        return self.log_variances.sum() / (2 * world_size)

    def combine(self, gradients: torch.Tensor, losses: torch.Tensor, step: int) -> Combined:
        combined = super().combine(gradients, losses, step)
        precisions = torch.exp(-self.log_variances.detach()).to(gradients.device)
        return Combined(combined.shared, combined.head_scales, combined.weights * precisions)
