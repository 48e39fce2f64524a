"""`just bench-train schedule=mixed`: what a schedule=mixed step costs.

On the same real batches (one of each task per step), interleaved with the order rotating every
step so machine noise falls on all alike, each contender a trainer of its own built from one
configuration (the paper multitask preset's encoder at its batch sizes by default):

- `single steps`: one step of each task in turn (`Trainer.train_step`), what schedule=blocks
  pays for the same examples: the sum a mixed step is held against (target: at most 1.1x);
- `mixed sum`, `mixed pcgrad`, ... : one schedule=mixed step (`Trainer.train_step`) with each
  of mtl's registered balancers: what each adds over `mixed sum` (FAMO its forwards after the
  update, UPGrad its quadratic programs and Nash-MTL its solver on the host);
- `affinity`: one measurement of every pair's lookahead affinity (affinity_every=) as a run
  makes it at `affinity_every=100` (its clipping, its `affinity_batches=` held batches, or
  `affinity_each=` of them in turn: then the mean over a cycle that takes each once, since they
  differ in length), reported as its share of the wall time of 100 steps of `mixed sum`;
  `affinity, every held batch`: the same taking every held batch at each measurement (the
  narrowest floor, about 8x the cost; mtl/analysis/held_batches.py).
"""

from __future__ import annotations

import functools
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from mtl.config import apply_overrides
from mtl.data.batches import TaskStream
from mtl.errors import UserError
from mtl.tasks import seed_indices
from mtl.train.callbacks.affinity import Affinity, held_each, held_in_turn
from mtl.train.config.train_config import TrainConfig
from mtl.train.data.training_data import TrainingData
from mtl.train.loop.trainer import Trainer
from mtl.train.optim.balancers import BALANCERS
from tools.ops import count_host_work

AFFINITY_EVERY = 100


def run(base: TrainConfig, data: TrainingData, steps: int, warmup: int, device: torch.device) -> dict:
    tasks = base.training_tasks
    with tempfile.TemporaryDirectory() as scratch:

        def trainer(*keys: str) -> Trainer:
            config = apply_overrides(base, ["precision=fp32", *keys])
            return Trainer(config, Path(scratch) / "-".join(keys or ("blocks",)), data=data, progress=False)

        blocks = trainer()
        mixed = {}
        for name in BALANCERS:  # every registered balancer; one whose library is missing is said, not timed
            try:
                mixed[name] = trainer("schedule=mixed", f"balancer={name}")
            except UserError as error:
                if name == "sum":
                    raise
                print(f"not timed: {error}")
        # as a run measures it: its held batches (affinity_batches=, affinity_each=) and its clipping
        measured = apply_overrides(mixed["sum"].run.config, [f"affinity_every={AFFINITY_EVERY}"])
        each, held = held_each(measured), measured.run.affinity_batches

        def in_turn(each: int) -> tuple[Callable[[dict], None], int]:
            """Measurements of `each` held batches in turn, a cycle that takes every one once (they
            differ in length: a run pays the cycle's mean), and the cycle's length."""
            cycle = -(-held // each)

            def measure(rows: dict) -> None:
                for number in range(1, cycle + 1):
                    affinity.measure(held_in_turn(number, each, held))

            return measure, cycle

        affinity = Affinity(
            data, mixed["sum"].run.setup, tasks, base.run.seed, device,
            measured.run.affinity_batches, measured.optim.max_grad_norm,
            precision=measured.run.affinity_precision,
        )  # fmt: skip
        streams = {
            task: TaskStream(
                data.examples[task]["train"],
                data.bucket_keys(task, "train"),
                base.tasks[task].batch,
                seed=[base.run.seed, seed_indices(base.tasks)[task]],
            )
            for task in tasks
        }
        batches = [{task: streams[task].next()[0] for task in tasks} for _ in range(warmup + steps)]

        def single(rows: dict[str, np.ndarray]) -> None:
            for task in tasks:
                blocks.train_step({task: rows[task]})

        contenders = {
            "single steps": single,
            **{
                f"mixed {name}": (lambda rows, t=trained: t.train_step(rows))
                for name, trained in mixed.items()
            },
        }
        per_call = {}  # a contender timed over this many measurements a call
        contenders["affinity"], per_call["affinity"] = in_turn(each)
        if each < held:
            contenders["affinity, every held batch"], per_call["affinity, every held batch"] = in_turn(held)
        finish = torch.cuda.synchronize if device.type == "cuda" else lambda: None
        names = list(contenders)
        times: dict[str, list[float]] = {name: [] for name in names}
        for i, rows in enumerate(batches):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                finish()
                started = time.perf_counter()
                contenders[name](rows)
                finish()
                if i >= warmup:
                    times[name].append(1000 * (time.perf_counter() - started) / per_call.get(name, 1))
        # the host's work per step (ops dispatched, each a kernel launch on a GPU), on the last batch
        ops = {
            name: count_host_work(functools.partial(contenders[name], batches[-1])).ops
            // per_call.get(name, 1)
            for name in names
        }
    return {
        "tasks": tasks,
        "batches": {task: base.tasks[task].batch for task in tasks},
        "affinity_batches": held,
        "affinity_each": each,
        "ms": {name: (statistics.median(t), min(t), max(t)) for name, t in times.items()},
        "ops": ops,
    }


def taken(each: int, held: int) -> str:
    return f"all {held} held batches" if each >= held else f"{each} of {held} held batches in turn"


def report(results: dict, setting: str) -> str:
    ms = {name: values[0] for name, values in results["ms"].items()}
    batches = ", ".join(f"{task} {size}" for task, size in results["batches"].items())
    width = max(len(name) for name in results["ms"])
    lines = [
        f"{setting}, one step of each task ({batches}); median ms (min-max) over the same batches, "
        "interleaved; host ops per step:",
        *(
            f"  {name:<{width}} {median:8.0f} ({low:.0f}-{high:.0f})  {results['ops'][name]:6d} ops"
            for name, (median, low, high) in results["ms"].items()
        ),
        f"mixed sum step = {ms['mixed sum'] / ms['single steps']:.2f}x the single-task steps it holds (target <= 1.1x)",
        "over a mixed sum step: "
        + "; ".join(
            f"{name.removeprefix('mixed ')} {ms[name] / ms['mixed sum']:.2f}x"
            for name in ms
            if name.startswith("mixed ") and name != "mixed sum"
        ),
        *(
            f"affinity_every={AFFINITY_EVERY}: one measurement ({held}) {ms[name]:.0f} ms = "
            f"{ms[name] / (ms[name] + AFFINITY_EVERY * ms['mixed sum']):.1%} of the wall time "
            f"(target <= 5%; 5% from affinity_every={math.ceil(19 * ms[name] / ms['mixed sum'])})"
            for name, held in (
                (
                    "affinity",
                    f"as a run makes it: {taken(results['affinity_each'], results['affinity_batches'])}",
                ),
                (
                    "affinity, every held batch",
                    f"{taken(results['affinity_batches'], results['affinity_batches'])}, the narrowest floor",
                ),
            )
            if name in ms
        ),
    ]
    return "\n".join(lines)
