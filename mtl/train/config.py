"""Configuration of a multitask training run: one dataclass per component."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from mtl.config import AtLeast0, AtLeast1, NonNegativeFloat, PositiveFloat, Range
from mtl.errors import UserError
from mtl.models.encoders.base import EncoderConfig
from mtl.models.encoders.transformer import MAX_POSITIONS
from mtl.train.scheduler import SCHEDULES


@dataclass
class DataConfig:
    snli: str | None = None  # folder or Hub id; None: $MTL_DATA_DIR/snli, else stanfordnlp/snli
    nli_train_split: str = "train"  # SNLI split to train on (train_small: the shared slice)
    nli_dev_split: str = "dev"  # SNLI split that picks the best checkpoint
    nli_test_split: str = "test"  # SNLI split tested once, at the end
    classifsquad: str = "data/classifsquad"  # the builder's output; built there when missing
    vectors: str | None = None  # GloVe file; None: MTL_VECTORS, $MTL_DATA_DIR/glove, or download
    lowercase: bool = True  # lowercase tokens (GloVe 6B is uncased)
    tokenizer: Literal["spacy", "treebank"] = "spacy"  # treebank: as a classifsquad-paper build (mtl[paper])
    max_nli_train: AtLeast1 | None = None  # first N training pairs only (quick runs)
    max_squad_train: AtLeast1 | None = None  # first N training triples only (quick runs)
    max_eval: AtLeast1 | None = None  # N dev/test examples per task, drawn at random (seeded; quick runs)
    max_tokens: AtLeast1 = (
        512  # words per sentence (word encoders); longer ones are cut at read time, counted
    )


@dataclass
class HeadConfig:
    head_hidden: AtLeast1 = 512  # width of each hidden layer of the task MLPs
    head_layers: AtLeast0 = 2  # hidden layers of each task's MLP
    dropout: Annotated[float, Range(0, 1, high_open=True)] = 0.0  # in the task MLPs


@dataclass
class ScheduleConfig:
    schedule: Literal["blocks", "round_robin", "proportional", "temperature"] = (
        "blocks"  # which task each step trains
    )
    steps_nli: AtLeast0 = 1000  # NLI steps per block (0: no NLI)
    steps_squad: AtLeast0 = 500  # ClassifSQuAD steps per block (0: no ClassifSQuAD)
    temperature: PositiveFloat = 2.0  # schedule=temperature: sample tasks by size**(1/T)
    batch_nli: AtLeast1 = 64  # NLI pairs per step
    batch_squad: AtLeast1 = 128  # ClassifSQuAD triples per step
    bucket: bool = (
        True  # batches of similar lengths (sorted windows of 50 batches, shuffled); false: plain shuffle
    )

    def __post_init__(self) -> None:
        assert self.schedule in SCHEDULES
        if self.steps_nli == 0 and self.steps_squad == 0:
            raise UserError("steps_nli=0 and steps_squad=0: at least one task must train")

    @property
    def steps(self) -> dict[str, int]:
        return {"nli": self.steps_nli, "squad": self.steps_squad}

    @property
    def batch_sizes(self) -> dict[str, int]:
        return {"nli": self.batch_nli, "squad": self.batch_squad}


@dataclass
class OptimConfig:
    optim: Literal["auto", "sgd", "adam", "adamw"] = (
        "auto"  # auto: adamw for encoder=hf (SBERT), else sgd (InferSent); adam: stops by adam_patience
    )
    lr: PositiveFloat | None = None  # None: 0.1 for sgd (InferSent, Section 3.3), 1e-3 for adam and adamw
    hf_lr: PositiveFloat = 2e-5  # adamw: lr of the pretrained backbone (encoder=hf); lr= is the heads'
    warmup_steps: AtLeast0 | None = (
        None  # adamw: linear warmup, then linear decay to 0; None: 10% of max_steps
    )
    weight_decay: NonNegativeFloat = 0.01  # adamw: not on biases and LayerNorm, as SBERT
    lr_decay: Annotated[float, Range(0, 1, low_open=True)] = 0.99  # SGD: after each pass over a task's data
    lr_shrink: Annotated[float, Range(1)] = 5.0  # SGD: divide when dev accuracy is not above the best
    min_lr: NonNegativeFloat = 1e-5  # SGD: stop when the main task's lr falls below
    adam_patience: AtLeast1 = 2  # Adam: stop at this many evaluations not above the best (InferSent: 2)
    max_grad_norm: NonNegativeFloat | None = None  # clip the gradient norm; 0: off; None: 1 for adamw, else 5
    optimizer_per_task: bool = True  # as the original code; false: one shared optimizer
    max_steps: AtLeast1 | None = (
        None  # optimizer steps over all tasks; None with adamw: one epoch of the main task
    )
    accumulate: AtLeast1 = 1  # micro-batches per step: a step's batch in parts that fit memory, one update


@dataclass
class RunConfig:
    name: str = "multitask"  # run name (a preset's name by default)
    out: str | None = None  # run folder; None: runs/<name>-<time>
    seed: AtLeast0 = 1234  # model initialization, data order, dropout
    device: str = "auto"  # auto: cuda when available
    eval_every: AtLeast1 | None = None  # steps; None: at the end of every cycle of the schedule
    checkpoint_every: AtLeast1 = 500  # steps between checkpoints (a kill loses at most this many)
    eval_batch: AtLeast1 = 256  # sentences per batch when evaluating
    wandb: Literal["auto", "online", "offline", "disabled"] = (
        "auto"  # auto: online with an API key, else offline
    )
    wandb_project: str = "mtl"  # W&B project
    wandb_checkpoints: Literal["none", "best", "all"] = (
        "best"  # checkpoints uploaded as versions of the run's model artifact (250 MB each at paper size)
    )
    group: str | None = None  # W&B group (a sweep's name); None: the run name (a preset's name)
    precision: Literal["auto", "fp32", "bf16", "fp16"] = (
        "auto"  # autocast; auto: bf16 where supported (LSTMs on CUDA: fp32, on TF32)
    )


@dataclass
class TrainConfig:
    data: DataConfig = field(default_factory=DataConfig)
    model: EncoderConfig = field(default_factory=EncoderConfig)
    head: HeadConfig = field(default_factory=HeadConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def __post_init__(self) -> None:
        if self.model.encoder == "transformer" and self.data.max_tokens > MAX_POSITIONS:
            raise UserError(
                f"max_tokens={self.data.max_tokens} is more than encoder=transformer's {MAX_POSITIONS} "
                f"positions: give max_tokens={MAX_POSITIONS} or less"
            )

    @property
    def tasks(self) -> list[str]:
        return [task for task, steps in self.schedule.steps.items() if steps > 0]

    @property
    def main_task(self) -> str:
        """The task whose dev accuracy picks the best checkpoint and whose lr ends the run."""
        return "nli" if "nli" in self.tasks else "squad"
