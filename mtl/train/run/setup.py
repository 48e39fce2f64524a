"""What a run trains with, built from its config and data: the model, one network and one
optimizer per task, each task's data stream, the schedule of tasks, the gradient scaler, and
under schedule=mixed the balancer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from mtl.config import NoOptions
from mtl.data.batches import TaskStream
from mtl.models.encoders import traits
from mtl.models.encoders.base import Encoder, build_encoder, word_embedding
from mtl.models.heads import MultitaskModel
from mtl.models.memory import check_fits
from mtl.models.precision import grad_scaler
from mtl.runtime.distributed import Distributed
from mtl.tasks import seed_indices
from mtl.train.config.resolve import task_scheduler
from mtl.train.config.train_config import TrainConfig
from mtl.train.data.scheduler import Scheduler
from mtl.train.data.training_data import TrainingData
from mtl.train.optim.balancers import BALANCERS
from mtl.train.optim.balancers.base import Balancer
from mtl.train.optim.optimizers import build_optimizers, learning_rates
from mtl.train.run.sharding import (
    ShardedTaskNetwork,
    is_sharded,
    load_whole_optimizer_state,
    load_whole_state,
    shard,
    whole_optimizer_state,
    whole_state,
)

BUCKET_WINDOW = 50  # batches sorted together: long enough to group lengths, short enough to stay random


@dataclass
class Setup:
    model: MultitaskModel
    networks: dict[
        str, nn.Module
    ]  # what a step of each task calls: the encoder and its head (DDP over ranks)
    parameters: dict[str, list[nn.Parameter]]  # what a step of each task trains
    optimizers: dict[str, torch.optim.Optimizer]
    streams: dict[str, TaskStream]
    scheduler: Scheduler
    scaler: torch.amp.GradScaler
    balancer: Balancer | None = None  # schedule=mixed: how a step's tasks combine

    @property
    def shared_optimizer(self) -> torch.optim.Optimizer:
        """The one optimizer every task steps (optimizer_per_task=false, which schedule=mixed
        resolves to): `optimizers` names it once per task."""
        distinct = {id(o): o for o in self.optimizers.values()}
        if len(distinct) != 1:
            raise ValueError(
                f"{len(distinct)} optimizers, one per task: no shared one (optimizer_per_task=true)"
            )
        return next(iter(distinct.values()))

    @property
    def sharded(self) -> bool:
        """strategy=fsdp over several processes: the model's tensors are each process's shards."""
        return is_sharded(self.model)

    def model_state(self) -> dict[str, Any]:
        """The model's weights, whole (under strategy=fsdp every process must call it)."""
        return whole_state(self.model)

    def state_dict(self) -> dict[str, Any]:
        """What of it a checkpoint holds (plain values, so it loads with `weights_only`): whole
        tensors at any number of processes and either strategy, so a run resumes with any."""
        return {
            "model": self.model_state(),
            "optimizers": {task: whole_optimizer_state(opt) for task, opt in self.optimizers.items()},
            "streams": {task: stream.state_dict() for task, stream in self.streams.items()},
            "scaler": self.scaler.state_dict(),
            **({"balancer": self.balancer.state_dict()} if self.balancer is not None else {}),
            **({"schedule": shares} if (shares := self.scheduler.state_dict()) is not None else {}),
        }

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        load_whole_state(self.model, saved["model"])
        for task, optimizer in self.optimizers.items():
            load_whole_optimizer_state(optimizer, saved["optimizers"][task])
        for task, stream in self.streams.items():
            stream.load_state_dict(saved["streams"][task])
        if saved.get("scaler"):
            self.scaler.load_state_dict(saved["scaler"])
        if self.balancer is not None:
            self.balancer.load_state_dict(saved["balancer"])
        self.scheduler.load_state_dict(saved.get("schedule"))


