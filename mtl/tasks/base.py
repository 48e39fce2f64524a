"""The task contract: what a run needs from a task, and the registry of task kinds.

A task owns everything about itself: where its data comes from and its splits, the
sentence positions of an example, its head (a feature recipe over the shared encoder's
embeddings, or a module of its own), its loss, the metric that picks the best checkpoint,
and the keys a user sets under its name (`<task>.steps=`, `<task>.batch=`, ...).
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from mtl.config import BOOLEAN_WORDS, AtLeast1, PositiveFloat
from mtl.data.texts import LabelledTexts
from mtl.errors import UserError
from mtl.models.heads import HeadRecipe, TaskHead

SPLITS = ("train", "dev", "test")  # dev picks the best checkpoint; test is scored once, at the end


@dataclass
class TaskConfig:
    """The keys every task has, set as `<task>.<key>=`; a task kind adds its own."""

    kind: str = ""  # the registered task code that reads this task's data
    steps: AtLeast1 = 100  # steps per block of schedule=blocks (leave a task out with tasks=)
    batch: AtLeast1 = 64  # examples per step
    max_train: AtLeast1 | None = None  # first N training examples only (quick runs)
    train: bool = (
        True  # false: evaluated at every evaluation, never trained (a probe scores a classification task)
    )
    probe_train: AtLeast1 = 2000  # train=false: training examples a linear probe is fitted on
    weight: PositiveFloat = 1.0  # scales the task's loss (in its own steps, and in schedule=mixed's sum)
    prob: PositiveFloat | None = (
        None  # schedule=proportional/temperature: this share of steps instead of by size
    )


def task_key(config_class: type[TaskConfig], key: str, value: str) -> str:
    """The key `<task>.key=value` sets: `train=` says whether a task trains, but a task kind whose
    training file is a key (`train_file`: pairs, sts) had that file under `train` before, and a
    value that is not true or false still means the file."""
    fields = {f.name for f in dataclasses.fields(config_class)}
    if key == "train" and "train_file" in fields and value.strip().lower() not in BOOLEAN_WORDS:
        return "train_file"
    return key


class Task:
    """One task of a run, as named in `tasks=`: its data, head, loss and metrics.

    The default is classification over a fixed number of sentences with a Siamese feature
    recipe (`recipe`): cross-entropy, and accuracy picking the best checkpoint. A task with
    another objective overrides `head`, `losses` and `scores`.
    """

    kind: ClassVar[str]  # the name it is registered under
    config_class: ClassVar[type[TaskConfig]] = TaskConfig
    display: ClassVar[str] = ""  # the dataset's name in reports ("SNLI"); the task's name when empty
    fixed_index: ClassVar[int | None] = None  # seeds its data order; fixed for the built-in tasks
    # Keys of the single-purpose config before tasks were plugins (`steps_nli`,
    # `schedule.steps_nli`): the old dotted path -> this task's key. They stay valid aliases.
    legacy_keys: ClassVar[dict[str, str]] = {}
    recipe: ClassVar[HeadRecipe]
    metric: ClassVar[str] = "acc"  # the dev metric that picks the best checkpoint
    label_dtype: ClassVar[type] = np.int64
    # "contiguous": a batch is a run of consecutive examples (sentences of a corpus in order),
    # the runs visited in a seeded order; "shuffled": examples drawn at random, bucketed by length.
    batching: ClassVar[str] = "shuffled"
    # The loss scores each example against the whole batch (in-batch candidates): a step is one
    # micro-batch, the ranks' rows are gathered (`gather_batch`), and evaluation scores whole
    # batches of the training size, so the metric means the same at any number of processes.
    in_batch: ClassVar[bool] = False
    # The metric is of the whole split (a correlation), not a mean over examples: evaluation
    # gathers every example's output and calls `corpus_metrics`.
    corpus_metric: ClassVar[bool] = False
    # Encoders in this task's head (their names in it) that the sentence embedding concatenates
    # after the shared one: Quick-Thoughts' output encoder g makes it [f(s); g(s)].
    embedding_parts: ClassVar[tuple[str, ...]] = ()
    # How a `train=false` task is scored: "probe" (a linear probe on frozen features: a
    # classification head means nothing untrained), "direct" (its metric needs no trained head:
    # a cosine, in-batch recall), "never" (its head is a trained model of its own).
    untrained: ClassVar[str] = "probe"

    def __init__(self, name: str, config: TaskConfig):
        self.name, self.config = name, config
        if not config.train and self.untrained == "never":
            raise UserError(
                f"{name}.train=false: a {self.kind} task's head is a model trained with it, so it cannot "
                "watch a run untrained; train it, or watch a task scored without one (sts, mnrl, a classification)"
            )

    @property
    def title(self) -> str:
        return title_of(self.name, self.kind, getattr(self.config, "display", ""))

    @property
    def input_name(self) -> str:
        """The key of this task's data in a run's recorded input fingerprints."""
        return self.name

    @property
    def source(self) -> str:
        """Where the task's data comes from, as a run records it beside the data's fingerprint."""
        return str(getattr(self.config, "source", None) or f"task {self.kind}")

    def input_artifact(self) -> Path | None:
        """A local dataset folder to record as a W&B input (by reference and digest), when there is one."""
        return None

    def resolve_inputs(self) -> TaskConfig:
        """This task's config with its data sources made absolute (a run records them)."""
        return self.config

    def splits(self, seed: int, max_eval: int | None) -> dict[str, LabelledTexts]:
        """train, dev (and test where the data has one), cut as the config asks."""
        found = {}
        for split in SPLITS:
            texts = self.load(split)
            if texts is None and split in ("train", "dev"):
                raise UserError(
                    f"task {self.name} has no {split} split (is {self.name}.{split}= empty?): every task needs "
                    "train data to train on and dev data that each evaluation scores"
                )
            if texts is None:
                continue
            found[split] = (
                texts.head(self.config.max_train) if split == "train" else texts.sample(max_eval, seed)
            )
        return found

    def load(self, split: str) -> LabelledTexts | None:
        """The whole `split` (one of SPLITS) as text columns and labels; None where it has none."""
        raise NotImplementedError

    def bind(self, table: Any, examples: dict[str, Any]) -> None:
        """Called once the run's sentences are indexed (`table`: the SentenceTable; `examples`:
        this task's TaskExamples by split), before the head is built: a task whose head depends
        on the data (Skip-Thought's output vocabulary) reads it here."""

    def head(self, encoder: nn.Module, hidden: int, layers: int, dropout: float) -> nn.Module:
        """The module that maps the encoder's work on a batch's sentences to this task's outputs."""
        return TaskHead(self.recipe, encoder, hidden, layers, dropout)

    def losses(self, outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """(B,) per-example training loss."""
        return nn.functional.cross_entropy(outputs.float(), labels, reduction="none")

    def scores(self, outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """(B,) per-example value of `metric` (their mean is the metric): here, 1 when right."""
        return (outputs.argmax(dim=-1) == labels).float()

    def dev_metrics(self) -> tuple[str, ...]:
        """The metrics an evaluation logs for the task, `metric` first (what select= may name)."""
        return (self.metric,) if self.corpus_metric else (self.metric, "loss")

    def corpus_metrics(self, outputs: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        """Metrics of a whole split's outputs, `metric` first (tasks with `corpus_metric`)."""
        raise NotImplementedError

    def bucket_key(self, lengths: np.ndarray) -> np.ndarray:
        """(N,) what length bucketing sorts examples by; `lengths`: (N, sentences)."""
        return self.recipe.bucket_key(lengths)


KINDS: dict[str, type[Task]] = {}


def register(cls: type[Task]) -> type[Task]:
    """Make a task kind available to `tasks=` under `cls.kind` (a test or a plugin may add its own)."""
    KINDS[cls.kind] = cls
    return cls


def kind_of(name: str) -> type[Task]:
    if name not in KINDS:
        raise UserError(
            f"unknown task {name!r}: choose one of {', '.join(KINDS)}, or give a task file (.toml) "
            "(a plugin's own kind: load it with plugins=)"
        )
    return KINDS[name]


def config_class_for(name: str, values: dict[str, Any]) -> type[TaskConfig]:
    """The config class of the task entry `name` read back from a run's record."""
    kind = values.get("kind") if isinstance(values, dict) else None
    return kind_of(kind if isinstance(kind, str) and kind else name).config_class


def title_of(name: str, kind: str, display: str = "") -> str:
    """How reports name a task: the `display` its config gives, else its kind's dataset name when
    the task is that kind under its own name (`nli`: SNLI), else the task's name."""
    if display:
        return display
    registered = KINDS.get(kind)
    return registered.display if registered is not None and registered.display and name == kind else name


def seed_indices(tasks: dict[str, TaskConfig]) -> dict[str, int]:
    """The number that seeds each task's data order: fixed for the built-in tasks (so runs keep
    their data order across versions), a stable number from its name for any other."""
    indices = {}
    for name, config in tasks.items():
        fixed = kind_of(config.kind).fixed_index
        indices[name] = fixed if fixed is not None and name == config.kind else _stable_index(name)
    return indices


def _stable_index(name: str) -> int:
    return 1000 + int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big")
