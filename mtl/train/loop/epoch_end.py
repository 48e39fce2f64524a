"""What happens when a task has seen its training data once more: the lr schedule's epoch rules
(InferSent's: decay, then shrink when the epoch's dev metric is not above the best at the
task's earlier epoch ends, scored here whatever eval_every= is)."""

from __future__ import annotations

from typing import Any

from mtl import metrics
from mtl.train.data.evaluate import evaluate_tasks
from mtl.train.optim.lr_schedules import LrSchedule
from mtl.train.run.sharding import gathered
from mtl.train.run.training_run import TrainingRun


def end_epoch(run: TrainingRun, lr_schedule: LrSchedule, task: str) -> dict[str, Any]:
    """Apply `task`'s epoch rules; the values of its epoch_end record."""
    lr_schedule.after_epoch(task)
    values: dict[str, Any] = {"task": task, "epoch": run.setup.streams[task].epoch}
    if not (lr_schedule.decides_at_epoch_end and task in run.config.training_tasks):
        return values
    with gathered(run.model):
        results = evaluate_tasks(run.model, run.data, "dev", run.config.run, run.dist, run.device, only=task)
    definition = run.data.tasks[task]
    key = metrics.evaluation(task, "dev", definition.metric)
    if key in results:
        improved = run.state.record_epoch_dev(task, metrics.signed(definition.metric, results[key]))
        lr_schedule.after_epoch_dev(task, improved)
        values.update({"dev": results[key], "lr": lr_schedule.lr(task)})
    return values
