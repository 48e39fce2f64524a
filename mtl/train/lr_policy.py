"""InferSent's learning-rate policy (Conneau et al. 2017, train_nli.py), per task's optimizer.

SGD: multiply the lr by `lr_decay` after each pass over a task's data, divide it by
`lr_shrink` when dev accuracy is not above the best so far, stop when the main task's lr
falls under `min_lr`. Adam keeps its lr and stops at the `adam_patience`-th evaluation not
above the best. AdamW (SBERT, for pretrained encoders) warms up linearly over `warmup_steps`,
then decays linearly to 0 at `max_steps`, where the run stops; its lr is a function of the
global step, so resuming needs no scheduler state.
"""

from __future__ import annotations

import torch

from mtl import metrics
from mtl.train.config import OptimConfig
from mtl.train.state import StopReason, TrainState


class LrPolicy:
    def __init__(self, config: OptimConfig, optimizers: dict[str, torch.optim.Optimizer], main_task: str):
        self.config, self.optimizers, self.main_task = config, optimizers, main_task

    def before_step(self, step: int) -> None:
        """Set this step's lr (AdamW's warmup and decay; the other policies change it elsewhere)."""
        if self.config.optim != "adamw":
            return
        factor = warmup_then_decay(step, self.config.warmup_steps or 0, self.config.max_steps or 1)
        for optimizer in {id(o): o for o in self.optimizers.values()}.values():
            for group in optimizer.param_groups:
                group["lr"] = group["base_lr"] * factor

    def after_epoch(self, task: str) -> None:
        if self._owns_lr(task):
            self._scale(task, self.config.lr_decay)

    def after_evaluation(self, state: TrainState, results: dict[str, float]) -> None:
        """Record each task's best dev accuracy; shrink the lr (SGD) or count a stall (Adam)."""
        for task in self.optimizers:
            accuracy = results[metrics.accuracy(task, "dev")]
            best = state.best_dev.get(task)
            if best is None or accuracy > best:
                state.best_dev[task] = accuracy
                continue
            if self._owns_lr(task):
                self._scale(task, 1.0 / self.config.lr_shrink)
            if task == self.main_task:
                state.stalls += 1

    def stop_reason(self, state: TrainState) -> StopReason | None:
        config = self.config
        if config.max_steps is not None and state.global_step >= config.max_steps:
            return StopReason.MAX_STEPS
        if config.optim == "sgd" and self.lr(self.main_task) < config.min_lr:
            return StopReason.MIN_LR
        if config.optim == "adam" and state.stalls >= config.adam_patience:
            return StopReason.ADAM_PATIENCE
        return None

    def lr(self, task: str) -> float:
        return self.optimizers[task].param_groups[0]["lr"]

    def _owns_lr(self, task: str) -> bool:
        """A shared optimizer follows the main task only."""
        return self.config.optimizer_per_task or task == self.main_task

    def _scale(self, task: str, factor: float) -> None:
        if self.config.optim == "sgd":
            for group in self.optimizers[task].param_groups:
                group["lr"] *= factor


def warmup_then_decay(step: int, warmup: int, total: int) -> float:
    """The lr factor at optimizer step `step` (from 0), as transformers' get_linear_schedule_with_warmup."""
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))
