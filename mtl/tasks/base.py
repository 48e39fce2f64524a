"""The task contract: what a run needs from a task (the registry of kinds: kinds.py).

A task owns everything about itself: where its data comes from and its splits, the
sentence positions of an example, its head (a feature recipe over the shared encoder's
embeddings, or a module of its own), its loss, the metric that picks the best checkpoint,
and the keys a user sets under its name (`<task>.steps=`, `<task>.batch=`, ...).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from mtl.data.texts import LabelledTexts
from mtl.errors import UserError
from mtl.models.heads import AtWidths, HeadRecipe, TaskHead
from mtl.tasks.configs import SPLITS, TaskConfig
from mtl.tasks.inputs import TaskInputs, asks_widths
from mtl.tasks.kinds import title_of
from mtl.tasks.matryoshka import matryoshka_widths, over_widths


class Task(TaskInputs):
    """One task of a run, as named in `tasks=`: its data, head, loss and metrics (its keys'
    checks and its inputs: `TaskInputs`, inputs.py).

    The default is classification over a fixed number of sentences with a Siamese feature
    recipe (`recipe`): cross-entropy, and accuracy picking the best checkpoint. A task with
    another objective overrides `head`, `losses` and `scores`.
    """

    config_class: ClassVar[type[TaskConfig]] = TaskConfig
    display: ClassVar[str] = ""  # the dataset's name in reports ("SNLI"); the task's name when empty
    fixed_index: ClassVar[int | None] = None  # seeds its data order; fixed for the built-in tasks
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
    # Its examples are (anchor, positive[, negative]) rows whose other rows' sentences are each
    # anchor's in-batch negatives (mnrl): a candidate that is its anchor's positive in another row
    # of the data is a false negative, counted at the start of a run (false_negatives/<task>).
    anchors_positives: ClassVar[bool] = False
    # The metric is of the whole split (a correlation), not a mean over examples: evaluation
    # gathers every example's output and calls `corpus_metrics`.
    corpus_metric: ClassVar[bool] = False
    # Encoders in this task's head (their names in it) that the sentence embedding concatenates
    # after the shared one: Quick-Thoughts' output encoder g makes it [f(s); g(s)].
    embedding_parts: ClassVar[tuple[str, ...]] = ()

    def mini_batch(self, config: TaskConfig) -> int | None:
        """GradCache's chunk under a run's `config` of this task (grad_cache.py): an in-batch task
        that declares one embeds its batch that many examples at a time, its loss still over the
        whole batch; None: all at once. The run's config, not the one the data was prepared with:
        trainers that share prepared data (the benches) differ in it."""
        return None

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

    def splits(self, seed: int, max_eval: int | None) -> dict[str, LabelledTexts]:
        """train, dev (and test where the data has one), cut as the config asks."""
        found = {}
        for split in SPLITS:
            texts = self.load_first(split, self.config.max_train) if split == "train" else self.load(split)
            if texts is None and split in ("train", "dev"):
                raise UserError(
                    f"task {self.name} has no {split} split (is {self.name}.{split}= empty?): every task needs "
                    "train data to train on and dev data that each evaluation scores"
                )
            if texts is None:
                continue
            found[split] = texts if split == "train" else texts.sample(max_eval, seed)
        return found

    def load(self, split: str) -> LabelledTexts | None:
        """The whole `split` (one of SPLITS) as text columns and labels; None where it has none."""
        raise NotImplementedError

    def load_first(self, split: str, count: int | None) -> LabelledTexts | None:
        """The first `count` examples of `split` (all when None): the whole split, cut, unless the
        task can read its files in part (ClassifSQuAD's)."""
        texts = self.load(split)
        return None if texts is None else texts.head(count)

    @property
    def borrows(self) -> str | None:
        """The run's other task whose splits this task's examples are made from (`splits_from`),
        read before this task's; None: its own data (`splits`)."""
        return None

    def splits_from(self, donor: dict[str, LabelledTexts]) -> dict[str, LabelledTexts]:
        """This task's splits made from `borrows`' splits (as cut, before any prompt)."""
        raise NotImplementedError

    def bind(self, table: Any, examples: dict[str, Any]) -> None:
        """Called once the run's sentences are indexed (`table`: the SentenceTable; `examples`:
        this task's TaskExamples by split), before the head is built: a task whose head depends
        on the data (Skip-Thought's output vocabulary) reads it here."""

    def teacher(self) -> tuple[str, int, list[str]] | None:
        """(teacher encoder, an hf teacher's max_seq_length, the sentences it embeds) for a task that
        learns another encoder's embeddings (distill): training embeds them once (cached) and hands
        them to `take_teacher`, after `bind` and before `head`. None: the task learns from labels."""
        return None

    def take_teacher(self, embeddings: np.ndarray) -> None:
        """The teacher's (sentences, D) embeddings of `teacher()`'s sentences, in their order."""

    def head(self, encoder: nn.Module, hidden: int, layers: int, dropout: float) -> nn.Module:
        """The module that maps the encoder's work on a batch's sentences to this task's outputs."""
        if encoder.pair_model and asks_widths(self.config):
            raise UserError(
                f"{self.name}.matryoshka={self.config.matryoshka}: encoder={type(encoder).__name__} "
                "compares sentence pairs and has no sentence embedding to cut"
            )
        widths = () if encoder.pair_model else matryoshka_widths(self.config, self.name, encoder.output_dim)
        return TaskHead(self.recipe, encoder, hidden, layers, dropout, widths)

    def losses(self, outputs: torch.Tensor | AtWidths, labels: torch.Tensor) -> torch.Tensor:
        """(B,) per-example training loss (with matryoshka=, summed over the widths)."""

        def cross_entropy(logits: torch.Tensor) -> torch.Tensor:
            logits = at_least_fp32(logits)  # (bf16/fp16 under autocast)
            return nn.functional.cross_entropy(logits, labels, reduction="none")

        if isinstance(outputs, AtWidths):
            return over_widths(cross_entropy, outputs.full, outputs.truncated)
        return cross_entropy(outputs)

    def scores(self, outputs: torch.Tensor | AtWidths, labels: torch.Tensor) -> torch.Tensor:
        """(B,) per-example value of `metric` (their mean is the metric): here, 1 when right (at
        the full width)."""
        logits = outputs.full if isinstance(outputs, AtWidths) else outputs
        return (logits.argmax(dim=-1) == labels).float()

    def dev_metrics(self) -> tuple[str, ...]:
        """The metrics an evaluation logs for the task, `metric` first (what select= may name)."""
        return (self.metric,) if self.corpus_metric else (self.metric, "loss")

    def corpus_metrics(self, outputs: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        """Metrics of a whole split's outputs, `metric` first (tasks with `corpus_metric`)."""
        raise NotImplementedError

    def bucket_key(self, lengths: np.ndarray) -> np.ndarray:
        """(N,) what length bucketing sorts examples by; `lengths`: (N, sentences)."""
        return self.recipe.bucket_key(lengths)


def at_least_fp32(values: torch.Tensor) -> torch.Tensor:
    """`values` in float32 for a loss (autocast's bf16 or fp16 widened), float64 kept: the affinity
    lookahead scores losses in float64 (mtl/train/callbacks/affinity.py)."""
    return values if values.dtype == torch.float64 else values.float()
