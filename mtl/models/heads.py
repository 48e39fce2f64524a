"""Task heads: a task's feature recipe over the shared encoder's output, then an MLP.

Siamese encoders embed each sentence alone and the recipe combines the embeddings (Liu et
al. 2018, Figure 1); pair models score the recipe's sentence pairs with their `compare`.
The recipes themselves belong to the tasks (`mtl/tasks/`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from mtl.errors import UserError
from mtl.models.encoders.base import Encoder

BUCKET_STEP = 3  # tokens: how coarsely bucketing groups the longest call's lengths
Sentences = Sequence[tuple[torch.Tensor, torch.Tensor]]  # (tokens (B, T), lengths (B,)) per sentence


@dataclass(frozen=True)
class HeadRecipe:
    """How a classification head reads the shared encoder for one task's examples."""

    sentences: int  # sentence positions per example
    outputs: int  # classes
    features: Callable[..., torch.Tensor]  # Siamese encoders: the sentences' embeddings -> features
    width: int  # features per embedding dimension
    pairs: tuple[tuple[int, int], ...]  # for pair models: which sentences to compare
    # Siamese encoders: positions encoded in one call. ClassifSQuAD's two answers have the same
    # length distribution, so one call over 2B answers pads little and runs fewer, larger steps;
    # a premise and its hypothesis (14 vs 8 tokens) are cheaper apart.
    calls: tuple[tuple[int, ...], ...]

    def bucket_key(self, lengths: np.ndarray) -> np.ndarray:
        """(N,) key that length bucketing sorts examples by; `lengths`: (N, sentences).

        Each call pads to its own longest sentence, so the key is the calls' lengths, the
        longest call first in steps of `BUCKET_STEP` tokens, then the others exactly. On
        SNLI's train_small (windows of 50 batches of 64) real tokens fill 81% of the padded
        calls this way, 67% when sorting by total length (ClassifSQuAD: 73% and 61%).
        """
        per_call = np.stack([lengths[:, list(call)].max(axis=1) for call in self.calls], axis=1)
        per_call = per_call[:, np.argsort(-per_call.mean(axis=0), kind="stable")]  # longest call first
        key = per_call[:, 0].astype(np.int64) // BUCKET_STEP
        for column in per_call[:, 1:].T:
            key = key * (int(column.max()) + 1) + column
        return key

    def input_dim(self, encoder: Encoder) -> int:
        if encoder.pair_model:
            return len(self.pairs) * encoder.pair_dim
        return self.width * encoder.output_dim


Widths = tuple[tuple[int, float], ...]  # matryoshka=: (width, weight) of each width trained


class AtWidths(NamedTuple):
    """A head's outputs in training with matryoshka=: the full width's, and (weight, the outputs
    from the embeddings' first w dimensions) per width w. Evaluation gets the full width's alone."""

    full: torch.Tensor
    truncated: tuple[tuple[float, torch.Tensor], ...]


class InBatchScores(NamedTuple):
    """An in-batch head's output: (b, B) scores of this rank's b examples against the batch's B
    candidates, and where this rank's examples start among the batch's (`gather_batch`)."""

    logits: torch.Tensor
    offset: int
    # Matryoshka training: (weight, logits on the embeddings' first w dimensions) per width w.
    truncated: tuple[tuple[float, torch.Tensor], ...] = ()


def mlp(inputs: int, hidden: int, layers: int, outputs: int, dropout: float) -> nn.Sequential:
    modules: list[nn.Module] = []
    for _ in range(layers):
        modules += [nn.Dropout(dropout), nn.Linear(inputs, hidden), nn.ReLU()]
        inputs = hidden
    return nn.Sequential(*modules, nn.Dropout(dropout), nn.Linear(inputs, outputs))


