"""Learning-rate schedules, one per entry of `lr_schedule=`, over each task's optimizer.

`infersent` (Conneau et al. 2017, train_nli.py): multiply the lr by `lr_decay` after each
pass over a task's data, and at the same epoch end divide it by `lr_shrink` when the task's dev
accuracy is not above its best at earlier epoch ends. InferSent evaluates once per epoch, so the
decision is made there whatever `eval_every=` is (the trainer scores the task's dev set at each
of its epoch ends for it): deciding at every evaluation made the lr depend on how often one looks.
`constant`, `linear` and `cosine` are functions of the global step (a linear warmup over
`warmup_steps`, then flat, linear decay to 0 at `max_steps` as SBERT, or a half cosine to 0),
so resuming needs no schedule state.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from mtl.config import owners_of_keys
from mtl.errors import UserError
from mtl.plugins import adds_to

if TYPE_CHECKING:  # the config module names this one's registry in its choices (and loads no torch)
    import torch

    from mtl.train.config.train_config import OptimConfig


class LrSchedule:
    def __init__(self, config: OptimConfig, optimizers: dict[str, torch.optim.Optimizer], main_task: str):
        self.config, self.optimizers, self.main_task = config, optimizers, main_task

    def before_step(self, step: int) -> None:
        """Set the lr of optimizer step `step` (from 0)."""

    def after_epoch(self, task: str) -> None:
        """`task` has seen its training data once more."""

    # True: the trainer scores the task's dev set at each of its epoch ends and calls `after_epoch_dev`.
    decides_at_epoch_end: bool = False
    # True: the lr is a function of the step out of `max_steps` (a decay to 0 at the end): a run
    # given no max_steps= gets one epoch of its main task, never a total of 1 step.
    needs_max_steps: bool = False
    # The OptimConfig keys this schedule reads: one given with another schedule is refused, not
    # silently unused (a plugin's schedule declares its own).
    keys: tuple[str, ...] = ()

    def after_evaluation(self, task: str, improved: bool) -> None:
        """An evaluation ended; `improved`: `task`'s dev metric is above its best so far."""

    def after_epoch_dev(self, task: str, improved: bool) -> None:
        """`decides_at_epoch_end`: `task`'s epoch ended with its dev metric above (or not) its best at earlier epoch ends."""

    def lr(self, task: str) -> float:
        return self.optimizers[task].param_groups[0]["lr"]

    def _distinct_optimizers(self) -> list[torch.optim.Optimizer]:
        return list({id(o): o for o in self.optimizers.values()}.values())


class InferSent(LrSchedule):
    keys = ("lr_decay", "lr_shrink", "lr_shrink_at")

    @property
    def decides_at_epoch_end(self) -> bool:  # type: ignore[override]
        return self.config.lr_shrink_at == "epoch"

    def after_epoch(self, task: str) -> None:
        if self._owns_lr(task):
            self._scale(task, self.config.lr_decay)

    def after_evaluation(self, task: str, improved: bool) -> None:
        if self.config.lr_shrink_at == "evaluation":
            self.after_epoch_dev(task, improved)

    def after_epoch_dev(self, task: str, improved: bool) -> None:
        if not improved and self._owns_lr(task):
            self._scale(task, 1.0 / self.config.lr_shrink)

    def _owns_lr(self, task: str) -> bool:
        """A shared optimizer follows the main task only."""
        return self.config.optimizer_per_task or task == self.main_task

    def _scale(self, task: str, factor: float) -> None:
        for group in self.optimizers[task].param_groups:
            group["lr"] *= factor


class ByStep(LrSchedule):
    """An lr factor that is a function of the step alone, times each group's `base_lr`."""

    needs_max_steps = True
    keys = ("warmup_steps",)

    def before_step(self, step: int) -> None:
        if self.config.max_steps is None:  # resolve_inputs gives one; a caller that skipped it
            raise UserError(f"lr_schedule={self.config.lr_schedule} decays over max_steps=: give max_steps=")
        factor = self.factor(step, self.config.warmup_steps or 0, self.config.max_steps)
        for optimizer in self._distinct_optimizers():
            for group in optimizer.param_groups:
                group["lr"] = group["base_lr"] * factor

    def factor(self, step: int, warmup: int, total: int) -> float:
        raise NotImplementedError


class Constant(ByStep):
    needs_max_steps = False

    def before_step(self, step: int) -> None:
        if self.config.warmup_steps:  # else flat from the start: nothing to set (and runs from before
            super().before_step(step)  # base_lr existed had none)

    def factor(self, step: int, warmup: int, total: int) -> float:
        return min(1.0, step / warmup) if step < warmup else 1.0


class Linear(ByStep):
    def factor(self, step: int, warmup: int, total: int) -> float:
        return warmup_then_decay(step, warmup, total)


class Cosine(ByStep):
    def factor(self, step: int, warmup: int, total: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return 0.5 * (1.0 + math.cos(math.pi * progress))


LR_SCHEDULES: dict[str, type[LrSchedule]] = {}


def register_lr_schedule(name: str) -> Callable[[type[LrSchedule]], type[LrSchedule]]:
    """Make an `LrSchedule` class available to lr_schedule=NAME (a class decorator)."""
    return adds_to(LR_SCHEDULES, name)


for _name, _schedule in [
    ("infersent", InferSent),
    ("constant", Constant),
    ("linear", Linear),
    ("cosine", Cosine),
]:
    register_lr_schedule(_name)(_schedule)


def lr_schedule_key_owners() -> dict[str, list[str]]:
    """Each key a schedule declares (`LrSchedule.keys`) -> the schedules that read it."""
    return owners_of_keys({name: schedule.keys for name, schedule in LR_SCHEDULES.items()})


def build_lr_schedule(
    config: OptimConfig, optimizers: dict[str, torch.optim.Optimizer], main_task: str
) -> LrSchedule:
    return LR_SCHEDULES[config.lr_schedule](config, optimizers, main_task)


def warmup_then_decay(step: int, warmup: int, total: int) -> float:
    """The lr factor at optimizer step `step` (from 0), as transformers' get_linear_schedule_with_warmup."""
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))
