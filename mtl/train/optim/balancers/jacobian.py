"""balancer=upgrad and balancer=aligned: aggregators of the tasks' gradients from TorchJD
(Quinton and Rey-Torres's `torchjd`, a maintained library of Jacobian-descent aggregators), used
as TorchJD's own `mtl_backward` uses them: the Jacobian is the tasks' gradients on the shared
encoder (mtl's `gradients`, one row per task), the aggregator's weights combine its rows, and
each task's head keeps its own gradient unscaled.

- `upgrad` (Quinton and Rey-Torres 2024, "Jacobian Descent for Multi-Objective Optimization"):
  each task's gradient projected onto the dual cone of all of them (no task's loss increases to
  first order), the projections averaged; a quadratic program per task on the T x T Gramian
  (quadprog, in float64 on the host). Its update is on the scale of the mean gradient, 1/T of
  `sum`'s, as in TorchJD.
- `aligned` (Senushkin, Patakin, Kuznetsov and Konushin, CVPR 2023, "Independent Component
  Alignment for Multi-Task Learning", Algorithm 1): the gradients' matrix made orthogonal with
  equal singular values (the condition number 1), scaled by the smallest singular value
  (`aligned_scale=min`; `median`, or `rmse` as the authors' released code had it), averaged.

Neither keeps state between steps, so resume is exact by construction; every rank sees the same
all-reduced gradients, so every rank computes the same weights.
"""

from __future__ import annotations

import torch
from torchjd.aggregation import AlignedMTL as TorchJDAlignedMTL
from torchjd.aggregation import GramianWeightedAggregator
from torchjd.aggregation import UPGrad as TorchJDUPGrad

from mtl.train.optim.balancers import AlignedOptions, register_balancer
from mtl.train.optim.balancers.base import Balancer, Combined


class Aggregated(Balancer):
    """A TorchJD aggregator's weights on the shared encoder's rows; heads unscaled."""

    aggregator: GramianWeightedAggregator  # set by each subclass; holds no state

    def combine(self, gradients: torch.Tensor, losses: torch.Tensor, step: int) -> Combined:
        weights = self.aggregator.weighting(gradients).to(gradients.device, gradients.dtype)
        ones = torch.ones(len(self.tasks), device=gradients.device)
        return Combined(weights @ gradients, ones, weights * self.loss_weights.to(gradients.device))


@register_balancer("upgrad")
class UPGrad(Aggregated):
    def __init__(self, tasks: list[str], weights: list[float], seed: int = 0):
        super().__init__(tasks, weights, seed)
        self.aggregator = TorchJDUPGrad()


@register_balancer("aligned", options=AlignedOptions)
class AlignedMTL(Aggregated):
    def __init__(
        self, tasks: list[str], weights: list[float], seed: int = 0, options: AlignedOptions | None = None
    ):
        super().__init__(tasks, weights, seed)
        self.aggregator = TorchJDAlignedMTL(scale_mode=(options or AlignedOptions()).aligned_scale)
