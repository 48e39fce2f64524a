"""Online inter-task affinity (Fifty, Amid, Zhao, Yu, Anil and Finn 2021, "Efficiently
Identifying Task Groupings in Multi-Task Networks"), measured during training.

For every ordered pair of training tasks (i, j): how much a step on task i alone would lower
task j's loss,

    Z(i -> j) = 1 - L_j(theta_s - lr * grad_s L_i(theta)) / L_j(theta)

with theta_s the shared encoder's parameters (the heads stay as they are, as in the paper), lr
the current learning rate, and L_i, L_j measured on a fixed held batch of each task (a seeded
draw of `<task>.batch` dev examples, the same at every measurement, so values compare over
time; the paper takes task i's gradient on its training batch, which would tie the value to
the data order). Z > 0: i's update helps j. Everything is computed functionally, without
touching the model's weights or gradients, the optimizer or the data streams, in training mode
(cuDNN's LSTM has no backward in eval mode) with dropout masks from a fixed seed inside a forked
random state: a run trains to the same bits with or without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.func import functional_call

from mtl.files import atomic, jsonfile
from mtl.runs import read_affinity
from mtl.runtime.distributed import local_batches
from mtl.train.data import TrainingData
from mtl.train.precision import autocast
from mtl.train.setup import Setup, TaskNetwork

SEED_OFFSET = 7_919  # the held batches' draw: apart from every other generator seeded by the run's seed


class Affinity:
    def __init__(
        self,
        data: TrainingData,
        setup: Setup,
        tasks: list[str],
        seed: int,
        device: torch.device,
        precision: str,
    ):
        self.data, self.tasks, self.device, self.precision = data, list(tasks), device, precision
        self.model = setup.model
        self.networks = {task: TaskNetwork(setup.model, task) for task in self.tasks}
        self.shared = {
            f"encoder.{name}": p for name, p in setup.model.encoder.named_parameters() if p.requires_grad
        }
        rng = np.random.default_rng([seed, SEED_OFFSET])
        self.held = {}
        for task in self.tasks:
            dev = data.examples[task]["dev"]
            count = min(len(dev), data.tasks[task].config.batch)
            # an in-batch task's candidates are its batch: a contiguous run, as its evaluation scores
            start = int(rng.integers(0, len(dev) - count + 1)) if data.tasks[task].in_batch else None
            rows = (
                np.arange(start, start + count)
                if start is not None
                else np.sort(rng.permutation(len(dev))[:count])
            )
            self.held[task] = dev.subset(rows)

    def matrix(self, lrs: dict[str, float]) -> np.ndarray:
        """(T, T): row i, column j is Z(i -> j), each task i's lookahead at its lr `lrs[i]`."""
        devices = [self.device] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), local_batches():
            base = {task: self._loss(task).item() for task in self.tasks}
            result = np.zeros((len(self.tasks), len(self.tasks)))
            for i, source in enumerate(self.tasks):
                loss = self._loss(source, grad=True)
                names = list(self.shared)
                found = torch.autograd.grad(loss, [self.shared[n] for n in names], allow_unused=True)
                with torch.no_grad():
                    stepped = {
                        name: (p - lrs[source] * g) if g is not None else p
                        for name, p, g in zip(names, (self.shared[n] for n in names), found, strict=True)
                    }
                for j, target in enumerate(self.tasks):
                    after = self._loss(target, stepped).item()
                    result[i, j] = 1.0 - after / base[target] if base[target] else 0.0
        return result

    def _loss(
        self, task: str, parameters: dict[str, torch.Tensor] | None = None, grad: bool = False
    ) -> torch.Tensor:
        """`task`'s mean loss on its held batch, with the shared encoder's `parameters` when given."""
        examples, definition = self.held[task], self.data.tasks[task]
        sentences = self.data.table.batch_columns(examples.sentences, self.device)
        labels = torch.from_numpy(examples.labels).to(self.device)
        torch.manual_seed(
            SEED_OFFSET + self.tasks.index(task)
        )  # a task's same dropout masks before and after
        with torch.set_grad_enabled(grad), autocast(self.precision, self.device):
            network = self.networks[task]
            outputs = (
                network(sentences)
                if parameters is None
                else functional_call(network, parameters, (sentences,))
            )
            return definition.losses(outputs, labels).float().mean()


class AffinityLog:
    """affinity.jsonl: a line per measurement, appended; a resumed run first drops the lines
    after its checkpoint (they are measured again)."""

    def __init__(self, path: Path):
        self.path = path

    def cut_to(self, step: int) -> None:
        if not self.path.is_file():
            return
        kept = [row for row in read_affinity(self.path) if row["step"] <= step]
        atomic.write_text(self.path, "".join(jsonfile.dumps(row) + "\n" for row in kept))

    def append(self, row: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(jsonfile.dumps(row) + "\n")
            out.flush()
