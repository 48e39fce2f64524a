"""The balancer contract: what a mixed step asks of the rule that combines its tasks."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class Combined:
    """A balancer's decision for one step."""

    shared: torch.Tensor  # (P,) the shared encoder's gradient
    head_scales: torch.Tensor  # (T,) what each task's head gradient is multiplied by
    weights: torch.Tensor  # (T,) the weight each task's loss had in this update (logged)


class Balancer(nn.Module):
    """The weighted sum: each task's loss times its `<task>.weight`, gradients added.

    A balancer with learned state keeps it in parameters (trained by the run's optimizer) or
    buffers: both are saved in checkpoints, so a resumed run continues exactly.
    """

    # True: after the optimizer's step the mixed step measures each task's loss again on the same
    # batches (a forward without gradients) and hands it to `observe` (FAMO learns from it).
    measures_after_step = False

    def __init__(self, tasks: list[str], weights: list[float], seed: int = 0):
        """`tasks`: the training tasks in order; `weights`: their `<task>.weight`; `seed`: the
        run's (a balancer drawing at random seeds by (seed, step)). A balancer with keys of its
        own (register_balancer(options=)) also takes `options`, an instance of their dataclass."""
        super().__init__()
        self.tasks, self.seed = list(tasks), seed
        self.register_buffer("loss_weights", torch.tensor(weights, dtype=torch.float32), persistent=False)

    def task_loss(self, index: int, loss: torch.Tensor) -> torch.Tensor:
        """What task `index` backpropagates for its (mean) `loss`."""
        return loss * self.loss_weights[index].to(loss.device)

    def regulariser(self, world_size: int) -> torch.Tensor | None:
        """A loss on the balancer's own parameters alone, backpropagated once per step (each rank
        adds 1/world_size of it, as gradients are summed over ranks)."""
        return None

    def combine(self, gradients: torch.Tensor, losses: torch.Tensor, step: int) -> Combined:
        """The update from `gradients` (T, P): each task's gradient of its `task_loss` on the
        shared encoder; `losses` (T,): each task's mean loss (unweighted)."""
        ones = torch.ones(len(self.tasks), device=gradients.device)
        return Combined(gradients.sum(dim=0), ones, self.loss_weights.to(gradients.device))

    def after_step(self) -> None:
        """The optimizer has stepped (a balancer renormalises what it learned here)."""

    def observe(self, losses_after: torch.Tensor) -> None:
        """With `measures_after_step`: each task's mean loss (T,) on this step's batches after the
        update (unweighted, summed over ranks as `losses` are)."""


def pairwise_cosines(gradients: torch.Tensor) -> torch.Tensor:
    """(T, T) cosine of every two tasks' gradients: below 0, they pull the encoder apart."""
    norms = gradients.norm(dim=1).clamp_min(1e-12)
    unit = gradients / norms[:, None]
    return unit @ unit.T
