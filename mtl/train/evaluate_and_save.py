"""The dev evaluation and the checkpoints that punctuate a run. An evaluation scores each task on
dev, with what the callbacks add (the watching tasks of monitor=), logs it, lets the selection
decide whether the model is the best so far and the lr schedules react to it, then writes
checkpoints/best.pt when it is and checkpoints/latest.pt always. The trainer's loop decides when
(eval_every=, checkpoint_every=, a callback's request, an interrupt); this module does it."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from mtl import metrics
from mtl.train.sharding import gathered

if TYPE_CHECKING:  # (the trainer imports this module)
    from mtl.train.trainer import Trainer


def evaluate_and_checkpoint(trainer: Trainer) -> None:
    started, state = time.perf_counter(), trainer.state
    with gathered(trainer.model):  # (strategy=fsdp: the ranks score different numbers of batches)
        results = trainer.evaluate("dev")
        # what the callbacks add, scored alongside: monitor='s transfer tasks
        results.update(trainer.callbacks.on_evaluate(trainer.run))
    record = {metrics.GLOBAL_STEP: state.global_step}
    record.update({metrics.of_task(task, "step"): n for task, n in state.task_steps.items()})
    record.update({**results, metrics.EVENT: "evaluation"})
    trainer.callbacks.on_event({**record, metrics.phase("eval_seconds"): time.perf_counter() - started})
    training = {name: trainer.data.tasks[name] for name in trainer.config.training_tasks}
    improved, new_best = state.after_evaluation(results, training, trainer.selection)
    for name, better in improved.items():
        trainer.lr_schedule.after_evaluation(name, better)
    if new_best:
        trainer.event("checkpoint", best=True)
        trainer.checkpointer.save_best(trainer.setup.model_state(), state.best)
        trainer.callbacks.on_checkpoint(trainer.run, best=True)
    save_latest(trainer)
    trainer.evaluated_at = state.global_step


def save_latest(trainer: Trainer) -> None:
    """checkpoints/latest.pt: everything a resume needs to continue exactly after this step."""
    trainer.event("checkpoint", best=False)
    trainer.state.metrics_bytes = trainer.log.position
    state = {
        "state": trainer.state.to_dict(),
        "world_size": trainer.dist.world_size,
        "callbacks": trainer.callbacks.state_dict(),  # callbacks=' own, so they resume where they were
    }
    trainer.checkpointer.save_latest({**trainer.setup.state_dict(), **state}, trainer.state.global_step)
    trainer.callbacks.on_checkpoint(trainer.run, best=False)
