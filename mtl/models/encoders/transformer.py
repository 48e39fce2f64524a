"""Siamese Transformer encoder (Liu et al. 2018, Section 3.1) from torch's encoder layers."""

from __future__ import annotations

import math

import torch
from torch import nn

from mtl.models.encoders.base import Encoder, EncoderConfig, length_mask, register
from mtl.models.encoders.config import MAX_POSITIONS


def sinusoidal_positions(count: int, width: int) -> torch.Tensor:
    """(count, width) fixed position encodings of Vaswani et al. (2017)."""
    position = torch.arange(count, dtype=torch.float32)[:, None]
    frequency = torch.exp(torch.arange(0, width, 2, dtype=torch.float32) * (-math.log(10000.0) / width))
    table = torch.zeros(count, width)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency)[:, : width // 2]
    return table


class TransformerEncoder(Encoder):
    def __init__(self, embedding: nn.Embedding, config: EncoderConfig):
        super().__init__(embedding)
        width = config.hidden
        dim = embedding.embedding_dim
        self.project = nn.Linear(dim, width) if dim != width else nn.Identity()
        layer = nn.TransformerEncoderLayer(
            width,
            config.options.transformer_heads,
            config.options.transformer_ffn,
            config.encoder_dropout,
            batch_first=True,
        )
        self.layers = nn.TransformerEncoder(
            layer, config.options.transformer_layers, enable_nested_tensor=False
        )
        self.register_buffer("positions", sinusoidal_positions(MAX_POSITIONS, width), persistent=False)
        self.set_pooling(width, config.pooling)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        width = tokens.shape[1]
        mask = length_mask(lengths, width, tokens.device)  # (B, T)
        states = self.project(self.embedding(tokens)) + self.positions[:width]  # (B, T, W)
        states = self.layers(states, src_key_padding_mask=~mask)
        return self.pool_states(states, mask)


@register("transformer")
def build(embedding: nn.Embedding, config: EncoderConfig) -> TransformerEncoder:
    return TransformerEncoder(embedding, config)
