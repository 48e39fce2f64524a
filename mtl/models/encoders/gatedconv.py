"""Gated convolutional encoder: stacked gated linear units (Dauphin et al. 2017, "Language
Modeling with Gated Convolutional Networks", Section 2), which InferSent's Section 6 names as
an encoder to try.

Each layer is a width-3 convolution with 2H output channels, halved into A and B and gated,
h = A * sigmoid(B) (the GLU), with a residual connection from the second layer on (their
residual blocks); then the usual pooling over real positions. Unlike the language model, a
sentence encoder sees both sides of a word, so the convolutions are centred, not causal.
Padded positions are zeroed before every layer, so a sentence encodes the same alone or in a
padded batch. Dauphin et al.'s weight normalisation is left out: mtl clips gradients instead,
as for every encoder.
"""

from __future__ import annotations

import torch
from torch import nn

from mtl.models.encoders.base import Encoder, EncoderConfig, Pooling, length_mask, register

WIDTH = 3  # words each convolution sees (Dauphin et al. use 4-6 causally; 3 centred as InferSent's ConvNet)


class GatedConvEncoder(Encoder):
    def __init__(self, embedding: nn.Embedding, hidden: int, layers: int, pooling: Pooling, dropout: float):
        super().__init__(embedding)
        self.convs = nn.ModuleList(
            nn.Conv1d(embedding.embedding_dim if i == 0 else hidden, 2 * hidden, WIDTH, padding=WIDTH // 2)
            for i in range(layers)
        )
        self.dropout = nn.Dropout(dropout)
        self.hidden = hidden
        self.set_pooling(hidden, pooling)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        real = length_mask(lengths, tokens.shape[1], tokens.device)  # (B, T)
        states = self.embedding(tokens).transpose(1, 2) * real[:, None, :]  # (B, E, T)
        for index, conv in enumerate(self.convs):
            gated = nn.functional.glu(conv(self.dropout(states)), dim=1) * real[:, None, :]  # (B, H, T)
            states = gated if index == 0 else states + gated  # residual from the second layer on
        return self.pool_states(states.transpose(1, 2), real)  # (B, output_dim)


@register("gatedconv")
def build(embedding: nn.Embedding, config: EncoderConfig) -> GatedConvEncoder:
    return GatedConvEncoder(
        embedding, config.hidden, config.options.gatedconv_layers, config.pooling, config.encoder_dropout
    )
