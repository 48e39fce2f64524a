"""One optimizer step of a run, by one of two strategies: `Step` is what they share (this rank's
share of a global batch prepared on the device, the gradient buffer, GradCache's limits), and
`TaskStep` trains one task (its micro-batches under autocast, its own loss, backward, clipping
and the update); mixed.py's `MixedStep` trains every task at once. Both return a `StepOutcome`."""

from __future__ import annotations

import contextlib
import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from mtl.errors import UserError
from mtl.models.precision import autocast
from mtl.runtime.device import seed_step, to_device
from mtl.runtime.distributed import Distributed, rows_are_padding, scoring_as_the_step
from mtl.train.config.train_config import TrainConfig
from mtl.train.data.training_data import TrainingData
from mtl.train.run.setup import Setup
from mtl.train.run.state import TrainState
from mtl.train.step.grad_buffer import GradientBuffer
from mtl.train.step.grad_cache import cached_backward
from mtl.train.step.outcome import StepOutcome, TaskResult

if TYPE_CHECKING:
    from mtl.tasks.base import Task
    from mtl.train.run.checkpointer import Checkpointer


@dataclass
class PreparedBatch:
    """A step's inputs on the device: per micro-batch (sentence columns, labels, loss weights)."""

    # Loss weights are None when all are 1 (every rank has rows): a multiplication less each way.
    micro_batches: list[tuple[list[tuple[torch.Tensor, torch.Tensor]], torch.Tensor, torch.Tensor | None]]


