"""A GRU, one or two directions, with its last state or pooling over time.

The recurrent cell of Skip-Thought (Kiros et al. 2015, Section 2.1) and Quick-Thoughts
(Logeswaran & Lee 2018, Section 3: "the final hidden state is interpreted as a
representation of the sentence"); with `pooling=last` it is InferSent's GRU and BiGRU-last
rows (Conneau et al. 2017, Section 3.2.1), with `pooling=max` a BiGRU-max.
"""

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


class GRUEncoder(Encoder):
    def __init__(
        self,
        embedding: nn.Embedding,
        hidden: int,
        bidirectional: bool,
        pooling: Pooling,
        init: str = "pytorch",
    ):
        super().__init__(embedding)
        self.gru = nn.GRU(embedding.embedding_dim, hidden, batch_first=True, bidirectional=bidirectional)
        self.directions = 2 if bidirectional else 1
        self.set_pooling(self.directions * hidden, pooling)
        if init == "quickthoughts":
            quick_thoughts_init(self.gru)

    def skips_padding(self, tokens: torch.Tensor) -> bool:
        return tokens.is_cuda

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        states = self.embedding(tokens)  # (B, T, E)
        # Right to left must start at each sentence's last word, not at its padding: packed
        # sequences do that (and skip the padding on CUDA). Left to right alone never reads
        # the padding before a real position, so on the CPU it runs dense.
        if self.directions == 2 or self.skips_padding(tokens):
            states = run_packed(states, lengths, self.gru)
        else:
            states = self.gru(states)[0]  # (B, T, directions * H)
        mask = length_mask(lengths, tokens.shape[1], tokens.device)
        return self.pool_states(states, mask, self.directions)


def quick_thoughts_init(gru: nn.GRU) -> None:
    """Quick-Thoughts, Section 4.3: "Weights of the GRU are initialized using uniform Xavier
    initialization and gate biases are initialized to 1." PyTorch keeps a GRU's input and
    recurrent weights apart, stacked as reset, update, candidate: each gate's block gets its
    own Xavier range; the reset and update gates' bias is 1 (on the input side, 0 on the
    recurrent one: they add up), the candidate's 0."""
    hidden = gru.hidden_size
    with torch.no_grad():
        for name, parameter in gru.named_parameters():
            if name.startswith("weight"):
                for gate in parameter.split(hidden):
                    nn.init.xavier_uniform_(gate)
            else:
                parameter.zero_()
                if name.startswith("bias_ih"):
                    parameter[: 2 * hidden] = 1.0


@register("gru")
def build(embedding: nn.Embedding, config: EncoderConfig) -> GRUEncoder:
    return GRUEncoder(
        embedding, config.hidden, config.options.bidirectional, config.pooling, config.options.gru_init
    )
