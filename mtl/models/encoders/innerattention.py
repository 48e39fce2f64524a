"""InferSent's inner-attention encoder (Conneau et al. 2017, Section 3.2.3, Figure 2).

A BiLSTM's states h_t give keys tanh(W h_t); each of 4 learned context queries u_w^k weighs
the positions by softmax(keysᵀ u_w^k / 3) and sums the projected states; the 4 views are
concatenated (8H dimensions). As InferSent's code (`InnerAttentionMILAEncoder`) does: keys and
values are projections without bias, the softmax has temperature 3. Where the code differs:
its views 2-4 all read query 1 (three identical views), here each view has its own query as
the paper describes; and padding is masked by length instead of by keys equal to 0.
"""

from __future__ import annotations

import torch
from torch import nn

from mtl.models.encoders.base import EncoderConfig, length_mask, register
from mtl.models.encoders.bilstm import BiLSTMEncoder

VIEWS = 4  # context queries (Lin et al. 2017's multiple views; InferSent uses 4)
TEMPERATURE = 3.0  # InferSent's InnerAttentionMILAEncoder


class InnerAttentionEncoder(BiLSTMEncoder):
    fixed_pooling = True

    def __init__(self, embedding: nn.Embedding, hidden: int):
        super().__init__(embedding, hidden, layers=1, pooling="max")
        width = 2 * hidden
        self.keys = nn.Linear(width, width, bias=False)
        self.values = nn.Linear(width, width, bias=False)
        self.queries = nn.Parameter(torch.randn(VIEWS, width))  # as nn.Embedding initializes them
        self.output_dim = VIEWS * width

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        states = self.token_states(tokens, lengths)  # (B, T, 2H)
        mask = length_mask(lengths, states.shape[1], states.device)
        scores = torch.tanh(self.keys(states)) @ self.queries.T / TEMPERATURE  # (B, T, views)
        weights = scores.masked_fill(~mask[:, :, None], float("-inf")).softmax(dim=1)
        return (weights.transpose(1, 2) @ self.values(states)).flatten(1)  # (B, views·2H)


@register("innerattention")
def build(embedding: nn.Embedding, config: EncoderConfig) -> InnerAttentionEncoder:
    return InnerAttentionEncoder(embedding, config.hidden)
