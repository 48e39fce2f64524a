"""The run's rhythm and its stop rules, as built-in callbacks that ask through `run.control` like
any other: the loop holds no arithmetic of when to evaluate, checkpoint or stop.

- `Cadence`: a dev evaluation (and checkpoint) every eval_every= steps, or at the end of each of
  the schedule's cycles; checkpoints/latest.pt every checkpoint_every= steps between them.
- `StopRules`: `max_steps=` and `max_minutes=` always, then the rule of `stop=` (`stop_reason`;
  a rule reads the state, never writes it), read before the first step, after every step and again after an evaluation's verdicts
  (patience's count, InferSent's lr shrink), which end with the latest checkpoint.

Both run on every rank. Steps are counted alike everywhere; a clock is not, so a run with
max_minutes= reads every rank's requests (the first rank over budget stops them all)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mtl.train.callbacks.base import Callback
from mtl.train.run.state import StopReason

if TYPE_CHECKING:
    from mtl.train.config.train_config import OptimConfig, TrainConfig
    from mtl.train.data.scheduler import Scheduler
    from mtl.train.run.state import TrainState
    from mtl.train.run.training_run import TrainingRun


class Cadence(Callback):
    every_rank = True

    def __init__(self, config: TrainConfig, scheduler: Scheduler):
        self.eval_every, self.checkpoint_every = config.run.eval_every, config.run.checkpoint_every
        self.scheduler = scheduler

    def evaluation_due(self, step: int) -> bool:
        """Whether the run evaluates after step `step` (counted from 0) by its rhythm."""
        if self.eval_every:
            return (step + 1) % self.eval_every == 0
        return self.scheduler.is_cycle_end(step)

    def on_step_end(self, run: TrainingRun, task: str) -> None:
        step = run.state.global_step - 1  # the step that just ended
        if self.evaluation_due(step):
            run.control.evaluate_now()
        elif (step + 1) % self.checkpoint_every == 0:
            run.control.checkpoint_now()


class StopRules(Callback):
    every_rank = True

    def on_train_begin(self, run: TrainingRun) -> None:
        self._check(run)  # a run resumed at its end, or max_steps=0: no step

    def on_step_end(self, run: TrainingRun, task: str) -> None:
        self._check(run)

    def on_checkpoint(self, run: TrainingRun, best: bool) -> None:
        if not best:  # (the best checkpoint comes first, mid-evaluation)
            self._check(run)

    @staticmethod
    def _check(run: TrainingRun) -> None:
        optim = run.config.optim
        if reason := stop_reason(optim, run.state, run.lr_schedule.lr(run.config.main_task)):
            run.control.stop(f"{reason.value} reached", reason)


def stop_reason(config: OptimConfig, state: TrainState, main_lr: float) -> StopReason | None:
    """Why the run stops before step `state.global_step`, or None; `main_lr`: the main task's lr now."""
    if config.max_steps is not None and state.global_step >= config.max_steps:
        return StopReason.MAX_STEPS
    if config.max_minutes is not None and state.train_seconds >= 60 * config.max_minutes:
        return StopReason.MAX_MINUTES
    if config.stop == "min_lr" and main_lr < config.min_lr:  # InferSent: lr under 1e-5
        return StopReason.MIN_LR
    if config.stop == "patience" and state.stalls >= config.patience:
        return StopReason.PATIENCE
    return None


def ranks_may_ask_differently(config: TrainConfig) -> bool:
    """Whether the loop must read every rank's requests: a plugin's callback may ask on one rank
    alone, and max_minutes= reads each process's own clock."""
    return bool(config.run.callbacks) or config.optim.max_minutes is not None
