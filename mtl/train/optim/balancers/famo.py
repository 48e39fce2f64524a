"""balancer=famo: Fast Adaptive Multitask Optimization (Liu, Liu, Jin, Stone and Liu, NeurIPS 2023).

FAMO balances the tasks' rates of loss decrease at O(1) cost: no task's gradient is compared
with another's, only its loss. Task logits xi (starting at 0) give weights z = softmax(xi), and
each step descends

    sum_i z_i * log(L_i - L_i* + eps) / c,    c = sum_i z_i / (L_i - L_i* + eps)  (a constant)

so task i's gradient enters the update with weight a_i = z_i / (c * (L_i - L_i* + eps)); the a_i
sum to 1. L_i* = 0 and eps = 1e-8, as in the authors' code (every mtl loss is a cross-entropy,
never below 0). After the optimizer's step the losses are measured again on the same batches,
without gradients, and the logits take one Adam step (lr `famo_w_lr`, L2 weight decay
`famo_gamma`) along the gradient of z . delta with delta_i = log L_i(before) - log L_i(after):
a task whose loss fell less than the others' gains weight. That is the authors' `FAMO.update`
(github.com/Cranial-XIX/FAMO, famo.py), which LibMTL's FAMO copies; both defaults are the
authors' (LibMTL's example uses famo_gamma=0.001). The authors clip the update's norm at 1
(`max_norm`): in mtl that is the run's own `max_grad_norm=` (docs/training.md).

The logits and Adam's moments are buffers, saved in checkpoints, so a resumed run continues
exactly. Adam is written out rather than kept as a torch optimizer: the run's checkpoint holds
the balancer's buffers, and the update is four lines of torch.optim.Adam's own arithmetic
(tested equal to the authors' class, torch.optim.Adam inside, to 1e-6).
"""

from __future__ import annotations

import torch

from mtl.train.optim.balancers import FAMOOptions, register_balancer
from mtl.train.optim.balancers.base import Balancer, Combined

EPSILON = 1e-8  # the authors' floor under L_i - L_i*
BETAS, ADAM_EPSILON = (0.9, 0.999), 1e-8  # torch.optim.Adam's defaults, which the authors keep


@register_balancer("famo", options=FAMOOptions)
class FAMO(Balancer):
    measures_after_step = True  # the mixed step hands `observe` each task's loss after the update

    def __init__(
        self, tasks: list[str], weights: list[float], seed: int = 0, options: FAMOOptions | None = None
    ):
        super().__init__(tasks, weights, seed)
        options = options or FAMOOptions()
        self.learning_rate, self.gamma = options.famo_w_lr, options.famo_gamma
        count = len(tasks)
        self.register_buffer("logits", torch.zeros(count))
        self.register_buffer("first_moment", torch.zeros(count))
        self.register_buffer("second_moment", torch.zeros(count))
        self.register_buffer("updates", torch.zeros((), dtype=torch.int64))
        self.register_buffer("losses_before", torch.full((count,), float("nan")))

    def combine(self, gradients: torch.Tensor, losses: torch.Tensor, step: int) -> Combined:
        losses = losses.detach().to(self.logits.device, torch.float32)
        self.losses_before.copy_(losses)
        shares = torch.softmax(self.logits, dim=0)
        distances = losses + EPSILON  # L_i - L_i* with L_i* = 0
        constant = (shares / distances).sum()
        weights = (shares / (constant * distances)).to(gradients.device)
        shared = (weights[:, None] * gradients).sum(dim=0)
        return Combined(shared, weights, weights * self.loss_weights.to(gradients.device))

    @torch.no_grad()
    def observe(self, losses_after: torch.Tensor) -> None:
        """One Adam step of the logits from each task's loss before and after this step's update."""
        after = losses_after.detach().to(self.logits.device, torch.float32)
        decrease = (self.losses_before + EPSILON).log() - (after + EPSILON).log()
        shares = torch.softmax(self.logits, dim=0)
        # d(z . delta)/d(xi): the softmax's Jacobian applied to delta, z * (delta - z . delta)
        gradient = shares * (decrease - (shares * decrease).sum()) + self.gamma * self.logits
        self.updates += 1
        beta1, beta2 = BETAS
        self.first_moment.mul_(beta1).add_(gradient, alpha=1 - beta1)
        self.second_moment.mul_(beta2).addcmul_(gradient, gradient, value=1 - beta2)
        # the bias corrections on the device: no wait for the GPU in the step (torch's Adam reads
        # its step count on the host instead; the same arithmetic)
        count = self.updates.double()  # in float64, as torch's Adam computes them on the host
        step_size = (self.learning_rate / (1 - beta1**count)).to(self.logits.dtype)
        correction = (1 - beta2**count).sqrt().to(self.logits.dtype)
        denominator = (self.second_moment.sqrt() / correction).add_(ADAM_EPSILON)
        self.logits.sub_(step_size * (self.first_moment / denominator))
