"""BiLSTM with pooling over time (InferSent's BiLSTM-max, Conneau et al. 2017, Section 3.2)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from mtl.models.encoders.base import Encoder, EncoderConfig, Pooling, length_mask, pool, pooled_dim, register


class BiLSTMEncoder(Encoder):
    def __init__(
        self, embedding: nn.Embedding, hidden: int, layers: int, pooling: Pooling, dropout: float = 0.0
    ):
        super().__init__(embedding)
        self.lstm = nn.LSTM(
            embedding.embedding_dim,
            hidden,
            num_layers=layers,
            bidirectional=True,
            batch_first=True,
            dropout=dropout if layers > 1 else 0.0,
        )
        self.pooling = pooling
        self.output_dim = pooled_dim(2 * hidden, pooling)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        # Packing keeps padding out of the recurrence, so a sentence encodes the same in any batch.
        packed = pack_padded_sequence(
            self.embedding(tokens), lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        states, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True)  # (B, T, 2H)
        return pool(states, length_mask(lengths, states.shape[1]), self.pooling)


@register("bilstm")
def build(embedding: nn.Embedding, config: EncoderConfig) -> BiLSTMEncoder:
    return BiLSTMEncoder(embedding, config.hidden, layers=1, pooling=config.pooling)
