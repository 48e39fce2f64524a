"""BiLSTM with pooling over time (InferSent's BiLSTM-max, Conneau et al. 2017, Section 3.2)."""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from mtl.models.encoders.base import Encoder, EncoderConfig, Pooling, length_mask, pool, pooled_dim, register


def reverse_within_lengths(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each (B, T, D) sequence over its first `length` steps; padding stays at the end."""
    steps = torch.arange(x.shape[1], device=x.device)[None, :]
    index = torch.where(steps < lengths[:, None], lengths[:, None] - 1 - steps, steps)  # (B, T)
    return x.gather(1, index[:, :, None].expand_as(x))


Kernel = Literal["auto", "dense", "packed"]
PACKED_BELOW_FILL = 0.6  # CPU: share of real (not padding) positions under which packing pays


class BiLSTMEncoder(Encoder):
    """A BiLSTM whose two directions have their own parameters, run by one of two kernels.

    `dense`: each direction is its own LSTM over right-padded input, the backward one over
    each sequence reversed within its length, so padding never reaches a real position;
    the CPU runs it fastest when batches are mostly real tokens (bucketed batches).
    `packed`: both directions in one bidirectional call over packed sequences, which cuDNN
    runs fastest, and the CPU too when much of a batch would be padding. Same parameters,
    same function: a checkpoint moves between them and between devices.
    """

    kernel: Kernel = "auto"  # auto: packed on CUDA; on CPU by how much of the batch is padding

    def __init__(
        self, embedding: nn.Embedding, hidden: int, layers: int, pooling: Pooling, dropout: float = 0.0
    ):
        super().__init__(embedding)
        inputs = [embedding.embedding_dim] + [2 * hidden] * (layers - 1)
        self.forward_layers = nn.ModuleList(nn.LSTM(size, hidden, batch_first=True) for size in inputs)
        self.backward_layers = nn.ModuleList(nn.LSTM(size, hidden, batch_first=True) for size in inputs)
        self.between_layers = nn.Dropout(dropout)
        self.input_size, self.hidden, self.layers = embedding.embedding_dim, hidden, layers
        self.pooling = pooling
        self.output_dim = pooled_dim(2 * hidden, pooling)

    def _packs(self, tokens: torch.Tensor, lengths: torch.Tensor) -> bool:
        if self.kernel != "auto":
            return self.kernel == "packed"
        if tokens.is_cuda:
            return True
        # On the CPU (1 thread, 300-d inputs, forward + backward) packed sequences beat the
        # dense kernel only for narrow LSTMs on batches that are mostly padding: at hidden 512,
        # 0.74x its time at 30% real positions, 0.97x at 60%, 1.2x at 80%; at 2048, 1.1-1.5x
        # whatever the padding.
        return self.hidden < 1024 and int(lengths.sum()) < PACKED_BELOW_FILL * tokens.numel()

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        states = self.embedding(tokens)  # (B, T, E)
        layer = packed_bidirectional if self._packs(tokens, lengths) else dense_bidirectional
        for depth, (forward, backward) in enumerate(
            zip(self.forward_layers, self.backward_layers, strict=True)
        ):
            if depth:
                states = self.between_layers(states)
            states = layer(states, lengths, forward, backward)  # (B, T, 2H)
        return pool(states, length_mask(lengths, states.shape[1]), self.pooling)


def dense_bidirectional(
    states: torch.Tensor, lengths: torch.Tensor, forward: nn.LSTM, backward: nn.LSTM
) -> torch.Tensor:
    ahead = forward(states)[0]  # (B, T, H)
    behind = reverse_within_lengths(backward(reverse_within_lengths(states, lengths))[0], lengths)
    return torch.cat([ahead, behind], dim=-1)  # (B, T, 2H)


def packed_bidirectional(
    states: torch.Tensor, lengths: torch.Tensor, forward: nn.LSTM, backward: nn.LSTM
) -> torch.Tensor:
    """One bidirectional LSTM call over packed sequences with the two directions' weights.

    The weights go in the order `nn.LSTM(bidirectional=True)` keeps them (forward layer's
    w_ih, w_hh, b_ih, b_hh, then the reverse ones), so cuDNN runs both directions at once.
    """
    # pack_padded_sequence needs the lengths on the CPU: the one host sync of this kernel.
    packed = pack_padded_sequence(states, lengths.cpu(), batch_first=True, enforce_sorted=False)
    zeros = states.new_zeros(2, states.shape[0], forward.hidden_size)
    output, _, _ = torch._VF.lstm(
        packed.data,
        packed.batch_sizes,
        (zeros, zeros),
        [*forward._flat_weights, *backward._flat_weights],
        True,  # has_biases
        1,  # num_layers
        0.0,  # dropout
        forward.training,
        True,  # bidirectional
    )
    result = PackedSequence(output, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)
    return pad_packed_sequence(result, batch_first=True, total_length=states.shape[1])[0]  # (B, T, 2H)


@register("bilstm")
def build(embedding: nn.Embedding, config: EncoderConfig) -> BiLSTMEncoder:
    return BiLSTMEncoder(embedding, config.hidden, layers=1, pooling=config.pooling)
