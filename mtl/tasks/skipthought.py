"""`skipthought`: Skip-Thought (Kiros et al. 2015, Section 2).

The shared encoder embeds a sentence; two conditional GRU decoders, one for the previous and
one for the next sentence, predict those sentences word by word (teacher forcing,
cross-entropy per token) over the `vocab` most frequent words of the task's training
sentences (the paper: 20,000; rarer words are one unknown class). The decoders read the
run's word vectors and the sentence embedding at every step, concatenated: a GRU over
[x_t; h_i] is the paper's conditional GRU (its C_z h_i, C_r h_i and C h_i terms are the
input weights' columns for h_i). They have their own parameters and share the output
vocabulary matrix, as the paper's do. Dev perplexity per word picks the best checkpoint.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from mtl.data.texts import LabelledTexts
from mtl.errors import UserError
from mtl.tasks.base import Task, at_least_fp32
from mtl.tasks.configs import SkipThoughtConfig
from mtl.tasks.context import CorpusTask
from mtl.tasks.inputs import SkipThoughtInputs
from mtl.tasks.kinds import register

UNKNOWN_CLASS = 0  # the decoders' class for every word outside the `vocab` most frequent


def neighbour_triples(documents: list[list[str]]) -> LabelledTexts:
    """(sentence, previous, next) for every sentence with both neighbours in its document."""
    columns: list[list[str]] = [[], [], []]
    for document in documents:
        for i in range(1, len(document) - 1):
            for column, sentence in zip(
                columns, (document[i], document[i - 1], document[i + 1]), strict=True
            ):
                column.append(sentence)
    return LabelledTexts(columns, [0] * len(columns[0]))


class SkipThoughtHead(nn.Module):
    """Per example: (summed token cross-entropy of both neighbours, their number of tokens)."""

    def __init__(self, encoder, word_classes: torch.Tensor, hidden: int):
        super().__init__()
        self.register_buffer("word_classes", word_classes, persistent=False)  # run word id -> class
        width = encoder.embedding.embedding_dim + encoder.output_dim
        self.decoders = nn.ModuleList([nn.GRU(width, hidden, batch_first=True) for _ in range(2)])
        self.vocabulary = nn.Linear(hidden, int(word_classes.max()) + 1)  # shared by both decoders

    def forward(self, encoder, sentences) -> torch.Tensor:
        (tokens, lengths), *neighbours = sentences
        thought = at_least_fp32(encoder(tokens, lengths))  # (B, D)
        totals = torch.zeros(len(thought), 2, device=thought.device)
        for decoder, (target, target_lengths) in zip(self.decoders, neighbours, strict=True):
            # Teacher forcing: the previous word's vector (zeros, the padding row, before the first).
            previous = nn.functional.pad(target[:, :-1], (1, 0))
            words = at_least_fp32(encoder.embedding(previous))  # (B, T, E)
            conditioned = torch.cat([words, thought[:, None].expand(-1, words.shape[1], -1)], dim=-1)
            states, _ = decoder(conditioned)  # left to right: padding comes after every real word
            logits = self.vocabulary(states)  # (B, T, classes)
            classes = self.word_classes[target]
            losses = nn.functional.cross_entropy(logits.transpose(1, 2), classes, reduction="none")  # (B, T)
            real = (
                torch.arange(target.shape[1], device=target.device)[None]
                < target_lengths.to(target.device)[:, None]
            )
            totals[:, 0] += (losses * real).sum(dim=1)
            totals[:, 1] += real.sum(dim=1)
        return totals


@register
class SkipThought(SkipThoughtInputs, CorpusTask, Task):
    config_class = SkipThoughtConfig
    display = "Skip-Thought"
    metric = "ppl"  # per word, of both neighbours over the split
    corpus_metric = True
    label_dtype = np.int64
    config: SkipThoughtConfig

    def __init__(self, name: str, config: SkipThoughtConfig):
        super().__init__(name, config)
        self.word_classes: torch.Tensor | None = None

    def load(self, split: str, examples: int | None = None) -> LabelledTexts | None:
        documents = self.documents(split, examples)
        if documents is None:
            return None
        triples = neighbour_triples(documents)
        if not len(triples):
            raise UserError(
                f"{self.name}: corpus {self.config.corpus} has no sentence with a neighbour on each side"
            )
        return triples

    def examples_in(self, document: list[str]) -> int:
        return max(len(document) - 2, 0)  # each sentence with a neighbour on each side

    def bind(self, table, examples) -> None:
        """The decoders' classes: the `vocab` words most frequent in the training sentences."""
        if table.ids is None or not hasattr(table, "offsets"):
            raise UserError(
                f"{self.name}: Skip-Thought decodes words of the run's vocabulary; encoder=hf has none"
            )
        rows = np.unique(examples["train"].sentences)
        ids = np.concatenate([table.ids[table.offsets[r] : table.offsets[r + 1]] for r in rows])
        counts = np.bincount(ids, minlength=int(table.ids.max()) + 1)
        counts[:2] = 0  # padding and the unknown word are never a class of their own
        frequent = np.argsort(-counts, kind="stable")[: self.config.vocab]
        frequent = frequent[counts[frequent] > 0]
        classes = np.full(len(counts), UNKNOWN_CLASS, dtype=np.int64)
        classes[frequent] = np.arange(1, len(frequent) + 1)
        self.word_classes = torch.from_numpy(classes)

    def head(self, encoder: nn.Module, hidden: int, layers: int, dropout: float) -> nn.Module:
        if encoder.embedding is None or encoder.pair_model:
            raise UserError(
                f"{self.name}: Skip-Thought needs an encoder of word vectors that embeds sentences alone"
            )
        classes = self.word_classes
        vocabulary_size = encoder.embedding.num_embeddings
        if classes is None or len(classes) < vocabulary_size:  # words the vocabulary gained after bind
            known = classes if classes is not None else torch.zeros(0, dtype=torch.long)
            classes = torch.cat([known, torch.full((vocabulary_size - len(known),), UNKNOWN_CLASS)])
        return SkipThoughtHead(encoder, classes, self.config.decoder_hidden or encoder.output_dim)

    def losses(self, outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return outputs[:, 0] / outputs[:, 1].clamp(min=1)  # mean cross-entropy per word of the example

    def scores(self, outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """A training step logs the mean of its examples' perplexities."""
        return torch.exp(self.losses(outputs, labels))

    def corpus_metrics(self, outputs: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        return {"ppl": float(np.exp(outputs[:, 0].sum() / max(outputs[:, 1].sum(), 1)))}

    def bucket_key(self, lengths: np.ndarray) -> np.ndarray:
        return lengths.max(axis=1)
