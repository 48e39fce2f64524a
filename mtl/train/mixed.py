"""One optimizer step of every training task at once (`schedule=mixed`): a batch of each task
(its own batch size), each task's forward and backward in turn, its gradient on the shared
encoder kept apart, the balancer's combination of them, one update of one shared optimizer.

Over several processes the gradients are all-reduced here (one collective per step, summing
every rank's share of each task's global-batch mean), not by DDP, which knows one forward per
backward: the balancer then decides on the same global gradients on every rank.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from mtl.runtime.distributed import Distributed
from mtl.train.balancers.base import Balancer, pairwise_cosines
from mtl.train.config import TrainConfig
from mtl.train.data import TrainingData
from mtl.train.setup import Setup, TaskNetwork
from mtl.train.step import StepResult, TaskStep, step_seed, task_backward


@dataclass
class MixedResult:
    """A finished mixed step, summed over every rank."""

    tasks: dict[str, StepResult]  # each task's examples, mean loss and metric (grad_norm: on the encoder)
    loss: float  # the update's loss: each task's mean loss times the weight it had
    grad_norm: float  # of the whole update, before clipping
    weights: dict[str, float]  # the weight each task's loss had (the balancer's decision)
    cosines: dict[tuple[str, str], float]  # of every two tasks' gradients on the shared encoder
    seconds: float


class MixedStep:
    def __init__(
        self,
        config: TrainConfig,
        data: TrainingData,
        setup: Setup,
        dist: Distributed,
        device: torch.device,
        task_step: TaskStep,
    ):
        self.config, self.data, self.setup, self.dist, self.device = config, data, setup, dist, device
        self.prepare = task_step.prepare
        assert setup.balancer is not None, "schedule=mixed builds a balancer"
        self.balancer: Balancer = setup.balancer
        self.tasks = list(self.balancer.tasks)
        self.networks = {task: TaskNetwork(setup.model, task) for task in self.tasks}  # no DDP: see above
        self.shared = [p for p in setup.model.encoder.parameters() if p.requires_grad]
        shared_ids = {id(p) for p in self.shared}
        self.heads = {
            task: [p for p in setup.parameters[task] if id(p) not in shared_ids] for task in self.tasks
        }
        self.trained = list({id(p): p for task in self.tasks for p in setup.parameters[task]}.values())
        # Reduced with the gradients: a balancer's own parameters trained by the loss (uncertainty's).
        self.balancer_parameters = [p for p in self.balancer.parameters() if p.requires_grad]

    def __call__(self, batches: dict[str, np.ndarray], global_step: int) -> MixedResult:
        started = time.perf_counter()
        setup, scaler = self.setup, self.setup.scaler
        torch.manual_seed(step_seed(self.config.run.seed, global_step, self.dist.rank))  # dropout masks
        setup.model.train()
        setup.model.zero_grad(set_to_none=True)
        self.balancer.zero_grad(set_to_none=True)
        task_gradients, totals = [], torch.zeros(len(self.tasks), 2, device=self.device)
        for index, task in enumerate(self.tasks):
            totals[index] = self._backward(index, task, batches[task])
            task_gradients.append(_flat_gradients(self.shared, self.device))
            for p in self.shared:  # the next task's gradient starts from zero
                p.grad = None
        if (regulariser := self.balancer.regulariser(self.dist.world_size)) is not None:
            scaler.scale(regulariser).backward()
        gradients = torch.stack(task_gradients)
        others = [p for task in self.tasks for p in self.heads[task]] + self.balancer_parameters
        reduced = self.dist.all_reduce(
            torch.cat([gradients.flatten(), _flat_gradients(others, self.device), totals.flatten()])
        )
        gradients = reduced[: gradients.numel()].view_as(gradients)
        _assign(others, reduced[gradients.numel() : reduced.numel() - totals.numel()])
        totals = reduced[reduced.numel() - totals.numel() :].view_as(totals)
        sizes = torch.tensor([len(batches[task]) for task in self.tasks], device=self.device)
        means = totals / sizes[:, None]

        scale = scaler.get_scale() if scaler.is_enabled() else 1.0  # fp16: the gradients are scaled
        combined = self.balancer.combine(gradients / scale, means[:, 0], global_step)
        _assign(self.shared, combined.shared * scale)
        for index, task in enumerate(self.tasks):
            for p in self.heads[task]:
                if p.grad is not None:
                    p.grad.mul_(combined.head_scales[index].to(p.grad.dtype))
        optimizer = setup.optimizers[self.tasks[0]]  # one, shared by every task
        scaler.unscale_(optimizer)
        max_norm = self.config.optim.max_grad_norm or math.inf
        grad_norm = nn.utils.clip_grad_norm_(self.trained, max_norm)
        scaler.step(optimizer)
        scaler.update()
        self.balancer.after_step()

        cosines = pairwise_cosines(gradients)
        values = torch.cat(
            [
                means.flatten(),
                (gradients / scale).norm(dim=1),
                combined.weights,
                cosines.flatten(),
                grad_norm.reshape(1),
            ]
        ).tolist()  # the step's one wait for the GPU
        count = len(self.tasks)
        losses, scores = values[0 : 2 * count : 2], values[1 : 2 * count : 2]
        norms, weights = values[2 * count : 3 * count], values[3 * count : 4 * count]
        matrix = np.array(values[4 * count : 4 * count + count * count]).reshape(count, count)
        seconds = time.perf_counter() - started
        return MixedResult(
            tasks={
                task: StepResult(len(batches[task]), losses[i], scores[i], norms[i], seconds)
                for i, task in enumerate(self.tasks)
            },
            loss=sum(weight * loss for weight, loss in zip(weights, losses, strict=True)),
            grad_norm=values[-1],
            weights=dict(zip(self.tasks, weights, strict=True)),
            cosines={
                (a, b): float(matrix[i, j])
                for i, a in enumerate(self.tasks)
                for j, b in enumerate(self.tasks)
                if i < j
            },
            seconds=seconds,
        )

    def _backward(self, index: int, task: str, rows: np.ndarray) -> torch.Tensor:
        """Task `task`'s forward and backward on this rank's share of `rows`; its (loss sum,
        metric sum) on the device. The loss is this rank's part of the global-batch mean, so the
        ranks' gradients add up to the gradient of that mean."""
        parts = self.prepare(task, rows).micro_batches
        seed = self._seed(index, len(rows))
        sums = task_backward(
            self.networks[task], self.data.tasks[task], parts, seed, self.config, self.device
        )
        return torch.stack(sums).view(-1, 2).sum(dim=0)

    def _seed(self, index: int, count: int) -> Callable[[torch.Tensor], torch.Tensor]:
        """The gradient of the balancer's (scaled) task loss with respect to the task's loss sum,
        where backward starts; the balancer's own parameters get theirs on the way."""

        def seed(loss_sum: torch.Tensor) -> torch.Tensor:
            held = loss_sum.detach().requires_grad_()
            self.setup.scaler.scale(self.balancer.task_loss(index, held / count)).backward()
            assert held.grad is not None
            return held.grad

        return seed


def _flat_gradients(parameters: list[nn.Parameter], device: torch.device) -> torch.Tensor:
    """The gradients of `parameters` as one float32 vector (zeros where a parameter has none)."""
    if not parameters:
        return torch.zeros(0, device=device)
    return torch.cat(
        [
            (p.grad if p.grad is not None else torch.zeros_like(p)).detach().float().flatten().to(device)
            for p in parameters
        ]
    )


def _assign(parameters: list[nn.Parameter], flat: torch.Tensor) -> None:
    """Set the gradients of `parameters` from one vector (as `_flat_gradients` lays them out)."""
    offset = 0
    for p in parameters:
        size = p.numel()
        p.grad = flat[offset : offset + size].view_as(p).to(p.dtype).clone()
        offset += size