def build_setup(config: TrainConfig, data: TrainingData, dist: Distributed, device: torch.device) -> Setup:
    """`config` resolved (`resolve_settings`); the model's initial weights come from the torch seed."""
    model = build_model(config, data, device).to(device)
    if config.run.strategy == "fsdp" and dist.active:  # (alone, a process has nothing to shard over)
        shard(model, device)  # before the optimizers: they hold the sharded parameters
    training = config.training_tasks  # a train=false task has no optimizer, stream or network
    # Trained word vectors (embeddings=trainable|both: the shared encoder's, and those of an
    # encoder a head holds, Quick-Thoughts' g) take embedding_lr= and no weight decay; they go
    # last, so that an optimizer's first group, whose lr a task logs, is the encoder's.
    word_vectors = list(
        {
            id(p): p
            for module in model.modules()
            if isinstance(module, Encoder) and module.embedding is not None
            for p in module.embedding.parameters()
            if p.requires_grad
        }.values()
    )
    parameters = {
        task: sorted(  # each once: a head's encoder may share parameters with the shared one
            {
                id(p): p
                for m in (model.encoder, model.heads[task])
                for p in m.parameters()
                if p.requires_grad
            }.values(),
            key=lambda p: any(p is vector for vector in word_vectors),
        )
        for task in training
    }
    pretrained = (
        {id(p) for p in model.encoder.parameters()} if traits(config.model.encoder).pretrained else set()
    )
    sizes = {task: len(data.examples[task]["train"]) for task in config.tasks}
    seeds = seed_indices(config.tasks)
    scheduler = task_scheduler(config, sizes)
    balancer = None
    if scheduler.mixed:
        own = config.schedule.balancer_options
        balancer = BALANCERS[config.schedule.balancer](
            scheduler.tasks,
            [config.tasks[task].weight for task in scheduler.tasks],
            seed=config.run.seed,
            **({"options": own} if not isinstance(own, NoOptions) else {}),  # only to one that has keys
        ).to(device)
    return Setup(
        model=model,
        networks={task: task_network(model, task, dist) for task in training},
        parameters=parameters,
        optimizers=build_optimizers(
            config.optim,
            parameters,
            pretrained,
            list(balancer.parameters()) if balancer else None,
            learning_rates(
                config.optim,
                {task: config.tasks[task].lr for task in training},
                [p for p in model.encoder.parameters() if p.requires_grad],
                {task: [p for p in model.heads[task].parameters() if p.requires_grad] for task in training},
                word_vectors,
            ),
            undecayed={id(p) for p in word_vectors},
        ),
        streams={
            task: TaskStream(
                data.examples[task]["train"],
                data.bucket_keys(task, "train"),
                config.tasks[task].batch,
                seed=[config.run.seed, seeds[task]],
                window=BUCKET_WINDOW if config.schedule.bucket else 1,  # 1: no sorting across batches
                contiguous=data.tasks[task].batching == "contiguous",
                distinct=data.examples[task]["train"].sentences
                if data.tasks[task].in_batch and config.schedule.no_duplicates
                else None,
            )
            for task in training
        },
        scheduler=scheduler,
        scaler=grad_scaler(config.run.precision, device),
        balancer=balancer,
    )


def build_model(config: TrainConfig, data: TrainingData, device: torch.device) -> MultitaskModel:
    """The shared encoder and each task's head, checked first to fit `device`'s memory."""
    vectors, head = data.embeddings, config.head

    def build(embedding: nn.Embedding | None) -> MultitaskModel:
        encoder = build_encoder(embedding, config.model)
        heads = {
            name: task.head(encoder, head.head_hidden, head.head_layers, head.dropout)
            for name, task in data.tasks.items()
        }
        return MultitaskModel(encoder, heads)

    if vectors is not None:  # (a pretrained encoder's size is what it is)
        check_fits(
            lambda: build(word_embedding(torch.empty(vectors.shape, device="meta"), config.model.embeddings)),
            device,
            f"hidden={config.model.hidden} (encoder={config.model.encoder}, head_hidden={head.head_hidden})",
        )
    return build(
        None if vectors is None else word_embedding(torch.from_numpy(vectors), config.model.embeddings)
    )


def task_network(model: MultitaskModel, task: str, dist: Distributed) -> nn.Module:
    """The encoder and `task`'s head; over several ranks, wrapped in DDP (sharded: entered
    through the sharded model, whose units gather and reduce their own parameters).

    One DDP per task, sharing the encoder: a step then all-reduces the gradients of the
    parameters it trains only, not zeros for the other tasks' heads (a DDP of the whole
    model would, with `find_unused_parameters`). A DDP ignores backward passes of another's
    forward.
    """
    if is_sharded(model):
        return ShardedTaskNetwork(model, task)
    network = TaskNetwork(model, task)
    if not dist.active:
        return network
    return DistributedDataParallel(
        network,
        device_ids=None,  # inputs stay where they are: the lengths on the CPU, not copied to the GPU
        find_unused_parameters=model.encoder.pair_model,  # a pair model may skip its pooling
    )


class TaskNetwork(nn.Module):
    """One task's path through the multitask model: its encoder and its head."""

    def __init__(self, model: MultitaskModel, task: str):
        super().__init__()
        self.encoder, self.head = model.encoder, model.heads[task]

    def forward(self, sentences: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        return self.head(self.encoder, sentences)
