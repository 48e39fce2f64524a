"""The multitask training loop: scheduler -> task step -> log, evaluate, checkpoint, resume.

Under `torchrun` every rank runs this same loop over the same schedule; each step's global
batch is split over the ranks and DistributedDataParallel averages their gradients, so a
run's results do not depend on how many processes it has. What a run trains with is built
in `setup`, one step in `step`, the work around the steps in callbacks (`callbacks`,
`run_callbacks`, `run_logs`), evaluations and checkpoints in `evaluate_and_save`, how the run
ends (finished, interrupted or failed) in `finish`; this file only orchestrates.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mtl import metrics
from mtl.errors import UserError
from mtl.runs import RunFolder
from mtl.runtime.distributed import Distributed
from mtl.train.callbacks import Callbacks, TrainingRun, callback_names
from mtl.train.checkpointer import Checkpointer, encoder_metadata
from mtl.train.config import TrainConfig
from mtl.train.data import TrainingData, prepare
from mtl.train.epoch_end import end_epoch
from mtl.train.evaluate import evaluate_tasks
from mtl.train.evaluate_and_save import evaluate_and_checkpoint, save_latest
from mtl.train.finish import close_failed, close_interrupted, finish
from mtl.train.interrupts import StopRequests
from mtl.train.lr_schedules import build_lr_schedule
from mtl.train.mixed import MixedStep
from mtl.train.prefetch import Prefetcher
from mtl.train.resolve import resolve_settings
from mtl.train.run_callbacks import run_callbacks
from mtl.train.run_logs import open_run_logs
from mtl.train.runlog import NullLog, RunLog
from mtl.train.selection import selection_for
from mtl.train.setup import build_setup
from mtl.train.sharding import describe
from mtl.train.state import StopReason, TrainState
from mtl.train.step import Diverged, Step, TaskStep
from mtl.train.stopping import stop_reason


class Trainer:
    def __init__(
        self,
        config: TrainConfig,
        run_dir: Path,
        data: TrainingData | None = None,
        progress: bool = True,
        dist: Distributed | None = None,
        command: str = "",
    ):
        self.run_dir, self.files = Path(run_dir), RunFolder(Path(run_dir))
        self.dist = dist or Distributed()
        callback_names(config.run.callbacks)  # an unknown one stops the run before any work
        self.progress = progress and self.dist.is_main
        self.device = self.dist.device(config.run.device)
        torch.manual_seed(config.run.seed)
        self.data = data or self.dist.main_first(lambda: prepare(config, progress=self.progress))
        sizes = {task: len(self.data.examples[task]["train"]) for task in config.tasks}
        self.config = config = resolve_settings(config, self.device, sizes)
        self.setup = build_setup(config, self.data, self.dist, self.device)
        self.model = self.setup.model
        # the step's strategy: every task at once where the schedule mixes them, else one a step
        strategy = MixedStep if self.setup.scheduler.mixed else TaskStep
        self.step: Step = strategy(config, self.data, self.setup, self.dist, self.device)
        self.prefetcher = Prefetcher.for_run(
            self.step.prepare, config.run.prefetch, self.device, self.setup.scheduler.mixed
        )
        self.task_ids = {task: i for i, task in enumerate(config.tasks)}  # their place in tasks=
        self.train_sizes = {task: max(size, 1) for task, size in sizes.items()}
        self.lr_schedule = build_lr_schedule(config.optim, self.setup.optimizers, config.main_task)
        self.run = TrainingRun(self)  # what the callbacks see
        # affinity_every=, monitor=, contamination=, callbacks=; the run log and bar join on rank 0
        self.callbacks = Callbacks(*run_callbacks(self.run, self.progress))
        self.selection = selection_for(  # select=, over the dev metrics and the callbacks' added keys
            config.run.select, self.data.tasks, config.main_task, self.callbacks.evaluation_keys()
        )
        self.state = TrainState.for_tasks(config.training_tasks)
        self.state.wandb_id = self.dist.broadcast(self.state.wandb_id)
        self.checkpointer = Checkpointer(
            self.run_dir, encoder_metadata(config, self.data), self.dist, config.run.wandb_checkpoints
        )
        self.log: RunLog | NullLog = NullLog()
        self.evaluated_at: int | None = None  # the step of this process's last dev evaluation
        self.command = command  # the command line, as the W&B run's notes
        self.stop_requests = StopRequests()  # Ctrl-C or SIGTERM in this process

    def _open_logs(self, resume: bool) -> None:
        """Rank 0's run log, W&B run and progress bar, joining the run's callbacks."""
        self.run.resumed = resume
        if self.dist.is_main:
            if self.setup.sharded:
                print(describe(self.model, self.dist.world_size))
            self.log, metrics_log, bar = open_run_logs(
                self.run, self.checkpointer, self.command, self.progress
            )
            self.callbacks.callbacks = [metrics_log, *self.callbacks.callbacks, bar]

    def event(self, name: str, **values: Any) -> None:
        """An event of the run (a block's start, a checkpoint, ...) to the callbacks: the run log, W&B."""
        record = {metrics.GLOBAL_STEP: self.state.global_step, metrics.EVENT: name}
        self.callbacks.on_event({**record, **{metrics.phase(k): v for k, v in values.items()}})

    # ---- the loop --------------------------------------------------------------------------

    def fit(self, resume: bool = False) -> dict[str, Any]:
        """Train until a `StopReason`; return the summary. An interrupt checkpoints, then raises KeyboardInterrupt."""
        self._open_logs(resume)
        try:  # (a callback's failing start closes the run's logs as a failing step does)
            self.callbacks.on_train_begin(self.run)
            with self.stop_requests:
                reason = self._loop()
        except Diverged as error:
            close_failed(self, error)
            raise UserError(str(error)) from None
        except BaseException as error:
            close_failed(self, error)
            raise
        self.prefetcher.close()  # a batch prepared for a step that will not come is dropped
        if reason is StopReason.INTERRUPTED:
            raise close_interrupted(self)
        # the last step's dev evaluation and checkpoint, where the loop's rhythm did not just make them
        step = self.state.global_step
        if not (step > 0 and self._evaluation_due(step - 1) or self.evaluated_at == step):
            evaluate_and_checkpoint(self)
        return finish(self, reason)

    def _loop(self) -> StopReason:
        state, scheduler, block_clock = self.state, self.setup.scheduler, time.perf_counter()
        while True:
            if self.dist.any(self.stop_requests.requested):  # every rank stops after the same step
                save_latest(self)
                return StopReason.INTERRUPTED
            if reason := stop_reason(self.config.optim, state, self.lr_schedule.lr(self.config.main_task)):
                return reason
            step = state.global_step
            tasks = scheduler.tasks_at(step)
            block_task = metrics.MIXED if scheduler.mixed else tasks[0]
            if step == state.block.start_step:
                block_clock = time.perf_counter()
                self.event("block_start", task=block_task, block=state.block.index)
            drawn = {task: self.setup.streams[task].next() for task in tasks}
            self.train_step({task: rows for task, (rows, _) in drawn.items()})
            for task, (rows, epoch_done) in drawn.items():
                if epoch_done:
                    self.event("epoch_end", **end_epoch(self.run, self.lr_schedule, task))
                state.block.examples += len(rows)
            self.callbacks.on_step_end(self.run, block_task)
            if scheduler.block_ends_after(step):
                self.event("block_end", **state.end_block(block_task, time.perf_counter() - block_clock))
            every_rank = bool(self.config.run.callbacks)
            evaluate, stop = self.run.control.requests(self.dist, from_every_rank=every_rank)
            if self._evaluation_due(step) or evaluate:
                evaluate_and_checkpoint(self)
                # a stop asked for in on_evaluate (early stopping) ends the run here, not a step later
                stop = stop or self.run.control.stopping(self.dist, from_every_rank=every_rank)
            elif (step + 1) % self.config.run.checkpoint_every == 0:
                save_latest(self)
            if stop:
                return StopReason.CALLBACK

    def train_step(self, batches: dict[str, np.ndarray]) -> dict[str, Any]:
        """One optimizer step on `batches` (each stepped task's training rows, its global batch: one
        task, or every task under schedule=mixed); returns its record."""
        state = self.state
        self.lr_schedule.before_step(state.global_step)
        prepared = (
            {task: self.prefetcher.take(task, rows) for task, rows in batches.items()}
            if self.prefetcher.enabled
            else None
        )
        outcome = self.step(batches, state.global_step, prepared, self._prefetch_next)
        Diverged.check({task: done.loss for task, done in outcome.tasks.items()}, state, self.checkpointer)
        record = state.after_step(
            outcome,
            {task: self.data.tasks[task].metric for task in batches},
            {task: self.lr_schedule.lr(task) for task in batches},
            self.train_sizes,
            self.task_ids,
        )
        self.callbacks.on_step(metrics.MIXED if outcome.balanced else next(iter(batches)), record)
        return record

    def _prefetch_next(self) -> None:
        """Start preparing the batch the step after this one will draw: the scheduler's next task,
        its stream peeked (a stream the current step has already advanced)."""
        if self.prefetcher.enabled:
            upcoming = self.state.global_step + 1
            task = self.setup.scheduler.task_at(upcoming)
            self.prefetcher.schedule(task, self.setup.streams[task].peek())

    def _evaluation_due(self, step: int) -> bool:
        every = self.config.run.eval_every
        return (step + 1) % every == 0 if every else self.setup.scheduler.is_cycle_end(step)

    def evaluate(self, split: str = "dev") -> dict[str, float]:
        """Each task's metric on `split`; each rank scores its share of the examples."""
        return evaluate_tasks(
            self.model, self.data, split, self.config.run, self.dist, self.device, progress=self.progress
        )

    def restore(self) -> None:
        """Continue from checkpoints/latest.pt (or the one before it, when it is damaged)."""
        saved = self.checkpointer.load_latest()
        self.setup.load_state_dict(saved)
        self.state = TrainState.from_dict(saved["state"])
        self.callbacks.load_state_dict(saved.get("callbacks") or {})
