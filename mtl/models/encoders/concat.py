"""Several encoders' embeddings side by side: [f(s); g(s)], Quick-Thoughts' test-time sentence embedding."""

from __future__ import annotations

import torch
from torch import nn

from mtl.models.encoders.base import Encoder


class ConcatEncoder(Encoder):
    """The shared encoder, then each further one (same architecture, same word vectors)."""

    def __init__(self, parts: list[Encoder]):
        super().__init__(parts[0].embedding)
        self.parts = nn.ModuleList(parts)
        self.output_dim = sum(part.output_dim for part in parts)

    @property
    def pooling(self) -> str:
        return self.parts[0].pooling

    @pooling.setter
    def pooling(self, value: str) -> None:  # encode(pooling=...) sets every part's
        for part in self.parts:
            part.pooling = value

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return torch.cat([part(tokens, lengths) for part in self.parts], dim=-1)
