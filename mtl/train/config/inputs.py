"""A run's inputs found once, before it trains: every task's data source absolute (or a Hub id),
the vectors file or pretrained model found, each missing one a one-line error. No torch (a task
kind's input side is mtl/tasks/inputs.py): a study or a SLURM submission checks its members'
inputs here on the machine that submits them, before any job exists."""

from __future__ import annotations

import copy

from mtl.files.hub import resolve_model_source
from mtl.files.paths import resolved
from mtl.models.encoders import traits
from mtl.tasks.kinds import inputs_of
from mtl.text.vectors import resolve_vectors_path
from mtl.train.config.train_config import TrainConfig


def resolve_inputs(config: TrainConfig, download: bool = True) -> TrainConfig:
    """A copy whose data sources are absolute paths (or Hub ids), found once at the start.
    `download=False`: a check (before a SLURM submission, --print-config) that fetches nothing:
    vectors that would be downloaded stay unset, for the run to fetch."""
    config = copy.deepcopy(config)
    tasks = config.tasks
    tasks = {name: inputs_of(task.kind)(name, task).inherit(tasks) for name, task in tasks.items()}
    config.tasks = {name: inputs_of(task.kind)(name, task).resolve_inputs() for name, task in tasks.items()}
    if traits(config.model.encoder).subwords:
        config.model.options.hf_model = resolve_model_source(config.model.options.hf_model)
    elif (found := resolve_vectors_path(config.data.vectors, download)) is not None:
        config.data.vectors = str(resolved(found, "vectors"))
    return config
