"""balancer=gradnorm: GradNorm (Chen, Badrinarayanan, Lee and Rabinovich 2018).

Learned task weights w_i (starting at 1, renormalised after every step to sum to the number of
tasks) scale each task's loss. Per step, with g_i the gradient of task i's loss on the shared
encoder (the paper's W; it takes the last shared layer to save work, mtl has every task's
gradient on the whole encoder already):

    G_i = w_i * |g_i|,   r_i = (L_i / L_i(0)) / mean_j (L_j / L_j(0))
    target_i = mean_j G_j * r_i ** alpha      (a constant: no gradient flows through it)
    L_grad = sum_i |G_i - target_i|,  so  dL_grad/dw_i = sign(G_i - target_i) * |g_i|

A task that trains slower than the others (larger r_i) is pulled towards a larger gradient.
L_i(0) is each task's loss at the run's first mixed step; it and the w_i are saved in checkpoints.
"""

from __future__ import annotations

import torch
from torch import nn

from mtl.train.optim.balancers import GradNormOptions, register_balancer
from mtl.train.optim.balancers.base import Balancer, Combined


@register_balancer("gradnorm", options=GradNormOptions)
class GradNorm(Balancer):
    def __init__(
        self, tasks: list[str], weights: list[float], seed: int = 0, options: GradNormOptions | None = None
    ):
        super().__init__(tasks, weights, seed)
        self.alpha = (options or GradNormOptions()).gradnorm_alpha
        self.task_weights = nn.Parameter(torch.ones(len(tasks)))
        self.register_buffer("initial_losses", torch.full((len(tasks),), float("nan")))

    def combine(self, gradients: torch.Tensor, losses: torch.Tensor, step: int) -> Combined:
        losses = losses.detach().to(self.initial_losses.device, torch.float32)
        if torch.isnan(self.initial_losses).any():
            self.initial_losses.copy_(losses)
        weights = self.task_weights.detach().to(gradients.device)
        norms = gradients.norm(dim=1)
        weighted = weights * norms
        ratios = (losses / self.initial_losses.clamp_min(1e-12)).to(gradients.device)
        targets = weighted.mean() * (ratios / ratios.mean()) ** self.alpha
        self.task_weights.grad = (torch.sign(weighted - targets) * norms).to(self.task_weights.device)
        shared = (weights[:, None] * gradients).sum(dim=0)
        return Combined(shared, weights, weights * self.loss_weights.to(gradients.device))

    @torch.no_grad()
    def after_step(self) -> None:
        """Weights stay positive and sum to the number of tasks (the paper's renormalisation)."""
        self.task_weights.clamp_(min=1e-3)
        self.task_weights.mul_(len(self.tasks) / self.task_weights.sum())
