"""BiLSTM with pooling over time (InferSent's BiLSTM-max, Conneau et al. 2017, Section 3.2)."""

from __future__ import annotations

import re
from typing import Literal

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
from mtl.runtime.device import to_device


def reverse_within_lengths(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each (B, T, D) sequence over its first `length` steps; padding stays at the end."""
    steps = torch.arange(x.shape[1], device=x.device)[None, :]
    lengths = to_device(lengths, x.device)
    index = torch.where(steps < lengths[:, None], lengths[:, None] - 1 - steps, steps)  # (B, T)
    return x.gather(1, index[:, :, None].expand_as(x))


Kernel = Literal["auto", "dense", "packed"]
PACKED_BELOW_FILL = 0.6  # CPU: share of real (not padding) positions under which packing pays
# CPU: a batch that would be packed is run instead as its rows sorted by length in up to
# MOST_CHUNKS chunks of at least CHUNK_ROWS rows, each by its own kernel (dense once mostly real):
# forward + backward at hidden 512 on held affinity batches (a third real), 64 and 128 rows, 1,
# 2, 3, 4 and 6 chunks: 0.379, 0.308, 0.254, 0.238, 0.277 s and 1.043, 0.888, 0.795, 0.605, 0.607 s
CHUNK_ROWS = 16
MOST_CHUNKS = 4


class BiLSTMEncoder(Encoder):
    """A (stacked) BiLSTM, one `nn.LSTM(bidirectional=True)`, run by one of two kernels.

    `packed`: the module over packed sequences, every layer and both directions in one call,
    which cuDNN runs fastest (its weights stay in the one flat buffer cuDNN wants), and the
    CPU too when much of a batch would be padding. `dense`: a layer and direction at a time
    over right-padded input, the backward one over each sequence reversed within its length,
    so padding never reaches a real position; the CPU runs it fastest when batches are mostly
    real tokens (bucketed batches). Same parameters, same function: a checkpoint moves between
    kernels and devices.
    """

    kernel: Kernel = "auto"  # auto: packed on CUDA; on CPU by how much of the batch is padding

    def __init__(
        self, embedding: nn.Embedding, hidden: int, layers: int, pooling: Pooling, dropout: float = 0.0
    ):
        super().__init__(embedding)
        self.lstm = nn.LSTM(
            embedding.embedding_dim,
            hidden,
            num_layers=layers,
            batch_first=True,
            bidirectional=True,
            dropout=dropout if layers > 1 else 0.0,  # on each layer's output but the last
        )
        self.between_layers = nn.Dropout(dropout)  # the same, for the dense kernel
        self.input_size, self.hidden, self.layers = embedding.embedding_dim, hidden, layers
        self.set_pooling(2 * hidden, pooling)
        self.register_load_state_dict_pre_hook(_from_earlier_layouts)

    def _packs(self, tokens: torch.Tensor, lengths: torch.Tensor) -> bool:
        if self.skips_padding(tokens):
            return True
        if self.kernel == "dense":
            return False
        # On the CPU (1 thread, 300-d inputs, forward + backward) packed sequences beat the
        # dense kernel only for narrow LSTMs on batches that are mostly padding: at hidden 512,
        # 0.74x its time at 30% real positions, 0.97x at 60%, 1.2x at 80%; at 2048, 1.1-1.5x
        # whatever the padding.
        return self.hidden < 1024 and int(lengths.sum()) < PACKED_BELOW_FILL * tokens.numel()

    def skips_padding(self, tokens: torch.Tensor) -> bool:
        return self.kernel == "packed" or (self.kernel == "auto" and tokens.is_cuda)

    def token_states(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(B, T, 2H) states of the last layer, both directions; padded positions are not read."""
        states = self.embedding(tokens)  # (B, T, E)
        if self._packs(tokens, lengths):
            return run_packed(states, lengths, self.lstm)  # (B, T, 2H)
        for layer in range(self.layers):
            if layer:
                states = self.between_layers(states)
            states = dense_bidirectional(states, lengths, self.lstm, layer)  # (B, T, 2H)
        return states

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packs = self._packs(tokens, lengths)
        chunks = (
            min(MOST_CHUNKS, len(tokens) // CHUNK_ROWS) if self.pooling != "none" else 1
        )  # none: (B, T, 2H)
        if packs and chunks > 1 and not self.skips_padding(tokens):  # the CPU would pack it
            return self._by_length(tokens, lengths, chunks)
        if self.pooling == "max" and packs:
            # Unpacked with -inf at padded positions, the max over time needs no mask: a dozen
            # host ops less per call, forward and backward (what bounds a GPU step).
            states = run_packed(self.embedding(tokens), lengths, self.lstm, padding_value=float("-inf"))
            return states.max(dim=1).values  # (B, 2H)
        states = self.token_states(tokens, lengths)  # (B, T, 2H)
        return self.pool_states(states, length_mask(lengths, states.shape[1], states.device), directions=2)

    def _by_length(self, tokens: torch.Tensor, lengths: torch.Tensor, chunks: int) -> torch.Tensor:
        """(B, 2H): the rows sorted by length, encoded `chunks` at a time (each as long as its
        longest row), and put back in their order. Each row's encoding is its own: the same
        function, within float32 rounding of another kernel."""
        order = torch.argsort(to_device(lengths, tokens.device), stable=True)
        parts = []
        for rows in torch.tensor_split(order, chunks):
            part = lengths[rows.to(lengths.device)]
            parts.append(self(tokens[rows, : int(part.max())], part))
        encoded = torch.cat(parts)
        return encoded[torch.argsort(order)]


EARLIER_NAME = re.compile(
    r"(?P<module>forward_layers|backward_layers|lstms)\.(?P<layer>\d+)\.(?P<name>\w+?)_l0(?P<reverse>_reverse)?"
)


def _from_earlier_layouts(module, state_dict, prefix, *_) -> None:
    """Checkpoints of earlier layouts load under today's names (lstm.weight_ih_lN[_reverse]): one
    nn.LSTM per layer (lstms.N.weight_ih_l0[_reverse]) or per layer and direction
    (forward_layers.N.weight_ih_l0, backward_layers.N.weight_ih_l0)."""
    for key in [k for k in state_dict if k.startswith(prefix)]:
        if old := EARLIER_NAME.fullmatch(key[len(prefix) :]):
            reverse = "_reverse" if old["reverse"] or old["module"] == "backward_layers" else ""
            state_dict[f"{prefix}lstm.{old['name']}_l{old['layer']}{reverse}"] = state_dict.pop(key)


def dense_bidirectional(
    states: torch.Tensor, lengths: torch.Tensor, lstm: nn.LSTM, layer: int
) -> torch.Tensor:
    """Layer `layer` of `lstm` over right-padded (B, T, E) `states`, a direction at a time."""
    ahead = one_direction(states, lstm, layer_weights(lstm, layer, ""))  # (B, T, H)
    behind = one_direction(
        reverse_within_lengths(states, lengths), lstm, layer_weights(lstm, layer, "_reverse")
    )
    return torch.cat([ahead, reverse_within_lengths(behind, lengths)], dim=-1)  # (B, T, 2H)


def layer_weights(lstm: nn.LSTM, layer: int, direction: str) -> list[torch.Tensor]:
    """One layer and direction's (w_ih, w_hh, b_ih, b_hh) of `lstm`; `direction`: "" or "_reverse"."""
    return [
        getattr(lstm, f"{name}_l{layer}{direction}")
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    ]


def one_direction(states: torch.Tensor, lstm: nn.LSTM, weights: list[torch.Tensor]) -> torch.Tensor:
    """Left to right over (B, T, E) with one direction's (w_ih, w_hh, b_ih, b_hh), as nn.LSTM runs."""
    zeros = states.new_zeros(1, states.shape[0], lstm.hidden_size)  # (1 layer, B, H)
    output, _, _ = torch._VF.lstm(
        states,
        (zeros, zeros),
        weights,
        True,  # has_biases
        1,  # num_layers
        0.0,  # dropout
        lstm.training,
        False,  # bidirectional
        True,  # batch_first
    )
    return output


@register("bilstm")
def build(embedding: nn.Embedding, config: EncoderConfig) -> BiLSTMEncoder:
    return BiLSTMEncoder(embedding, config.hidden, layers=1, pooling=config.pooling)
