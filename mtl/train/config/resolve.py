"""Every `auto`/None setting of a run made concrete, once, before it trains; the run records the result.

So resuming never depends on how defaults were chosen, on MTL_DATA_DIR or MTL_VECTORS, or
on the machine it resumes on. Inputs are resolved first (inputs.py: they are loaded before the
rest is known); the other settings need the device and the training data's sizes.
"""

from __future__ import annotations

import copy
import math

import torch

from mtl.models.encoders import traits
from mtl.models.precision import resolve_precision
from mtl.train.config.train_config import TrainConfig
from mtl.train.data.scheduler import Scheduler, trains_every_task
from mtl.train.optim.lr_schedules import LR_SCHEDULES
from mtl.train.optim.optimizer_registry import DEFAULTS, auto_optimizer

WARMUP_SHARE = 0.1  # SBERT's training scripts: 10% of the planned steps


def resolve_settings(
    config: TrainConfig, device: torch.device, train_sizes: dict[str, int] | None
) -> TrainConfig:
    """A copy with the encoder's, optimizer's and precision's `auto`/None made concrete;
    `train_sizes`: training examples per task (None before the data is read: then a max_steps
    of one epoch, and the warmup that is a share of it, stay None)."""
    config = copy.deepcopy(config)
    config.model = config.model.resolved()
    config.run.precision = resolve_precision(config.run.precision, device, config.model.encoder)
    optim = config.optim
    if optim.optim == "auto":
        optim.optim = auto_optimizer(traits(config.model.encoder).pretrained)
    defaults = DEFAULTS[optim.optim]  # the optimizer's own (optimizer_registry.py; a plugin's too)
    optim.lr_schedule = defaults.lr_schedule if optim.lr_schedule == "auto" else optim.lr_schedule
    optim.stop = defaults.stop if optim.stop == "auto" else optim.stop
    if optim.lr is None:
        optim.lr = defaults.lr
    if trains_every_task(config.schedule.schedule):  # a step updates the encoder once, for every task
        optim.optimizer_per_task = False
    if optim.max_grad_norm is None:
        optim.max_grad_norm = defaults.max_grad_norm
    decays_to_zero = LR_SCHEDULES[optim.lr_schedule].needs_max_steps  # a plugin's too
    if optim.max_steps is None and (decays_to_zero or optim.stop == "max_steps") and train_sizes is not None:
        optim.max_steps = steps_for_one_epoch(config, train_sizes)
    if optim.warmup_steps is None and (optim.max_steps is not None or not decays_to_zero):
        optim.warmup_steps = math.ceil(WARMUP_SHARE * optim.max_steps) if decays_to_zero else 0
    # A checkpoint (190-270 MB at paper size, most of a second to write) and a W&B row (half a
    # millisecond) are paid per interval of steps: a GPU's steps are some 20x shorter than a
    # CPU's, so its intervals are longer: a minute or two of steps between checkpoints on either.
    on_gpu = device.type == "cuda"
    if config.run.checkpoint_every is None:
        config.run.checkpoint_every = 5000 if on_gpu else 500
    if config.run.wandb_every is None:
        config.run.wandb_every = 10 if on_gpu else 1
    return config


def steps_for_one_epoch(config: TrainConfig, train_sizes: dict[str, int]) -> int:
    """Global steps until the main task has seen its training data once (SBERT trains one epoch)."""
    main = config.main_task
    needed = math.ceil(train_sizes[main] / config.tasks[main].batch)
    scheduler = task_scheduler(config, train_sizes)
    step = done = 0
    while done < needed:
        done += scheduler.task_at(step) == main
        step += 1
    return step


def task_scheduler(config: TrainConfig, train_sizes: dict[str, int]) -> Scheduler:
    """Which task each global step of `config` trains; `train_sizes` weigh the sampling schedules."""
    schedule = config.schedule
    return Scheduler(
        {name: task.steps for name, task in config.tasks.items() if task.train},  # train=false: never
        schedule.schedule,
        train_sizes,
        config.run.seed,
        shares={
            name: task.prob for name, task in config.tasks.items() if task.prob is not None and task.train
        },
        total_steps=config.optim.max_steps,
        options=schedule.schedule_options,
    )
