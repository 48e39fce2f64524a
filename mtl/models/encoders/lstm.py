"""A unidirectional LSTM with pooling over time (Liu et al. 2018, Table 1: "Multitask LSTM")."""

from __future__ import annotations

import torch
from torch import nn

from mtl.models.encoders.base import (
    Encoder,
    EncoderConfig,
    Pooling,
    length_mask,
    register,
)
from mtl.models.encoders.packing import run_packed


class LSTMEncoder(Encoder):
    """Left to right only, so right padding never reaches a real position's state."""

    def __init__(self, embedding: nn.Embedding, hidden: int, pooling: Pooling):
        super().__init__(embedding)
        self.lstm = nn.LSTM(embedding.embedding_dim, hidden, batch_first=True)
        self.set_pooling(hidden, pooling)

    def skips_padding(self, tokens: torch.Tensor) -> bool:
        return tokens.is_cuda

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        states = self.embedding(tokens)  # (B, T, E)
        # On CUDA, cuDNN over packed sequences skips the padding.
        states = (
            run_packed(states, lengths, self.lstm) if self.skips_padding(tokens) else self.lstm(states)[0]
        )  # (B, T, H)
        return self.pool_states(states, length_mask(lengths, tokens.shape[1], tokens.device))


@register("lstm")
def build(embedding: nn.Embedding, config: EncoderConfig) -> LSTMEncoder:
    return LSTMEncoder(embedding, config.hidden, config.pooling)
