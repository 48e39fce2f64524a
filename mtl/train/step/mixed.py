"""One optimizer step of every training task at once (`schedule=mixed`): a batch of each task
(its own batch size), each task's forward and backward in turn, its gradient on the shared
encoder kept apart, the balancer's combination of them, one update of one shared optimizer.

Over several processes the gradients are all-reduced here (one collective per step, summing
every rank's share of each task's global-batch mean), not by DDP, which knows one forward per
backward: the balancer then decides on the same global gradients on every rank.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from mtl.runtime.device import seed_step
from mtl.runtime.distributed import Distributed
from mtl.train.config.train_config import TrainConfig
from mtl.train.data.training_data import TrainingData
from mtl.train.optim.balancers.base import Balancer, pairwise_cosines
from mtl.train.run.setup import Setup, TaskNetwork
from mtl.train.step.outcome import StepOutcome, TaskResult
from mtl.train.step.strategy import Step, step_seed, task_backward, task_loss_sum


class MixedStep(Step):
    """Every training task's optimizer step at once, combined by the run's balancer."""

    def __init__(
        self, config: TrainConfig, data: TrainingData, setup: Setup, dist: Distributed, device: torch.device
    ):
        # the gradient buffer (Step's) holds the shared encoder's gradients side by side, then each
        # task's head's, so that each of the step's rewrites is one op
        super().__init__(config, data, setup, dist, device)
        assert setup.balancer is not None, "schedule=mixed builds a balancer"
        self.balancer: Balancer = setup.balancer
        self.tasks = list(self.balancer.tasks)
        self.networks = {task: TaskNetwork(setup.model, task) for task in self.tasks}  # no DDP: see above
        self.shared = [p for p in setup.model.encoder.parameters() if p.requires_grad]
        shared_ids = {id(p) for p in self.shared}
        self.heads = {
            task: [p for p in setup.parameters[task] if id(p) not in shared_ids] for task in self.tasks
        }
        self.all_heads = [p for task in self.tasks for p in self.heads[task]]
        self.trained = list({id(p): p for p in [*self.shared, *self.all_heads]}.values())
        # Reduced with the gradients: a balancer's own parameters trained by the loss (uncertainty's).
        self.balancer_parameters = [p for p in self.balancer.parameters() if p.requires_grad]

    def train(self, batches: dict[str, np.ndarray], parts: dict[str, list], global_step: int,
              while_running: Callable[[], None]) -> StepOutcome:  # fmt: skip
        setup, scaler = self.setup, self.setup.scaler
        seed_step(step_seed(self.config.run.seed, global_step, self.dist.rank), self.device)  # dropout masks
        setup.model.train()
        setup.model.zero_grad(set_to_none=True)
        self.balancer.zero_grad(set_to_none=True)
        buffer = self.gradients
        buffer.attach(self.trained)
        task_gradients, totals = [], torch.zeros(len(self.tasks), 2, device=self.device)
        for index, task in enumerate(self.tasks):
            totals[index] = self._backward(index, task, parts[task], len(batches[task]))
            task_gradients.append(buffer.gradient_of(self.shared, self.device))
            buffer.clear(self.shared)  # the next task's gradient starts from zero
        if (regulariser := self.balancer.regulariser(self.dist.world_size)) is not None:
            scaler.scale(regulariser).backward()
        gradients = torch.stack(task_gradients)
        others = [
            buffer.gradient_of(self.all_heads, self.device),
            buffer.gradient_of(self.balancer_parameters, self.device),
        ]
        reduced = self.dist.all_reduce(torch.cat([gradients.flatten(), *others, totals.flatten()]))
        gradients = reduced[: gradients.numel()].view_as(gradients)
        heads_end = gradients.numel() + others[0].numel()
        buffer.set_gradient(self.all_heads, reduced[gradients.numel() : heads_end])
        buffer.set_gradient(self.balancer_parameters, reduced[heads_end : reduced.numel() - totals.numel()])
        totals = reduced[reduced.numel() - totals.numel() :].view_as(totals)
        sizes = torch.tensor([len(batches[task]) for task in self.tasks], device=self.device)
        means = totals / sizes[:, None]

        scale = scaler.get_scale() if scaler.is_enabled() else 1.0  # fp16: the gradients are scaled
        combined = self.balancer.combine(gradients / scale, means[:, 0], global_step)
        buffer.set_gradient(self.shared, combined.shared * scale)
        for index, task in enumerate(self.tasks):
            buffer.scale_gradient(self.heads[task], combined.head_scales[index])
        grad_norm = self.update(setup.shared_optimizer, self.trained)
        self.balancer.after_step()
        if self.balancer.measures_after_step:
            self.balancer.observe(self._losses_after(parts, global_step, sizes))

        cosines = pairwise_cosines(gradients)
        while_running()
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
        return StepOutcome(
            tasks={
                task: TaskResult(len(batches[task]), losses[i], scores[i], norms[i])
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
        )

    def _backward(self, index: int, task: str, parts: list, count: int) -> torch.Tensor:
        """Task `task`'s forward and backward on this rank's share of its `count` rows (`parts`:
        its micro-batches); its (loss sum, metric sum) on the device. The loss is this rank's
        part of the global-batch mean, so the ranks' gradients add up to the gradient of that mean."""
        seed = self._seed(index, count)
        sums = task_backward(
            self.networks[task], self.data.tasks[task], parts, seed, self.config, self.device
        )
        return torch.stack(sums).view(-1, 2).sum(dim=0)

    def _losses_after(self, parts: dict[str, list], global_step: int, sizes: torch.Tensor) -> torch.Tensor:
        """Each task's mean loss on this step's batches after the update, summed over ranks: the
        step's forwards again, without gradients, from the step's dropout seed."""
        seed_step(step_seed(self.config.run.seed, global_step, self.dist.rank), self.device)
        sums = torch.stack(
            [
                task_loss_sum(
                    self.networks[task], self.data.tasks[task], parts[task], self.config, self.device
                )
                for task in self.tasks
            ]
        )
        return self.dist.all_reduce(sums) / sizes

    def _seed(self, index: int, count: int) -> Callable[[torch.Tensor], torch.Tensor]:
        """The gradient of the balancer's (scaled) task loss with respect to the task's loss sum,
        where backward starts; the balancer's own parameters get theirs on the way."""

        def seed(loss_sum: torch.Tensor) -> torch.Tensor:
            held = loss_sum.detach().requires_grad_()
            self.setup.scaler.scale(self.balancer.task_loss(index, held / count)).backward()
            assert held.grad is not None
            return held.grad

        return seed
