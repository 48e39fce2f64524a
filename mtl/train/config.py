"""Configuration of a multitask training run: one dataclass per component."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mtl.errors import UserError
from mtl.models.encoders.base import EncoderConfig
from mtl.train.scheduler import SCHEDULES


@dataclass
class DataConfig:
    snli: str | None = None  # folder or Hub id; None: $MTL_DATA_DIR/snli, else stanfordnlp/snli
    nli_train_split: str = "train"
    nli_dev_split: str = "dev"
    nli_test_split: str = "test"
    classifsquad: str = "data/classifsquad"  # the builder's output; built there when missing
    vectors: str | None = None  # GloVe file; None: MTL_VECTORS, $MTL_DATA_DIR/glove, or download
    lowercase: bool = True
    max_nli_train: int | None = None  # first N training pairs only (quick runs)
    max_squad_train: int | None = None
    max_eval: int | None = None  # first N dev/test examples per task only (quick runs)

    def __post_init__(self) -> None:
        for name in ("max_nli_train", "max_squad_train", "max_eval"):
            if (value := getattr(self, name)) is not None and value < 1:
                raise UserError(f"{name}={value} must be 1 or more (or none)")


@dataclass
class HeadConfig:
    head_hidden: int = 512
    head_layers: int = 2  # hidden layers of each task's MLP
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.head_hidden < 1 or self.head_layers < 0:
            raise UserError(
                f"head_hidden={self.head_hidden} must be >= 1 and head_layers={self.head_layers} >= 0"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise UserError(f"dropout={self.dropout} must be in [0, 1)")


@dataclass
class ScheduleConfig:
    schedule: Literal["blocks", "round_robin", "proportional", "temperature"] = "blocks"
    steps_nli: int = 1000
    steps_squad: int = 500
    temperature: float = 2.0
    batch_nli: int = 64
    batch_squad: int = 128

    def __post_init__(self) -> None:
        assert self.schedule in SCHEDULES
        if self.steps_nli < 0 or self.steps_squad < 0:
            raise UserError(
                f"steps_nli={self.steps_nli} and steps_squad={self.steps_squad} must not be negative"
            )
        if self.steps_nli == 0 and self.steps_squad == 0:
            raise UserError("steps_nli=0 and steps_squad=0: at least one task must train")
        for name in ("batch_nli", "batch_squad"):
            if getattr(self, name) < 1:
                raise UserError(f"{name}={getattr(self, name)} must be 1 or more")
        if self.temperature <= 0:
            raise UserError(f"temperature={self.temperature} must be positive")

    @property
    def steps(self) -> dict[str, int]:
        return {"nli": self.steps_nli, "squad": self.steps_squad}

    @property
    def batch_sizes(self) -> dict[str, int]:
        return {"nli": self.batch_nli, "squad": self.batch_squad}


@dataclass
class OptimConfig:
    optim: Literal["sgd", "adam"] = "sgd"
    lr: float = 0.1  # InferSent, Conneau et al. 2017, Section 3.3
    lr_decay: float = 0.99  # after each pass over a task's training data
    lr_shrink: float = 5.0  # divide when the task's dev accuracy drops
    min_lr: float = 1e-5  # stop when the main task's lr falls below
    max_grad_norm: float = 5.0  # 0 turns clipping off
    optimizer_per_task: bool = True  # as the original code; false: one shared optimizer
    max_steps: int | None = None  # optimizer steps over all tasks

    def __post_init__(self) -> None:
        if self.lr <= 0 or self.min_lr < 0:
            raise UserError(f"lr={self.lr} must be positive and min_lr={self.min_lr} not negative")
        if not 0 < self.lr_decay <= 1 or self.lr_shrink < 1:
            raise UserError(f"lr_decay={self.lr_decay} must be in (0, 1] and lr_shrink={self.lr_shrink} >= 1")
        if self.max_steps is not None and self.max_steps < 1:
            raise UserError(f"max_steps={self.max_steps} must be 1 or more (or none)")


@dataclass
class RunConfig:
    name: str = "multitask"
    out: str | None = None  # run folder; None: runs/<name>-<time>
    seed: int = 1234
    device: str = "auto"  # auto: cuda when available
    eval_every: int | None = None  # steps; None: at the end of every cycle of the schedule
    checkpoint_every: int = 500
    eval_batch: int = 256
    wandb: Literal["auto", "online", "offline", "disabled"] = "auto"
    wandb_project: str = "mtl"

    def __post_init__(self) -> None:
        if self.eval_every is not None and self.eval_every < 1:
            raise UserError(f"eval_every={self.eval_every} must be 1 or more (or none)")
        if self.checkpoint_every < 1:
            raise UserError(f"checkpoint_every={self.checkpoint_every} must be 1 or more")


@dataclass
class TrainConfig:
    data: DataConfig = field(default_factory=DataConfig)
    model: EncoderConfig = field(default_factory=EncoderConfig)
    head: HeadConfig = field(default_factory=HeadConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    run: RunConfig = field(default_factory=RunConfig)

    @property
    def tasks(self) -> list[str]:
        return [task for task, steps in self.schedule.steps.items() if steps > 0]

    @property
    def main_task(self) -> str:
        """The task whose dev accuracy picks the best checkpoint and whose lr ends the run."""
        return "nli" if "nli" in self.tasks else "squad"
