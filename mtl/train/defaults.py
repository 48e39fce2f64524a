"""Defaults that depend on the encoder: InferSent's SGD for the encoders trained from scratch,
SBERT's AdamW with warmup and linear decay for pretrained ones (encoder=hf)."""

from __future__ import annotations

import copy
import math

from mtl.train.config import TrainConfig
from mtl.train.scheduler import Scheduler

DEFAULT_LR = {"sgd": 0.1, "adam": 1e-3, "adamw": 1e-3}
DEFAULT_MAX_GRAD_NORM = {"sgd": 5.0, "adam": 5.0, "adamw": 1.0}  # InferSent clips at 5, SBERT at 1
WARMUP_SHARE = 0.1  # SBERT's training scripts: 10% of the planned steps


def resolve_defaults(config: TrainConfig, train_sizes: dict[str, int]) -> TrainConfig:
    """A copy with every `auto`/None default made concrete; `train_sizes`: training examples per task.

    The run records the result, so resuming never depends on how defaults were chosen.
    """
    config = copy.deepcopy(config)
    config.model = config.model.resolved()
    optim = config.optim
    if optim.optim == "auto":
        optim.optim = "adamw" if config.model.encoder == "hf" else "sgd"
    if optim.lr is None:
        optim.lr = DEFAULT_LR[optim.optim]
    if optim.max_grad_norm is None:
        optim.max_grad_norm = DEFAULT_MAX_GRAD_NORM[optim.optim]
    if optim.optim == "adamw":
        if optim.max_steps is None:
            optim.max_steps = steps_for_one_epoch(config, train_sizes)
        if optim.warmup_steps is None:
            optim.warmup_steps = math.ceil(WARMUP_SHARE * optim.max_steps)
    return config


def steps_for_one_epoch(config: TrainConfig, train_sizes: dict[str, int]) -> int:
    """Global steps until the main task has seen its training data once (SBERT trains one epoch)."""
    schedule, main = config.schedule, config.main_task
    needed = math.ceil(train_sizes[main] / schedule.batch_sizes[main])
    scheduler = Scheduler(
        schedule.steps, schedule.schedule, train_sizes, schedule.temperature, config.run.seed
    )
    step = done = 0
    while done < needed:
        done += scheduler.task_at(step) == main
        step += 1
    return step
