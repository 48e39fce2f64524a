"""`distill`: the shared encoder learns a teacher encoder's embeddings of the task's sentences.

Three losses, as the papers define them: `mse` puts the student's embedding (through a linear
map when the widths differ; the map belongs to the task, not to the exported encoder) on the
teacher's (Reimers & Gurevych 2020, "Making monolingual sentence embeddings multilingual");
`margin_mse` matches the margin cos(q, p) - cos(q, n) of (query, positive, negative) triples to
the teacher's (Hofstätter et al. 2020, MarginMSE, on embedding similarities here); `kl` makes
each anchor's softmax over the batch's candidates that of the teacher (in-batch: the candidates
of every process, as mnrl's).

The teacher (any encoder mtl loads: a run, an exported encoder, a Hugging Face model) embeds the
task's distinct sentences once, before training (mtl/train/data/teacher.py, cached on disk); each
example's label is its row in the table of the teacher's embeddings.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from mtl.data.snli import load_snli
from mtl.data.texts import LabelledTexts
from mtl.errors import UserError
from mtl.runtime.distributed import gather_batch
from mtl.tasks.base import Task, at_least_fp32
from mtl.tasks.configs import SPLITS, DistillConfig
from mtl.tasks.inputs import DistillInputs
from mtl.tasks.kinds import register
from mtl.tasks.ranking import snli_split, snli_triples
from mtl.text.unicode import decode_utf8, text_lines

SENTENCES_NEEDED = {"mse": 1, "margin_mse": 3, "kl": 2}  # per example, at least


class DistillHead(nn.Module):
    """Each example's sentences embedded by the student: (B, k, D), D the teacher's width where
    `projection` maps the student's onto it."""

    def __init__(self, projection: nn.Module | None):
        super().__init__()
        self.projection = projection

    def forward(self, encoder, sentences) -> torch.Tensor:
        embeddings = torch.stack(
            [at_least_fp32(encoder(tokens, lengths)) for tokens, lengths in sentences], dim=1
        )
        return self.projection(embeddings) if self.projection is not None else embeddings


