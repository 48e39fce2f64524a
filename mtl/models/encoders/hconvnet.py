"""InferSent's hierarchical ConvNet (Conneau et al. 2017, Section 3.2.4, Figure 3).

Four convolutional layers (width 3, ReLU, 2H channels each, as InferSent's `ConvNetEncoder`
with enc_lstm_dim H); each layer's feature maps are max-pooled over the sentence and the four
are concatenated (8H dimensions). Padded positions are zeroed before every layer and left
out of the max, so a sentence encodes the same alone or in a padded batch (InferSent's code
convolves and pools over the padding).
"""

from __future__ import annotations

import torch
from torch import nn

from mtl.models.encoders.base import Encoder, EncoderConfig, length_mask, register

LAYERS = 4


class HConvNetEncoder(Encoder):
    fixed_pooling = True

    def __init__(self, embedding: nn.Embedding, hidden: int):
        super().__init__(embedding)
        width = 2 * hidden
        self.convs = nn.ModuleList(
            nn.Conv1d(embedding.embedding_dim if i == 0 else width, width, kernel_size=3, padding=1)
            for i in range(LAYERS)
        )
        self.pooling = "max"
        self.state_width = width
        self.output_dim = LAYERS * width

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        real = length_mask(lengths, tokens.shape[1], tokens.device)[:, None, :]  # (B, 1, T)
        states = self.embedding(tokens).transpose(1, 2) * real  # (B, E, T)
        levels = []
        for conv in self.convs:
            states = torch.relu(conv(states)) * real  # (B, 2H, T), zero where padded
            levels.append(states.masked_fill(~real, float("-inf")).amax(dim=2))  # (B, 2H)
        return torch.cat(levels, dim=-1)  # (B, 4·2H)


@register("hconvnet")
def build(embedding: nn.Embedding, config: EncoderConfig) -> HConvNetEncoder:
    return HConvNetEncoder(embedding, config.hidden)
