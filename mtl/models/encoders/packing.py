"""An LSTM over packed sequences (what cuDNN runs fastest) without waiting for the GPU."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from mtl.device import to_device


def run_packed(states: torch.Tensor, lengths: torch.Tensor, lstm: nn.LSTM) -> torch.Tensor:
    """`lstm` over the real positions of right-padded (B, T, E) `states`; (B, T, D), zeros at padding.

    The lengths are sorted on the CPU and the order copied without blocking: packing with
    `enforce_sorted=False` would copy it to the GPU with a blocking copy, which waits for
    every kernel queued before it (the other sentences' LSTMs).
    """
    lengths = lengths.cpu()
    order = torch.argsort(lengths, descending=True)
    packed = pack_padded_sequence(
        states.index_select(0, to_device(order, states.device)), lengths[order], batch_first=True
    )
    output = pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=states.shape[1])[0]
    return output.index_select(0, to_device(torch.argsort(order), states.device))
