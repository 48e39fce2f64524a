"""An LSTM over packed sequences (what cuDNN runs fastest), packed with one gather, without waiting for the GPU."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence

from mtl.runtime.device import to_device


def run_packed(
    states: torch.Tensor, lengths: torch.Tensor, lstm: nn.LSTM, padding_value: float = 0.0
) -> torch.Tensor:
    """`lstm` over the real positions of right-padded (B, T, E) `states`; (B, T, D), with
    `padding_value` at padded positions (as `pad_packed_sequence`'s).

    `pack_padded_sequence` and `pad_packed_sequence` copy one time step at a time, forward and
    backward (about 3T small kernels per call, which a GPU step spends more host time launching
    than the GPU spends running); here packing is one gather and unpacking one scatter, at
    positions worked out on the CPU, where the lengths are, and copied without blocking. The
    positions are numpy arithmetic: torch would dispatch some 40 ops on the host for them.
    """
    batch, width = states.shape[:2]
    host_lengths = lengths.numpy() if lengths.device.type == "cpu" else lengths.cpu().numpy()
    rows, batch_sizes = packed_rows(host_lengths, width)
    rows = to_device(torch.from_numpy(rows), states.device)
    packed = PackedSequence(
        states.reshape(batch * width, -1).index_select(0, rows), torch.from_numpy(batch_sizes)
    )
    output = lstm(packed, initial_states(lstm, states, int(batch_sizes[0])))[0].data  # (real positions, D)
    unpacked = output.new_full((batch * width, output.shape[-1]), padding_value).index_copy(0, rows, output)
    return unpacked.view(batch, width, -1)


def initial_states(rnn: nn.RNNBase, states: torch.Tensor, sentences: int) -> torch.Tensor | tuple | None:
    """Zero initial states for `rnn` over `sentences` sentences, as the module makes them when
    given none, but without reading the batch size back from a tensor: one op instead of ten.
    The hidden and cell states share the zeros (the module does not write to them)."""
    if rnn.proj_size:
        return None
    zeros = states.new_zeros(rnn.num_layers * (2 if rnn.bidirectional else 1), sentences, rnn.hidden_size)
    return (zeros, zeros) if isinstance(rnn, nn.LSTM) else zeros


def packed_rows(lengths: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """For sentences of `lengths` padded to `width`: which rows of the flattened (B * width)
    batch make up their packed sequence, in its order, and its batch sizes.

    A packed sequence is time-major over the sentences sorted longest first: step 0 of every
    sentence, then step 1 of those that have one, and so on.
    """
    longest_first = np.argsort(-lengths, kind="stable")
    real = np.arange(lengths.max())[:, None] < lengths[longest_first][None, :]  # (steps, B)
    step, sentence = real.nonzero()  # row-major: by step, then longest first
    return longest_first[sentence] * width + step, real.sum(axis=1)
