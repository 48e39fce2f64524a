"""The dev evaluations and the checkpoints that punctuate a run. An evaluation scores each task on
dev, with what the callbacks add (the watching tasks of monitor=), logs it, lets the selection
decide whether the model is the best so far and the lr schedules react to it, then writes
checkpoints/best.pt when it is, checkpoints/latest.pt always (and the evaluated model,
keep_evaluated=). When is asked through the run's
control (eval_every=, checkpoint_every= and a callback's request; cadence.py), or by an
interrupt and the run's end; this module does it."""

from __future__ import annotations

import time

from mtl import metrics
from mtl.train.run.sharding import gathered
from mtl.train.run.training_run import TrainingRun


class Evaluation:
    """The evaluations and checkpoints of `run`; `evaluated_at`: the step of this process's last
    dev evaluation (None before its first)."""

    def __init__(self, run: TrainingRun):
        self.run = run
        self.evaluated_at: int | None = None

    def evaluate_and_checkpoint(self) -> None:
        run = self.run
        started, state = time.perf_counter(), run.state
        with gathered(run.model):  # (strategy=fsdp: the ranks score different numbers of batches)
            results = run.evaluate("dev")
            # what the callbacks add, scored alongside: monitor='s transfer tasks
            results.update(run.callbacks.on_evaluate(run))
        record = {metrics.GLOBAL_STEP: state.global_step}
        record.update({metrics.of_task(task, "step"): n for task, n in state.task_steps.items()})
        record.update({**results, metrics.EVENT: "evaluation"})
        run.callbacks.on_event({**record, metrics.phase("eval_seconds"): time.perf_counter() - started})
        training = {name: run.data.tasks[name] for name in run.config.training_tasks}
        improved, new_best = state.after_evaluation(results, training, run.selection)
        for name, better in improved.items():
            run.lr_schedule.after_evaluation(name, better)
        if new_best:
            run.event("checkpoint", best=True)
            run.checkpointer.save_best(run.setup.model_state(), state.best)
            run.callbacks.on_checkpoint(run, best=True)
        if keep := run.config.run.keep_evaluated:
            run.checkpointer.save_evaluated(run.setup.model_state(), state.global_step, results, keep)
        self.save_latest()
        self.evaluated_at = state.global_step

    def save_latest(self) -> None:
        """checkpoints/latest.pt: everything a resume needs to continue exactly after this step."""
        run = self.run
        run.event("checkpoint", best=False)
        run.state.metrics_bytes = run.run_log.position
        state = {
            "state": run.state.to_dict(),
            "world_size": run.dist.world_size,
            "callbacks": run.callbacks.state_dict(),  # callbacks=' own, so they resume where they were
        }
        run.checkpointer.save_latest({**run.setup.state_dict(), **state}, run.state.global_step)
        run.callbacks.on_checkpoint(run, best=False)
