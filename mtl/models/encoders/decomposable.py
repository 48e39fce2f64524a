"""Decomposable attention with intra-sentence attention (Parikh et al. 2016).

The sentence embedding (for transfer) pools the intra-sentence representation
[a_i, a'_i]; `compare` runs attend, compare and aggregate over two sentences.
"""

from __future__ import annotations

import torch
from torch import nn

from mtl.models.encoders.base import Encoder, EncoderConfig, length_mask, register

MAX_DISTANCE = 10  # Parikh et al.: distance-sensitive bias, distances beyond 10 share one bucket


def feed_forward(inputs: int, hidden: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(
        nn.Dropout(dropout),
        nn.Linear(inputs, hidden),
        nn.ReLU(),
        nn.Dropout(dropout),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
    )


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    return scores.masked_fill(~mask, float("-inf")).softmax(dim=dim)


class DecomposableAttention(Encoder):
    pair_model = True

    def __init__(self, embedding: nn.Embedding, config: EncoderConfig):
        super().__init__(embedding)
        hidden, dropout = config.hidden, config.encoder_dropout
        self.project = nn.Linear(embedding.embedding_dim, hidden, bias=False)
        self.intra = feed_forward(hidden, hidden, dropout)
        self.distance_bias = nn.Embedding(2 * MAX_DISTANCE + 1, 1)
        self.attend = feed_forward(2 * hidden, hidden, dropout)
        self.compare_net = feed_forward(4 * hidden, hidden, dropout)
        self.set_pooling(2 * hidden, config.pooling)
        self.pair_dim = 2 * hidden

    def token_states(self, tokens: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Intra-attended token states (B, T, 2H) and the (B, T) mask of real positions."""
        width = tokens.shape[1]
        mask = length_mask(lengths, width, tokens.device)
        a = self.project(self.embedding(tokens))  # (B, T, H)
        f = self.intra(a)
        positions = torch.arange(width, device=tokens.device)
        distance = (positions[None, :] - positions[:, None]).clamp(-MAX_DISTANCE, MAX_DISTANCE) + MAX_DISTANCE
        scores = f @ f.transpose(1, 2) + self.distance_bias(distance).squeeze(-1)  # (B, T, T)
        weights = masked_softmax(scores, mask[:, None, :], dim=-1)
        return torch.cat([a, weights @ a], dim=-1), mask

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        states, mask = self.token_states(tokens, lengths)
        return self.pool_states(states, mask)

    def compare(
        self, a: torch.Tensor, a_lengths: torch.Tensor, b: torch.Tensor, b_lengths: torch.Tensor
    ) -> torch.Tensor:
        a_bar, a_mask = self.token_states(a, a_lengths)  # (B, Ta, 2H)
        b_bar, b_mask = self.token_states(b, b_lengths)  # (B, Tb, 2H)
        scores = self.attend(a_bar) @ self.attend(b_bar).transpose(1, 2)  # (B, Ta, Tb)
        beta = masked_softmax(scores, b_mask[:, None, :], dim=2) @ b_bar  # b aligned to each a_i
        alpha = (
            masked_softmax(scores, a_mask[:, :, None], dim=1).transpose(1, 2) @ a_bar
        )  # a aligned to each b_j
        v1 = (self.compare_net(torch.cat([a_bar, beta], dim=-1)) * a_mask[:, :, None]).sum(dim=1)  # (B, H)
        v2 = (self.compare_net(torch.cat([b_bar, alpha], dim=-1)) * b_mask[:, :, None]).sum(dim=1)
        return torch.cat([v1, v2], dim=-1)


@register("decomposable")
def build(embedding: nn.Embedding, config: EncoderConfig) -> DecomposableAttention:
    return DecomposableAttention(embedding, config)