@register
class Distill(DistillInputs, Task):
    config_class = DistillConfig
    display = "distillation"
    metric = "mse"  # lower is better; loss=kl: "kl"
    config: DistillConfig

    def __init__(self, name: str, config: DistillConfig):
        super().__init__(name, config)
        self.in_batch = config.loss == "kl"  # every anchor against the whole batch's candidates
        self.metric = "kl" if config.loss == "kl" else "mse"
        self.teacher_texts: list[str] = []  # what the teacher embeds (set by bind)
        self.example_rows: np.ndarray | None = None  # (examples, k): rows of `teacher_embeddings`
        self.teacher_embeddings: torch.Tensor | None = None  # (texts, D), set by take_teacher
        self._on_device: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}

    @property
    def source(self) -> str:
        if self.config.sentences_of:
            return f"the sentences of task {self.config.sentences_of}, teacher {self.config.teacher}"
        data = self.config.corpus or self.config.source or "SNLI"
        return f"{data}, teacher {self.config.teacher}"

    @property
    def borrows(self) -> str | None:
        return self.config.sentences_of or None

    def splits(self, seed: int, max_eval: int | None) -> dict[str, LabelledTexts]:
        if not self.config.corpus:
            return super().splits(seed, max_eval)
        examples = self._corpus_examples()
        held = min(self.config.dev_size, len(examples) // 10)  # at most a tenth of a small file
        order = np.random.default_rng(seed).permutation(len(examples))
        dev = sorted(order[:held].tolist())
        train = sorted(order[held:].tolist())
        if not dev or not train:
            raise UserError(
                f"{self.name}.corpus={self.config.corpus}: {len(examples)} examples is too few to hold out "
                "a dev share: give at least 10 lines"
            )
        cut = {"train": [examples[i] for i in train], "dev": [examples[i] for i in dev]}
        found = {split: _texts(rows) for split, rows in cut.items()}
        found["train"] = found["train"].head(self.config.max_train)
        found["dev"] = found["dev"].sample(max_eval, seed)
        return found

    def splits_from(self, donor: dict[str, LabelledTexts]) -> dict[str, LabelledTexts]:
        """Every sentence of the other task's examples, each example's sentences together (mse
        compares each with the teacher's); its train split cut to this task's max_train."""
        found = {split: _unlabelled(texts) for split, texts in donor.items()}
        found["train"] = found["train"].head(self.config.max_train)
        return found

    def load(self, split: str) -> LabelledTexts | None:
        """SNLI's `split`: (premise, hypothesis) pairs for mse; (premise, entailed, contradicted)
        triples for margin_mse and kl."""
        name = snli_split(self.config, split)
        if not name:
            return None
        pairs = load_snli(self.config.source, name, self.name, split)
        if self.config.loss == "mse":
            return LabelledTexts([list(c) for c in pairs.columns], [0] * len(pairs))
        return snli_triples(pairs, hard_negatives=True)

    def _corpus_examples(self) -> list[list[str]]:
        path = self._corpus_path()
        lines = [
            line for line in text_lines(decode_utf8(path.read_bytes(), "corpus file", path)) if line.strip()
        ]
        examples = [line.split("\t") for line in lines]
        widths = {len(example) for example in examples}
        needed = SENTENCES_NEEDED[self.config.loss]
        if (
            len(widths) > 1
            or min(widths, default=0) < needed
            or (self.config.loss == "margin_mse" and widths != {3})
        ):
            what = (
                "3 (query, positive, negative)" if self.config.loss == "margin_mse" else f"at least {needed}"
            )
            raise UserError(
                f"{self.name}.corpus={self.config.corpus}: every line needs the same number of tab-separated "
                f"sentences, {what} for {self.name}.loss={self.config.loss}; found {sorted(widths) or 'none'}"
            )
        return examples

    def bind(self, table, examples) -> None:
        """Each example's label becomes its place in this task's rows of sentences (splits one after
        another), whose distinct texts the teacher embeds (`teacher_texts`)."""
        ordered = [split for split in SPLITS if split in examples]
        rows = np.concatenate([examples[split].sentences for split in ordered])
        distinct, self.example_rows = np.unique(rows, return_inverse=True)
        self.example_rows = self.example_rows.reshape(rows.shape)
        # The teacher reads the sentences as they are: without the student's `prompt=`.
        self.teacher_texts = [table.texts[row].removeprefix(self.config.prompt) for row in distinct]
        start = 0
        for split in ordered:
            count = len(examples[split])
            examples[split].labels = np.arange(start, start + count, dtype=np.int64)
            start += count

    def teacher(self) -> tuple[str, int, list[str]]:
        """(teacher, an hf teacher's max_seq_length, the sentences it embeds), for training to embed."""
        return self.config.teacher, self.config.teacher_max_seq_length, self.teacher_texts

    def take_teacher(self, embeddings: np.ndarray) -> None:
        if len(embeddings) != len(self.teacher_texts):
            raise UserError(
                f"{self.name}: the teacher gave {len(embeddings)} embeddings for {len(self.teacher_texts)} sentences"
            )
        self.teacher_embeddings = torch.from_numpy(np.ascontiguousarray(embeddings, dtype=np.float32))
        self._on_device.clear()

    def head(self, encoder: nn.Module, hidden: int, layers: int, dropout: float) -> nn.Module:
        if encoder.pair_model:
            raise UserError(f"{self.name}: distillation embeds sentences alone; encoder=decomposable cannot")
        if self.teacher_embeddings is None:
            raise UserError(
                f"{self.name}: the teacher's embeddings were not computed (prepare the data first)"
            )
        width = self.teacher_embeddings.shape[1]
        maps = self.config.loss == "mse" and encoder.output_dim != width
        return DistillHead(nn.Linear(encoder.output_dim, width) if maps else None)

    def _targets(self, labels: torch.Tensor) -> torch.Tensor:
        """(B, k, D) the teacher's embeddings of each example's sentences."""
        if labels.device not in self._on_device:
            assert self.teacher_embeddings is not None and self.example_rows is not None
            self._on_device[labels.device] = (
                self.teacher_embeddings.to(labels.device),
                torch.from_numpy(self.example_rows).to(labels.device),
            )
        table, rows = self._on_device[labels.device]
        return table[rows[labels]]

    def losses(self, outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        teacher = self._targets(labels)
        if self.config.loss == "mse":  # per example: the mean over its sentences and dimensions
            return (outputs - teacher).pow(2).mean(dim=(1, 2))
        if self.config.loss == "margin_mse":
            return (_margin(outputs) - _margin(teacher)).pow(2)
        student_scores = self._in_batch_scores(outputs)
        teacher_scores = self._in_batch_scores(teacher)
        return nn.functional.kl_div(
            student_scores.log_softmax(dim=1),
            teacher_scores.log_softmax(dim=1),
            log_target=True,
            reduction="none",
        ).sum(dim=1)

    def scores(self, outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.losses(outputs, labels).detach()

    def _in_batch_scores(self, embeddings: torch.Tensor) -> torch.Tensor:
        """(B, C) scaled cosines of each anchor with every candidate of the batch (the processes'
        candidates gathered: the positives, then the further columns), as mnrl scores."""
        anchors = embeddings[:, 0]
        candidates, _ = gather_batch(embeddings[:, 1:].transpose(0, 1).reshape(-1, embeddings.shape[-1]))
        normalized = nn.functional.normalize
        return self.config.scale * normalized(anchors, dim=-1) @ normalized(candidates, dim=-1).T

    def bucket_key(self, lengths: np.ndarray) -> np.ndarray:
        return lengths.max(axis=1)


def _margin(embeddings: torch.Tensor) -> torch.Tensor:
    """cos(query, positive) - cos(query, negative) of (B, 3, D) triples."""
    query, positive, negative = embeddings.unbind(dim=1)
    cosine = nn.functional.cosine_similarity
    return cosine(query, positive, dim=-1) - cosine(query, negative, dim=-1)


def _texts(examples: list[list[str]]) -> LabelledTexts:
    return LabelledTexts([list(column) for column in zip(*examples, strict=True)], [0] * len(examples))


def _unlabelled(texts: LabelledTexts) -> LabelledTexts:
    """`texts` (a split, or the part of one max_eval= drew, with its whole) without their labels."""
    whole = None if texts.whole is None else _unlabelled(texts.whole)
    return LabelledTexts(texts.columns, [0] * len(texts), texts.part, whole)
