"""The training batches the step benchmarks time: a task's first batches as a run draws them."""

from __future__ import annotations

import numpy as np

from mtl.data.batches import TaskStream
from mtl.tasks import seed_indices
from mtl.train.loop.trainer import Trainer


def task_batches(trainer: Trainer, task: str, window: int, count: int) -> list[np.ndarray]:
    """The first `count` training batches of `task` as the run would draw them, `window`
    batches per sorted window (1: random batches; BUCKET_WINDOW: bucketed)."""
    stream = TaskStream(
        trainer.run.data.examples[task]["train"],
        trainer.run.data.bucket_keys(task, "train"),
        trainer.run.config.tasks[task].batch,
        seed=[trainer.run.config.run.seed, seed_indices(trainer.run.config.tasks)[task]],
        window=window,
    )
    return [stream.next()[0] for _ in range(count)]