class TaskHead(nn.Module):
    """A task's features over the shared encoder's embeddings, then an MLP."""

    def __init__(
        self,
        recipe: HeadRecipe,
        encoder: Encoder,
        hidden: int,
        layers: int,
        dropout: float,
        widths: Widths = (),
    ):
        super().__init__()
        if encoder.pair_model and not recipe.pairs:
            raise UserError(
                f"a task of one sentence per example cannot train {type(encoder).__name__}, which only "
                "compares two sentences: choose a Siamese encoder (bilstm, lstm, gru, transformer, ...)"
            )
        self.recipe = recipe
        self.classifier = mlp(recipe.input_dim(encoder), hidden, layers, recipe.outputs, dropout)
        # matryoshka=: a classifier of its own on the features of the first w dimensions, for each
        # width w below the full one (Kusupati et al. 2022's MRL, a classifier per nesting).
        self.widths = widths
        self.width_classifiers = nn.ModuleDict(
            {
                str(width): mlp(recipe.width * width, hidden, layers, recipe.outputs, dropout)
                for width, _ in widths
                if width != encoder.output_dim
            }
        )

    def embeddings(self, encoder: Encoder, sentences: Sentences) -> list[torch.Tensor]:
        """The shared encoder's embedding of each of an example's sentences, (B, D) each (the
        affinity's probe of a watching task puts its own classifier on their features)."""
        # Each call pads its positions to their own longest sentence: one call padded to the
        # longest of all (premise and hypothesis together) costs ~20% more on the CPU (measured).
        # Packed sequences skip padding: there one call for all saves launching the others.
        calls = self.recipe.calls
        if encoder.skips_padding(sentences[0][0]):
            calls = (tuple(range(len(sentences))),)
        embeddings: list[torch.Tensor | None] = [None] * len(sentences)
        for call in calls:
            parts = [sentences[i] for i in call]
            width = max(tokens.shape[1] for tokens, _ in parts)
            padded = [
                t if t.shape[1] == width else nn.functional.pad(t, (0, width - t.shape[1])) for t, _ in parts
            ]
            tokens = torch.cat(padded) if len(padded) > 1 else padded[0]  # (kB, T)
            lengths = torch.cat([n for _, n in parts]) if len(parts) > 1 else parts[0][1]
            encoded = encoder(tokens, lengths)  # (kB, D)
            for i, part in zip(call, encoded.chunk(len(call)), strict=True):
                embeddings[i] = part
        return embeddings  # type: ignore[return-value]

    def forward(self, encoder: Encoder, sentences: Sentences) -> torch.Tensor | AtWidths:
        if encoder.pair_model:
            compared = [encoder.compare(*sentences[i], *sentences[j]) for i, j in self.recipe.pairs]
            return self.classifier(torch.cat(compared, dim=-1))
        embeddings = self.embeddings(encoder, sentences)
        logits = self.classifier(self.recipe.features(*embeddings))
        if not (self.training and self.widths):
            return logits

        def at_width(width: int) -> torch.Tensor:
            if str(width) not in self.width_classifiers:  # the full width
                return logits
            truncated = [embedding[:, :width] for embedding in embeddings]
            return self.width_classifiers[str(width)](self.recipe.features(*truncated))

        return AtWidths(logits, tuple((weight, at_width(width)) for width, weight in self.widths))


class MultitaskModel(nn.Module):
    """One shared encoder and a head per task (each task builds its own)."""

    def __init__(self, encoder: Encoder, heads: dict[str, nn.Module]):
        super().__init__()
        self.encoder = encoder
        self.heads = nn.ModuleDict(heads)

    def forward(self, task: str, sentences: Sentences) -> torch.Tensor:
        return self.heads[task](self.encoder, sentences)

    def trainable_parameters(self, task: str | None = None) -> int:
        """Each counted once: Quick-Thoughts' second encoder shares the word vectors (trained ones too)."""
        modules = [self.encoder, *(self.heads.values() if task is None else [self.heads[task]])]
        unique = {id(p): p for m in modules for p in m.parameters() if p.requires_grad}
        return sum(p.numel() for p in unique.values())

    def parameter_counts(self) -> dict[str, int]:
        """Trainable parameters in all, of the encoder and of each head; frozen ones (GloVe) apart."""
        counts = {
            "params/trainable": self.trainable_parameters(),
            "params/encoder": sum(p.numel() for p in self.encoder.parameters() if p.requires_grad),
            "params/frozen": sum(p.numel() for p in self.encoder.parameters() if not p.requires_grad),
        }
        in_encoder = {id(p) for p in self.encoder.parameters()}
        for task, head in self.heads.items():
            counts[f"params/{task}_head"] = sum(
                p.numel() for p in head.parameters() if p.requires_grad and id(p) not in in_encoder
            )
        return counts
