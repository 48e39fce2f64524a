"""`qt`: Quick-Thoughts (Logeswaran & Lee 2018, Sections 3 and 4.3).

Over a corpus in order, an input encoder f (the run's shared encoder) embeds each sentence
and an output encoder g (same architecture, its own parameters) every candidate; scores are
inner products, and each sentence classifies which candidates of its batch (contiguous
sentences) are its neighbours within the context window. The sentence embedding is
[f(s); g(s)] (`embedding_parts`).

Where the paper and the authors' code (lajanugen/S2V, `s2v_model.py`) differ, this follows
the code: the sentence's own score is set to 0, not removed (`tf.matrix_set_diag(scores,
0)`), so it stays a candidate with a fixed logit; the target is the uniform distribution
over the window's neighbours (soft-target cross-entropy); `context=3` is its context_size=1.
Unlike the code, neighbours across a document boundary are not targets (BookCorpus was one
stream; SQuAD's passages are not).
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from mtl.data.texts import LabelledTexts
from mtl.errors import UserError
from mtl.models.encoders.base import Encoder
from mtl.models.heads import InBatchScores, Widths
from mtl.runtime.distributed import gather_batch
from mtl.tasks.base import Task, at_least_fp32
from mtl.tasks.configs import QTConfig
from mtl.tasks.context import CorpusTask
from mtl.tasks.inputs import QTInputs
from mtl.tasks.kinds import register
from mtl.tasks.matryoshka import matryoshka_widths, over_widths


def neighbour_labels(documents: list[list[str]], radius: int) -> list[int]:
    """Per sentence: how many sentences of its document come before and after it, each at most
    `radius`, as one number (before * (radius + 1) + after); its batch decides the rest."""
    labels = []
    for document in documents:
        for i in range(len(document)):
            labels.append(min(i, radius) * (radius + 1) + min(len(document) - 1 - i, radius))
    return labels


def neighbour_targets(labels: torch.Tensor, offset: int, candidates: int, radius: int) -> torch.Tensor:
    """(b, candidates) 1 where a candidate is in the sentence's window: `labels` from
    `neighbour_labels` for the b sentences at positions offset, offset+1, ... of the batch."""
    before, after = labels // (radius + 1), labels % (radius + 1)
    position = offset + torch.arange(len(labels), device=labels.device)
    targets = torch.zeros(len(labels), candidates, device=labels.device)
    for distance in range(1, radius + 1):
        for sign, allowed in ((-1, before), (1, after)):
            column = position + sign * distance
            valid = (allowed >= distance) & (column >= 0) & (column < candidates)
            rows = torch.nonzero(valid).flatten()
            targets[rows, column[rows]] = 1.0
    return targets


def fresh_copy(encoder: Encoder) -> Encoder:
    """An encoder of the same architecture with its own parameters: re-initialized when it trains
    from scratch, the same pretrained weights otherwise. Frozen word vectors are shared; trained
    ones (embeddings=trainable, both's trained half) are g's own copy, as its other weights: with
    one shared table a bag-of-words g would be f itself (Quick-Thoughts' BoW row, Appendix B,
    concatenates two encoders)."""
    embedding = encoder.embedding
    frozen = {} if embedding is None else {id(p): p for p in embedding.parameters() if not p.requires_grad}
    if embedding is not None and not any(p.requires_grad for p in embedding.parameters()):
        frozen[id(embedding)] = embedding  # the very module: exports and loads share it
    twin = copy.deepcopy(encoder, memo=frozen)
    if embedding is not None:
        for module in twin.modules():
            if module is not twin.embedding and module is not twin and hasattr(module, "reset_parameters"):
                module.reset_parameters()
    return twin


class QuickThoughtsHead(nn.Module):
    def __init__(self, encoder: Encoder, widths: Widths = ()):
        super().__init__()
        self.output_encoder = fresh_copy(encoder)  # g; the shared encoder is f
        self.widths = widths  # matryoshka=: f and g both cut to each width

    def forward(self, encoder: Encoder, sentences) -> InBatchScores:
        return self.score(self.embed(encoder, sentences))

    def embed(self, encoder: Encoder, sentences) -> list[torch.Tensor]:
        """f(s) and g(s) of the batch's sentences: (b, D) each."""
        tokens, lengths = sentences[0]
        return [at_least_fp32(encoder(tokens, lengths)), at_least_fp32(self.output_encoder(tokens, lengths))]

    def score(self, embeddings: list[torch.Tensor]) -> InBatchScores:
        """The batch's scores from its embeddings (GradCache calls the two halves apart)."""
        inputs, outputs = embeddings  # f(s): (b, D), g(s'): (b, D)
        candidates, offset = gather_batch(outputs)  # (B, D)
        own = offset + torch.arange(len(inputs), device=inputs.device)
        is_own = torch.zeros(len(inputs), len(candidates), dtype=torch.bool, device=inputs.device)
        is_own[torch.arange(len(inputs), device=inputs.device), own] = True

        def logits(width: int | None) -> torch.Tensor:  # on the first `width` dims of f and g
            return (inputs[:, :width] @ candidates[:, :width].T).masked_fill(is_own, 0.0)  # as S2V: logit 0

        truncated = tuple((weight, logits(width)) for width, weight in self.widths if self.training)
        return InBatchScores(logits(None), offset, truncated)


@register
class QuickThoughts(QTInputs, CorpusTask, Task):
    config_class = QTConfig
    display = "Quick-Thoughts"
    batching = "contiguous"
    in_batch = True
    metric = "recall_at_1"  # the top-scored candidate is a neighbour
    embedding_parts = ("output_encoder",)
    config: QTConfig

    def mini_batch(self, config: QTConfig) -> int | None:  # type: ignore[override]
        return config.mini_batch  # <task>.mini_batch=

    def __init__(self, name: str, config: QTConfig):
        super().__init__(name, config)
        self.radius = (config.context - 1) // 2

    def load(self, split: str, examples: int | None = None) -> LabelledTexts | None:
        documents = self.documents(split, examples)
        if documents is None:
            return None
        sentences = [sentence for document in documents for sentence in document]
        return LabelledTexts([sentences], neighbour_labels(documents, self.radius))

    def examples_in(self, document: list[str]) -> int:
        return len(document)  # each sentence, scored against its batch

    def head(self, encoder: nn.Module, hidden: int, layers: int, dropout: float) -> nn.Module:
        if encoder.pair_model:
            raise UserError(
                f"{self.name}: Quick-Thoughts embeds sentences alone; encoder=decomposable cannot"
            )
        return QuickThoughtsHead(encoder, matryoshka_widths(self.config, self.name, encoder.output_dim))

    def losses(self, outputs: InBatchScores, labels: torch.Tensor) -> torch.Tensor:
        targets = neighbour_targets(labels, outputs.offset, outputs.logits.shape[1], self.radius)
        targets = targets / targets.sum(dim=1, keepdim=True).clamp(min=1)
        return over_widths(
            lambda logits: -(targets * torch.log_softmax(logits, dim=1)).sum(dim=1),
            outputs.logits,
            outputs.truncated,
        )

    def scores(self, outputs: InBatchScores, labels: torch.Tensor) -> torch.Tensor:
        targets = neighbour_targets(labels, outputs.offset, outputs.logits.shape[1], self.radius)
        return targets.gather(1, outputs.logits.argmax(dim=1, keepdim=True)).squeeze(1)

    def bucket_key(self, lengths: np.ndarray) -> np.ndarray:
        return lengths[:, 0]
