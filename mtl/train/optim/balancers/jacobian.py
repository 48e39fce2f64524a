"""balancer=upgrad, balancer=aligned and balancer=nash: aggregators of the tasks' gradients from TorchJD
(Quinton and Rey-Torres's `torchjd`, a maintained library of Jacobian-descent aggregators), used
as TorchJD's own `mtl_backward` uses them: the Jacobian is the tasks' gradients on the shared
encoder (mtl's `gradients`, one row per task), the aggregator's weights combine its rows, and
each task's head keeps its own gradient unscaled (nash: scaled by the task's alpha, as the
authors' weighted loss scales it).

- `upgrad` (Quinton and Rey-Torres 2024, "Jacobian Descent for Multi-Objective Optimization"):
  each task's gradient projected onto the dual cone of all of them (no task's loss increases to
  first order), the projections averaged; a quadratic program per task on the T x T Gramian
  (quadprog, in float64 on the host). Its update is on the scale of the mean gradient, 1/T of
  `sum`'s, as in TorchJD.
- `aligned` (Senushkin, Patakin, Kuznetsov and Konushin, CVPR 2023, "Independent Component
  Alignment for Multi-Task Learning", Algorithm 1): the gradients' matrix made orthogonal with
  equal singular values (the condition number 1), scaled by the smallest singular value
  (`aligned_scale=min`; `median`, or `rmse` as the authors' released code had it), averaged.
- `nash` (Navon, Shamsian, Achituve, Maron, Kawaguchi, Chechik and Fetaya, ICML 2022, "Multi-Task
  Learning as a Bargaining Game", Algorithm 1): the weights alpha solving G^T G alpha = 1/alpha
  (the Nash bargaining solution), found by `nash_optim_niter=20` convex-concave iterations of
  cvxpy's ECOS on the normalized Gramian, warm-started from the last step's alpha, every
  `nash_update_every=1` steps; the combination capped at norm `nash_max_norm=1` (the authors'
  defaults, as TorchJD ports them).

upgrad and aligned keep no state between steps, so resume is exact by construction. nash keeps
its last alpha and its count of calls (TorchJD holds them as NumPy attributes): they are this
balancer's buffers, saved in checkpoints and handed back to TorchJD before every call, so a
resumed run solves from the same start. Every rank sees the same all-reduced gradients, so every
rank computes the same weights.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torchjd.aggregation import AlignedMTL as TorchJDAlignedMTL
from torchjd.aggregation import UPGrad as TorchJDUPGrad
from torchjd.aggregation import WeightedAggregator

from mtl.console import say
from mtl.errors import UserError
from mtl.train.optim.balancers import AlignedOptions, NashOptions, register_balancer
from mtl.train.optim.balancers.base import Balancer, Combined


class Aggregated(Balancer):
    """A TorchJD aggregator's weights on the shared encoder's rows; heads unscaled."""

    aggregator: WeightedAggregator  # set by each subclass (upgrad, aligned: no state; nash: its own)

    def weights(self, gradients: torch.Tensor, step: int) -> torch.Tensor:
        """(T,) the weighting of the tasks' gradient rows at `step` (pcgrad seeds its orders by it)."""
        return self.aggregator.weighting(gradients)

    def combine(self, gradients: torch.Tensor, losses: torch.Tensor, step: int) -> Combined:
        weights = self.weights(gradients, step).to(gradients.device, gradients.dtype)
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


@register_balancer("nash", options=NashOptions)
class NashMTL(Aggregated):
    """TorchJD's Nash-MTL weighting (ported from the authors' code) with its state in buffers."""

    def __init__(
        self, tasks: list[str], weights: list[float], seed: int = 0, options: NashOptions | None = None
    ):
        super().__init__(tasks, weights, seed)
        options = options or NashOptions()
        try:
            from torchjd.aggregation import NashMTL as TorchJDNashMTL

            self.aggregator = TorchJDNashMTL(
                len(tasks), options.nash_max_norm, options.nash_update_every, options.nash_optim_niter
            )
        except ImportError:
            raise UserError(
                "balancer=nash needs cvxpy and ECOS, which mtl's install brings: pip install 'torchjd[nash-mtl]'"
            ) from None
        # TorchJD's state, kept here so that checkpoints carry it: the alpha the next solve starts
        # from (float64, as cvxpy returns it) and how many times the weighting has been called.
        self._said: set[str] = set()  # the solver's warnings already said
        self.register_buffer("nash_alpha", torch.ones(len(tasks), dtype=torch.float64))
        self.register_buffer("nash_calls", torch.zeros((), dtype=torch.int64))

    def weights(self, gradients: torch.Tensor, step: int) -> torch.Tensor:
        weighting = self.aggregator.weighting
        weighting.prvs_alpha = self.nash_alpha.cpu().numpy().copy()
        weighting.step = float(self.nash_calls.item())
        if weighting.step > 0 and not hasattr(weighting, "prob"):
            # TorchJD builds its cvxpy problem on its first call only; a resumed run builds it here,
            # the same problem (every parameter is set again before each solve).
            weighting._init_optim_problem()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            weights = weighting(gradients)
        for warning in caught:  # cvxpy's, once each, above the bar (they were written onto it)
            message = str(warning.message).splitlines()[0] if str(warning.message) else ""
            # its note that the authors' problem is not DPP comes with every solve: not news
            if message and "not DPP" not in message and message not in self._said:
                self._said.add(message)
                say(f"balancer=nash: {type(warning.message).__name__} from its solver: {message[:200]}")
        self.nash_alpha.copy_(torch.from_numpy(np.asarray(weighting.prvs_alpha, dtype=np.float64)))
        self.nash_calls.fill_(int(weighting.step))
        return weights

    def combine(self, gradients: torch.Tensor, losses: torch.Tensor, step: int) -> Combined:
        """The authors backpropagate sum_i alpha_i loss_i (their `NashMTL.get_weighted_loss`), so
        each task's head gradient is scaled by its alpha, the bargaining solution as solved (TorchJD's
        cap on the shared combination's norm, in place of the authors' clipping of the shared
        parameters, leaves the heads alone). With SGD this matters; Adam largely undoes a scale."""
        combined = super().combine(gradients, losses, step)
        alpha = self.nash_alpha.to(gradients.device, gradients.dtype)
        return Combined(combined.shared, alpha, combined.weights)
