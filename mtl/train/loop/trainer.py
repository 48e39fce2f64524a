"""The multitask training loop: scheduler -> task step -> log, evaluate, checkpoint, resume.

Under `torchrun` every rank runs this same loop over the same schedule; each step's global
batch is split over the ranks and DistributedDataParallel averages their gradients, so a
run's results do not depend on how many processes it has. What a run trains with is built
in `setup`, one step in `step`; the run itself is one object (`training_run`) that the work
around the steps shares: callbacks (`callbacks`, `run_callbacks`, `run_logs`; when to evaluate,
checkpoint and stop among them, `cadence`), evaluations and checkpoints (`evaluation`), how the
run ends (finished, interrupted or failed; `ending`). This file builds them and runs the loop,
which reads the run's control after every event that may ask for something.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mtl import metrics
from mtl.errors import UserError
from mtl.runtime.distributed import Distributed
from mtl.train.callbacks.base import Callback, Callbacks, callback_names
from mtl.train.callbacks.run_callbacks import run_callbacks
from mtl.train.callbacks.run_logs import open_run_logs
from mtl.train.config.resolve import resolve_settings
from mtl.train.config.train_config import TrainConfig
from mtl.train.data.training_data import TrainingData, prepare
from mtl.train.loop.cadence import Cadence, StopRules, ranks_may_ask_differently
from mtl.train.loop.ending import Ending
from mtl.train.loop.epoch_end import end_epoch
from mtl.train.loop.evaluation import Evaluation
from mtl.train.loop.interrupts import StopRequests
from mtl.train.loop.selection import selection_for
from mtl.train.optim.lr_schedules import build_lr_schedule
from mtl.train.run.checkpointer import Checkpointer, encoder_metadata
from mtl.train.run.setup import build_setup
from mtl.train.run.sharding import describe
from mtl.train.run.start_from import start_encoder_from
from mtl.train.run.state import StopReason, TrainState
from mtl.train.run.training_run import TrainingRun
from mtl.train.step.mixed import MixedStep
from mtl.train.step.prefetch import Prefetcher
from mtl.train.step.strategy import Diverged, Step, TaskStep


class Trainer:
    def __init__(
        self,
        config: TrainConfig,
        run_dir: Path,
        data: TrainingData | None = None,
        progress: bool = True,
        dist: Distributed | None = None,
        command: str = "",
        callbacks: Sequence[Callback] = (),
    ):
        """`callbacks`: callback objects of this process's own, after the run's (a program's, as
        HF's `Trainer(callbacks=)`; not recorded: a resume names its own)."""
        dist = dist or Distributed()
        callback_names(config.run.callbacks)  # an unknown one stops the run before any work
        progress = progress and dist.is_main
        device = dist.device(config.run.device)
        torch.manual_seed(config.run.seed)
        data = data or dist.main_first(lambda: prepare(config, progress=progress))
        sizes = {task: len(data.examples[task]["train"]) for task in config.tasks}
        config = resolve_settings(config, device, sizes)
        setup = build_setup(config, data, dist, device)
        # the step's strategy: every task at once where the schedule mixes them, else one a step
        strategy = MixedStep if setup.scheduler.mixed else TaskStep
        self.step: Step = strategy(config, data, setup, dist, device)
        self.prefetcher = Prefetcher.for_run(
            self.step.prepare, config.run.prefetch, device, setup.scheduler.mixed
        )
        checkpointer = Checkpointer(
            run_dir, encoder_metadata(config, data), dist, config.run.wandb_checkpoints
        )
        lr_schedule = build_lr_schedule(config.optim, setup.optimizers, config.main_task)
        self.run = run = TrainingRun(
            config, run_dir, data, setup, dist, device, lr_schedule, checkpointer, progress
        )
        # affinity_every=, monitor=, contamination=, callbacks=, then the rhythm and the stop
        # rules; the run log and bar join on rank 0 when the logs open
        self.cadence = Cadence(config, setup.scheduler)
        run.callbacks = Callbacks(*run_callbacks(run, progress), *callbacks, self.cadence, StopRules())
        run.selection = selection_for(  # select=, over the dev metrics and the callbacks' added keys
            config.run.select, data.tasks, config.main_task, run.callbacks.evaluation_keys()
        )
        run.state.wandb_id = dist.broadcast(run.state.wandb_id)
        self.evaluation, self.ending = Evaluation(run), Ending(run)
        self.task_ids = {task: i for i, task in enumerate(config.tasks)}  # their place in tasks=
        self.train_sizes = {task: max(size, 1) for task, size in sizes.items()}
        self.every_rank = ranks_may_ask_differently(config)  # (else each step skips a collective)
        self.command = command  # the command line, as the W&B run's notes
        self.stop_requests = StopRequests()  # Ctrl-C or SIGTERM in this process

    def _open_logs(self, resume: bool) -> None:
        """Rank 0's run log, W&B run and progress bar, joining the run's callbacks."""
        run = self.run
        run.resumed = resume
        if self.run.dist.is_main:
            if self.run.setup.sharded:
                print(describe(self.run.model, self.run.dist.world_size))
            run.run_log, metrics_log, bar = open_run_logs(
                run, self.run.checkpointer, self.command, run.progress
            )
            self.run.callbacks.callbacks = [metrics_log, *self.run.callbacks.callbacks, bar]

    # ---- the loop --------------------------------------------------------------------------

    def fit(self, resume: bool = False) -> dict[str, Any]:
        """Train until a `StopReason`; return the summary. An interrupt checkpoints, then raises KeyboardInterrupt."""
        self._open_logs(resume)
        run = self.run
        if run.config.run.start_from and not resume:  # (a resumed run's checkpoint holds its weights)
            started = start_encoder_from(run.model.encoder, run.config.run.start_from)
            run.event("start_from", **started)
        try:  # (a callback's failing start closes the run's logs as a failing step does)
            self.run.callbacks.on_train_begin(run)
            self._act_on_requests()  # what the start asked (a stop before the first step)
            with self.stop_requests:
                reason = self._loop()
        except BaseException as error:
            self.prefetcher.close()  # batches being prepared are dropped
            self.ending.failed(error)
            if isinstance(error, Diverged):
                raise UserError(str(error)) from None
            raise
        self.prefetcher.close()  # a batch prepared for a step that will not come is dropped
        if reason is StopReason.INTERRUPTED:
            raise self.ending.interrupted()
        # the last step's dev evaluation and checkpoint, where the run's rhythm did not just make them
        step = self.run.state.global_step
        if not (step > 0 and self.cadence.evaluation_due(step - 1) or self.evaluation.evaluated_at == step):
            self.evaluation.evaluate_and_checkpoint()
        return self.ending.finished(reason)

    def _loop(self) -> StopReason:
        run, control, scheduler = self.run, self.run.control, self.run.setup.scheduler
        block_clock = time.perf_counter()
        while True:
            if self.run.dist.any(self.stop_requests.requested):  # every rank stops after the same step
                self.evaluation.save_latest()
                return StopReason.INTERRUPTED
            if control.reason is not None:  # asked before this step, every rank agreeing
                return control.reason
            state = run.state
            step = state.global_step
            tasks = scheduler.tasks_at(step)
            block_task = metrics.MIXED if scheduler.mixed else tasks[0]
            if step == state.block.start_step:
                block_clock = time.perf_counter()
                run.event("block_start", task=block_task, block=state.block.index)
            drawn = {task: self.run.setup.streams[task].next() for task in tasks}
            self.run.callbacks.on_step_begin(run, tasks)
            self.train_step({task: rows for task, (rows, _) in drawn.items()})
            for task, (rows, epoch_done) in drawn.items():
                if epoch_done:
                    run.event("epoch_end", **end_epoch(run, self.run.lr_schedule, task))
                state.block.examples += len(rows)
            self.run.callbacks.on_step_end(run, block_task)
            if scheduler.block_ends_after(step):
                run.event("block_end", **state.end_block(block_task, time.perf_counter() - block_clock))
            self._act_on_requests()

    def _act_on_requests(self) -> None:
        """Evaluate or checkpoint where the run's parts asked; a stop asked for meanwhile (early
        stopping in on_evaluate, patience's verdict, a callback's on_checkpoint) is read again
        after it, so the loop stops before the next step, every rank alike."""
        asked = self.run.control.read(self.run.dist, self.every_rank)
        if asked.evaluate:
            self.evaluation.evaluate_and_checkpoint()
        elif asked.checkpoint:
            self.evaluation.save_latest()
        else:
            return
        self.run.control.read(self.run.dist, self.every_rank)

    def train_step(self, batches: dict[str, np.ndarray]) -> dict[str, Any]:
        """One optimizer step on `batches` (each stepped task's training rows, its global batch: one
        task, or every task under schedule=mixed); returns its record."""
        state = self.run.state
        self.run.lr_schedule.before_step(state.global_step)
        prepared = (
            {task: self.prefetcher.take(task, rows) for task, rows in batches.items()}
            if self.prefetcher.enabled
            else None
        )
        outcome = self.step(batches, state.global_step, prepared, self._prefetch_next)
        Diverged.check(
            {task: done.loss for task, done in outcome.tasks.items()}, state, self.run.checkpointer
        )
        record = state.after_step(
            outcome,
            {task: self.run.data.tasks[task].metric for task in batches},
            {task: self.run.lr_schedule.lr(task) for task in batches},
            self.train_sizes,
            self.task_ids,
        )
        self.run.callbacks.on_step(metrics.MIXED if outcome.balanced else next(iter(batches)), record)
        return record

    def _prefetch_next(self) -> None:
        """Start preparing the batch the step after this one will draw: the scheduler's next task,
        its stream peeked (a stream the current step has already advanced)."""
        if self.prefetcher.enabled:
            upcoming = self.run.state.global_step + 1
            task = self.run.setup.scheduler.task_at(upcoming)
            self.prefetcher.schedule(task, self.run.setup.streams[task].peek())

    def evaluate(self, split: str = "dev") -> dict[str, float]:
        """Each task's metric on `split`; each rank scores its share of the examples."""
        return self.run.evaluate(split)

    def restore(self) -> None:
        """Continue from checkpoints/latest.pt (or the one before it, when it is damaged)."""
        saved = self.run.checkpointer.load_latest()
        self.run.setup.load_state_dict(saved)
        self.run.state = TrainState.from_dict(saved["state"])
        self.run.callbacks.load_state_dict(saved.get("callbacks") or {})
