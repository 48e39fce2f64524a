"""The word-vector layer under a word-vector encoder: frozen GloVe (InferSent, Liu et al. 2018), a
trainable copy (Liu et al. 2018, Section 6: "train the word embeddings by backpropagation"), or
both side by side (Quick-Thoughts 4.4.1, MC-QT; the two channels of Kim 2014), per `embeddings=`.

Whatever the mode, the layer's state is one `weight` of a row per word, so a checkpoint, an
exported encoder and a sentence-transformers folder hold one matrix that a frozen
`nn.Embedding` reads back at inference: with both channels, row i is [GloVe_i ; trained_i].
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from mtl.models.encoders.config import WordEmbeddings


def frozen_embedding(matrix: torch.Tensor) -> nn.Embedding:
    return nn.Embedding.from_pretrained(matrix, freeze=True, padding_idx=0)


def word_embedding(matrix: torch.Tensor, mode: WordEmbeddings) -> nn.Module:
    """The word-vector layer over `matrix` (V, E) for training: (V, E) wide, or (V, 2E) for both."""
    if mode == "frozen":
        return frozen_embedding(matrix)
    if mode == "trainable":  # the padding row stays zero: padding_idx gets no gradient
        return nn.Embedding.from_pretrained(matrix.clone(), freeze=False, padding_idx=0)
    return TwoChannelEmbedding(matrix)


def part_state(part: nn.Module, shared: nn.Module | None) -> dict[str, torch.Tensor]:
    """The weights of an encoder a task adds to the sentence embedding (Quick-Thoughts' g): its
    word vectors only where they are its own (trained), not the `shared` frozen ones."""
    return {
        k: v for k, v in part.state_dict().items() if k != "embedding.weight" or part.embedding is not shared
    }


class TwoChannelEmbedding(nn.Module):
    """Each word as its frozen vector followed by a trainable copy of it: (B, T) -> (B, T, 2E).

    Words the training data never held keep their pretrained vector in both halves, so
    they stay where the frozen channel the encoder learned to read puts them."""

    def __init__(self, matrix: torch.Tensor):
        super().__init__()
        self.frozen = nn.Parameter(matrix, requires_grad=False)
        self.tuned = nn.Parameter(matrix.clone())
        self.num_embeddings, self.embedding_dim, self.padding_idx = matrix.shape[0], 2 * matrix.shape[1], 0

    @property
    def weight(self) -> torch.Tensor:
        """(V, 2E): the rows a frozen `nn.Embedding` of the same words looks up."""
        return torch.cat([self.frozen, self.tuned], dim=1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return torch.cat([F.embedding(tokens, self.frozen, 0), F.embedding(tokens, self.tuned, 0)], dim=-1)

    def _save_to_state_dict(self, destination, prefix, keep_vars):  # one matrix, as nn.Embedding's
        destination[prefix + "weight"] = self.weight if keep_vars else self.weight.detach()

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        key = prefix + "weight"
        if key not in state_dict:
            missing_keys.append(key)
            return
        weight = state_dict[key]
        if weight.shape != (self.num_embeddings, self.embedding_dim):
            error_msgs.append(
                f"size mismatch for {key}: copying a param with shape {tuple(weight.shape)}, "
                f"the current model has ({self.num_embeddings}, {self.embedding_dim})"
            )
            return
        half = self.embedding_dim // 2
        with torch.no_grad():
            self.frozen.copy_(weight[:, :half])
            self.tuned.copy_(weight[:, half:])
