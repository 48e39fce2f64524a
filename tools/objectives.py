"""`just bench-train objectives=qt,skipthought,mnrl,sts`: a training step of each new objective.

Each task alone on one encoder (a BiGRU-max of `hidden` per direction over the configured
GloVe vectors, as experiments/objectives.toml trains them), its step (`Trainer.train_step`)
timed on its own batches at its default batch size: median milliseconds per step, steps/s
and examples/s. qt and skipthought read SQuAD's passages, mnrl SNLI (train_small), sts the
STS Benchmark from $MTL_DATA_DIR/senteval.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import torch

from mtl.config import comma_list
from mtl.data.batches import TaskStream
from mtl.runtime.device import resolve_device
from mtl.tasks import seed_indices
from mtl.train.config.inputs import resolve_inputs
from mtl.train.config.train_config import TrainConfig, with_overrides
from mtl.train.data.training_data import prepare
from mtl.train.loop.trainer import Trainer

TASK_KEYS = {
    "qt": ["tasks=qt"],
    "skipthought": ["tasks=skipthought"],
    "mnrl": ["tasks=mnrl", "mnrl.train_split=train_small"],
    "sts": ["tasks=experiments/tasks/stsb.toml"],
}


def objective_config(bench, task: str, *extra: str) -> TrainConfig:
    """`task` alone on the objectives' BiGRU-max, as experiments/objectives.toml trains it."""
    return resolve_inputs(
        with_overrides(
            TrainConfig(),
            [
                *TASK_KEYS[task],
                "encoder=gru",
                "bidirectional=true",
                f"hidden={bench.objective_hidden}",
                "pooling=max",
                "optim=adam",
                "wandb=disabled",
                f"device={bench.device}",
                *([f"vectors={bench.vectors}"] if bench.vectors else []),
                *extra,
            ],
        )
    )


def run(bench) -> list[dict]:
    """`bench`: the BenchTrainConfig (objectives, hidden_objectives, steps, warmup, device, vectors)."""
    rows = []
    device = resolve_device(bench.device)
    for task in comma_list(bench.objectives):
        config = objective_config(bench, task)
        data = prepare(config, progress=False)
        name = next(iter(config.tasks))
        with tempfile.TemporaryDirectory() as scratch:
            trainer = Trainer(config, Path(scratch) / "run", data=data, progress=False)
            stream = TaskStream(
                data.examples[name]["train"],
                data.bucket_keys(name, "train"),
                config.tasks[name].batch,
                seed=[config.run.seed, seed_indices(config.tasks)[name]],
                contiguous=data.tasks[name].batching == "contiguous",
            )
            finish = torch.cuda.synchronize if device.type == "cuda" else lambda: None
            times = []
            for i in range(bench.warmup + bench.steps):
                rows_of_batch = stream.next()[0]
                finish()
                started = time.perf_counter()
                trainer.train_step({name: rows_of_batch})
                finish()
                if i >= bench.warmup:
                    times.append(time.perf_counter() - started)
        median = statistics.median(times)
        row = {
            "task": task,
            "batch": config.tasks[name].batch,
            "params": trainer.run.model.trainable_parameters(),
            "ms": 1000 * median,
            "steps_per_s": 1 / median,
            "examples_per_s": config.tasks[name].batch / median,
        }
        print(format_row(row, bench.objective_hidden), flush=True)
        rows.append(row)
    return rows


def format_row(row: dict, hidden: int) -> str:
    return (
        f"{row['task']:<11} bigru {hidden} batch {row['batch']:>3} ({row['params']:,} trainable): "
        f"{row['ms']:.0f} ms/step, {row['steps_per_s']:.2f} steps/s, {row['examples_per_s']:.0f} examples/s"
    )