def weighted(values: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    """Per-example `values` times their loss weights (`PreparedBatch`)."""
    return values if weight is None else values * weight


def task_backward(
    network: torch.nn.Module,
    definition: Task,
    micro_batches: list,
    seed: Callable[[torch.Tensor], torch.Tensor],
    config: TrainConfig,
    device: torch.device,
    syncing: Callable[[bool], contextlib.AbstractContextManager] = lambda last: contextlib.nullcontext(),
) -> list[torch.Tensor]:
    """One task's forward and backward over its micro-batches (`PreparedBatch.micro_batches`), for
    the single-task and the mixed step alike: the loss sum of each under autocast, its loss weights,
    backward from `seed(loss_sum)` (the gradient of what the step minimises with respect to that
    sum), an in-batch task with `<task>.mini_batch=` through GradCache. `syncing(last)`: DDP's
    no_sync before the last micro-batch. Returns each micro-batch's (loss sum, metric sum), on the
    device and detached."""
    mini_batch = definition.mini_batch(config.tasks[definition.name])
    computing = functools.partial(autocast, config.run.precision, device)
    sums: list[torch.Tensor] = []
    for i, (sentences, labels, weight) in enumerate(micro_batches):

        def loss_and_score(outputs, labels=labels, weight=weight) -> tuple[torch.Tensor, torch.Tensor]:
            losses, scores = definition.losses(outputs, labels), definition.scores(outputs, labels)
            return weighted(losses, weight).sum(), weighted(scores, weight).sum()

        # a weight means a stand-in row (this rank has none of a short batch): not a candidate
        with syncing(i == len(micro_batches) - 1), rows_are_padding(weight is not None):
            if mini_batch is not None and mini_batch < len(labels):  # GradCache (grad_cache.py)
                sums += cached_backward(
                    network, sentences, mini_batch, computing, loss_and_score, seed, device
                )
                continue
            with computing():
                outputs = network(sentences)
            loss_sum, score_sum = loss_and_score(outputs)
            sums += [loss_sum.detach(), score_sum.detach()]
            loss_sum.backward(seed(loss_sum))
    return sums


@torch.no_grad()
def task_loss_sum(
    network: torch.nn.Module, definition: Task, micro_batches: list, config: TrainConfig, device: torch.device
) -> torch.Tensor:
    """One task's loss sum over its micro-batches (`PreparedBatch.micro_batches`), a forward
    without gradients under the run's autocast: what a balancer that learns from the update's
    effect (FAMO) measures after the optimizer's step, on the step's own batches."""
    total = torch.zeros((), device=device)
    for sentences, labels, weight in micro_batches:
        # An in-batch task scores against the whole batch's candidates, gathered from the ranks, as
        # the step did (its loss is computed within, as task_backward's is).
        with rows_are_padding(weight is not None), scoring_as_the_step():
            with autocast(config.run.precision, device):
                outputs = network(sentences)
            total += weighted(definition.losses(outputs, labels), weight).sum().float()
    return total


class Step:
    """The strategy of a run's optimizer steps (`TaskStep` or mixed.py's `MixedStep`, as its schedule
    trains one task a step or all of them): called with each stepped task's rows of the global
    batch, it trains on them and returns the step's `StepOutcome`."""

    def __init__(
        self, config: TrainConfig, data: TrainingData, setup: Setup, dist: Distributed, device: torch.device
    ):
        self.config, self.data, self.setup, self.dist, self.device = config, data, setup, dist, device
        # The shared encoder's parameters side by side, then each task's head's (the mixed step
        # rewrites each of these ranges in one op); the buffer keeps each parameter once.
        shared = [p for p in setup.model.encoder.parameters() if p.requires_grad]
        self.gradients = GradientBuffer(
            [*shared, *(p for task in config.training_tasks for p in setup.parameters[task])]
        )
        cached = [t for t in config.training_tasks if data.tasks[t].mini_batch(config.tasks[t])]
        if cached and dist.active:
            raise UserError(
                f"{cached[0]}.mini_batch= (GradCache) runs in one process: with torchrun each rank "
                "already embeds only its share of the batch; leave mini_batch= out"
            )

    def __call__(
        self,
        batches: dict[str, np.ndarray],
        global_step: int,
        prepared: dict[str, PreparedBatch] | None = None,
        while_running: Callable[[], None] = lambda: None,
    ) -> StepOutcome:
        """Train on `batches` (each stepped task's training rows: its global batch) at
        `global_step`, from `prepared` inputs where given; `while_running()` is called once the
        step is queued, before its result is read (the prefetcher starts the next batch there)."""
        started, ready = time.perf_counter(), prepared or {}
        parts = {
            task: (ready[task] if task in ready else self.prepare(task, rows)).micro_batches
            for task, rows in batches.items()
        }
        outcome = self.train(batches, parts, global_step, while_running)
        outcome.seconds = time.perf_counter() - started
        return outcome

    def train(self, batches: dict[str, np.ndarray], parts: dict[str, list], global_step: int,
              while_running: Callable[[], None]) -> StepOutcome:  # fmt: skip
        """The strategy's step on each task's micro-batches (`parts`, `PreparedBatch.micro_batches`);
        its outcome's `seconds` are the caller's to fill in."""
        raise NotImplementedError

    def update(self, optimizer: torch.optim.Optimizer, parameters: list[torch.Tensor]) -> torch.Tensor:
        """The update tail of either strategy, once: unscale (fp16's scaler; a no-op otherwise), clip
        the gradient norm over `parameters` (`max_grad_norm`, none when 0), step, update the scale.
        Returns the norm before clipping, on the device (read with the step's other numbers)."""
        scaler = self.setup.scaler
        scaler.unscale_(optimizer)
        grad_norm = self.gradients.clip(parameters, self.config.optim.max_grad_norm or math.inf)
        scaler.step(optimizer)
        scaler.update()
        return grad_norm

    def prepare(self, task: str, rows: np.ndarray) -> PreparedBatch:
        """This rank's share of `rows` as device tensors, in micro-batches: the step's host work,
        which the prefetcher runs on its thread during the step before."""
        mine, weights = self._share_of(rows)
        examples = self.data.examples[task]["train"]
        # accumulate=k: k micro-batches, gradients summed, one update; DDP all-reduces after the last.
        # An in-batch task scores each example against the whole batch: one micro-batch.
        count = 1 if self.data.tasks[task].in_batch else min(self.config.optim.accumulate, len(mine))
        return PreparedBatch(
            [
                (
                    self.data.table.batch_columns(examples.sentences[mine[part]], self.device),
                    to_device(torch.from_numpy(examples.labels[mine[part]]), self.device),
                    None if weights[part].all() else to_device(torch.from_numpy(weights[part]), self.device),
                )
                for part in np.array_split(np.arange(len(mine)), count)
            ]
        )

    def _share_of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """This rank's rows of a global batch, with loss weights: a rank left without rows (the last,
        short batch of an epoch) still runs one row at weight 0, as DDP needs every rank in a step."""
        mine = rows[self.dist.part(len(rows))]
        if len(mine) == 0:
            return rows[:1], np.zeros(1, dtype=np.float32)
        return mine, np.ones(len(mine), dtype=np.float32)


class TaskStep(Step):
    """One task's optimizer step (schedule=blocks, and any schedule that steps one task at a time)."""

    def train(self, batches: dict[str, np.ndarray], parts: dict[str, list], global_step: int,
              while_running: Callable[[], None]) -> StepOutcome:  # fmt: skip
        [(task, rows)] = batches.items()
        totals = self.queue(task, rows, global_step, parts[task])
        while_running()
        # The step's one wait for the GPU (InferSent's loop reads its loss every step too).
        loss_sum, score_sum, grad_norm = totals.tolist()
        loss_sum, score_sum = self.dist.sum([loss_sum, score_sum])
        loss = loss_sum / len(rows)
        return StepOutcome(
            {task: TaskResult(len(rows), loss, score_sum / len(rows), grad_norm)},
            loss=loss,
            grad_norm=grad_norm,
        )

    def queue(self, task: str, rows: np.ndarray, global_step: int, parts: list | None = None) -> torch.Tensor:
        """Forward, backward and update on `parts` (this rank's micro-batches of `rows`, prepared
        here when not given), queued without waiting for the GPU (except fp16's gradient scaler,
        which reads whether the gradients overflowed); returns this rank's (loss sum, metric sum,
        gradient norm) on the device."""
        setup, definition = self.setup, self.data.tasks[task]
        # Dropout masks from (seed, step, rank), as fairseq does: resuming needs no RNG state and
        # works with any number of ranks.
        seed_step(step_seed(self.config.run.seed, global_step, self.dist.rank), self.device)
        parts = parts if parts is not None else self.prepare(task, rows).micro_batches
        network, trained = setup.networks[task], setup.parameters[task]
        setup.model.train()
        setup.model.zero_grad(set_to_none=True)
        self.gradients.attach(trained)
        # DDP averages gradients over ranks; scaled so, this is the mean over the global batch
        # (InferSent's train_nli.py: mean loss, then clip at 5), times <task>.weight. The scale
        # seeds the backward pass: the same gradient as (loss * scale).backward(), a
        # multiplication less each way.
        scale = self.dist.world_size / len(rows) * definition.config.weight

        def seed(loss_sum: torch.Tensor) -> torch.Tensor:
            return setup.scaler.scale(torch.full_like(loss_sum, scale))

        def syncing(last: bool) -> contextlib.AbstractContextManager:  # DDP all-reduces after the last
            return contextlib.nullcontext() if last or not self.dist.active else network.no_sync()

        sums = task_backward(network, definition, parts, seed, self.config, self.device, syncing)
        grad_norm = self.update(setup.optimizers[task], trained)
        totals = torch.stack([*sums, grad_norm])  # (promoted to the widest dtype)
        if len(parts) > 1:  # (loss, metric) of each micro-batch, then the norm: summed per kind
            totals = torch.cat([totals[:-1].view(-1, 2).sum(dim=0), totals[-1:]])
        return totals


def step_seed(seed: int, step: int, rank: int) -> int:
    return int(np.random.SeedSequence([seed, step, rank]).generate_state(1)[0])


class Diverged(Exception):
    """A step's loss became inf or nan: the run stops without saving that step."""

    @classmethod
    def check(cls, losses: dict[str, float], state: TrainState, checkpointer: Checkpointer) -> None:
        """Caught after the update: raised for the first task whose loss is not finite, naming
        the last checkpoint (`checkpointer`'s latest) the run can go back to."""
        for task, loss in losses.items():
            if math.isfinite(loss):
                continue
            kept = (
                f"the last good checkpoint (step {checkpointer.latest_step}) is kept in {checkpointer.files.latest}"
                if checkpointer.latest_step is not None
                else "no checkpoint was written yet"
            )
            raise cls(
                f"the {task} loss became {loss} at step {state.global_step + 1} ({task} step "
                f"{state.task_steps[task] + 1}); {kept}: lower lr= or max_grad_norm= and start again"
            )
