"""The encoder contract, pooling over real positions, and building a registered encoder by name."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from mtl.errors import UserError
from mtl.models.encoders.config import (
    ENCODERS,
    TRAITS,
    EncoderConfig,
    EncoderTraits,
    Pooling,
    register,
    traits,
)
from mtl.models.encoders.embedding import frozen_embedding, word_embedding
from mtl.runtime.device import to_device

__all__ = [
    "ENCODERS",
    "TRAITS",
    "Encoder",
    "EncoderConfig",
    "EncoderTraits",
    "Pooling",
    "build_encoder",
    "frozen_embedding",
    "register",
    "traits",
    "word_embedding",
]


class Encoder(nn.Module):
    """`forward(tokens (B, T), lengths (B,)) -> (B, output_dim)` sentence embeddings.

    Tokens are on the encoder's device; lengths on the CPU (as batches keep them, so no step
    waits for the GPU to read them back) or on that device.

    Pair models (decomposable attention) also score two sentences against each other with
    `compare(a, a_lengths, b, b_lengths) -> (B, pair_dim)`; heads use that when `pair_model`.
    """

    output_dim: int
    pair_model: bool = False
    pair_dim: int = 0
    state_width: int = 0  # D of the (B, T, D) states that `pooling` pools
    fixed_pooling: bool = False  # the architecture pools its own way: encode(pooling=) cannot change it

    def __init__(self, embedding: nn.Embedding | None):
        super().__init__()
        self.embedding = embedding  # None for models with their own (encoder=hf)
        self.attention: SelfAttentivePooling | None = None  # pooling=selfattn's parameters

    def set_pooling(self, state_width: int, pooling: Pooling) -> None:
        """Pool (B, T, state_width) states with `pooling`; selfattn gets its parameters from
        `attend_with` (build_encoder calls it)."""
        self.pooling, self.state_width = pooling, state_width
        self.output_dim = pooled_dim(state_width, pooling)

    def attend_with(self, da: int, r: int) -> None:
        self.attention = SelfAttentivePooling(self.state_width, da, r)
        self.output_dim = self.attention.output_dim

    def pool_states(self, states: torch.Tensor, mask: torch.Tensor, directions: int = 1) -> torch.Tensor:
        """(B, T, D) states over real positions -> (B, output_dim); pooling "none" (token_states):
        the states themselves, zero at padded positions."""
        if self.pooling == "none":
            return states * mask[:, :, None]
        if self.pooling == "selfattn":  # build_encoder attached it; encode() refuses encoders without
            return self.attention(states, mask)
        return pool(states, mask, self.pooling, directions)

    def skips_padding(self, tokens: torch.Tensor) -> bool:
        """Whether a call on `tokens` costs nothing at padded positions (packed sequences), so
        that sentences padded to one another's length may share a call."""
        return False

    def compare(
        self, a: torch.Tensor, a_lengths: torch.Tensor, b: torch.Tensor, b_lengths: torch.Tensor
    ) -> torch.Tensor:
        raise NotImplementedError(f"{type(self).__name__} is not a pair model")


EncoderBuilder = Callable[[nn.Embedding | None, EncoderConfig], Encoder]


def build_encoder(embedding: nn.Embedding | None, config: EncoderConfig) -> Encoder:
    """`embedding`: frozen word vectors; None for encoder=hf, which brings its own."""
    if config.encoder not in ENCODERS:
        raise UserError(f"unknown encoder {config.encoder!r}: choose one of {', '.join(sorted(ENCODERS))}")
    config = config.resolved()
    encoder = ENCODERS[config.encoder](embedding, config)
    if config.pooling == "selfattn":
        encoder.attend_with(config.selfattn_da, config.selfattn_r)
    if config.bottleneck:
        encoder = Bottleneck(encoder, config.bottleneck)
    return encoder


class SelfAttentivePooling(nn.Module):
    """Structured self-attention over a sentence's states (Lin et al. 2017, Section 2; Liu et al.
    2018, Section 5.1): A = softmax(W2 tanh(W1 Hᵀ)) over real positions, embedding AH flattened,
    r·D wide. Lin et al.'s penalty on AAᵀ is not part of Liu et al.'s description and not applied."""

    def __init__(self, width: int, da: int, r: int):
        super().__init__()
        self.w1 = nn.Linear(width, da, bias=False)  # W1 ∈ R^{da × D}
        self.w2 = nn.Linear(da, r, bias=False)  # W2 ∈ R^{r × da}
        self.output_dim = r * width

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = self.w2(torch.tanh(self.w1(states)))  # (B, T, r)
        weights = scores.masked_fill(~mask[:, :, None], float("-inf")).softmax(dim=1)  # over T
        return (weights.transpose(1, 2) @ states).flatten(1)  # (B, r, D) -> (B, r·D)


class Bottleneck(Encoder):
    """A linear layer after the encoder's pooling, so that encoders of any width give N-d
    embeddings (Liu et al. 2018, Section 6; the authors' `bottle_dim`)."""

    def __init__(self, inner: Encoder, dim: int):
        super().__init__(inner.embedding)
        self.inner = inner
        self.project = nn.Linear(inner.output_dim, dim)
        self.output_dim, self.state_width = dim, inner.state_width

    @property
    def pooling(self) -> str:
        return self.inner.pooling

    @pooling.setter
    def pooling(self, value: str) -> None:
        if value != self.inner.pooling:
            raise UserError(
                f"pooling={value}: this encoder has a bottleneck trained on pooling={self.inner.pooling} "
                "embeddings, so its pooling cannot change"
            )

    def skips_padding(self, tokens: torch.Tensor) -> bool:
        return self.inner.skips_padding(tokens)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self.project(self.inner(tokens, lengths))  # (B, N)


def length_mask(lengths: torch.Tensor, width: int, device: torch.device) -> torch.Tensor:
    """(B, T) True at real positions, on `device`: made where `lengths` are (the CPU, as batches
    keep them), then copied without blocking."""
    return to_device(torch.arange(width, device=lengths.device)[None, :] < lengths[:, None], device)


def pooled_dim(width: int, pooling: Pooling) -> int:
    """Width of `pool`'s output (selfattn: see SelfAttentivePooling.output_dim)."""
    return 2 * width if pooling == "max+mean" else width


def pool(states: torch.Tensor, mask: torch.Tensor, pooling: Pooling, directions: int = 1) -> torch.Tensor:
    """Pool (B, T, D) states over real positions only -> (B, D), or (B, 2D) for max+mean.

    `cls`: the first position's state (a pretrained model's [CLS] token). `last`: a recurrent
    network's final states: left to right at the last real word, right to left (the second
    half of D when `directions` is 2) at the first."""
    if pooling == "cls":
        return states[:, 0]
    if pooling == "last":
        last = (mask.sum(dim=1) - 1).clamp(min=0)  # (B,)
        forward = states[torch.arange(len(states), device=states.device), last]
        if directions == 1:
            return forward
        width = states.shape[-1] // 2
        return torch.cat([forward[:, :width], states[:, 0, width:]], dim=-1)
    parts = []
    if pooling in ("max", "max+mean"):
        # max() as InferSent's code (torch.max(u, 0)[0]): on ties the gradient goes to one
        # position, and its backward is a third of amax's ops on the host.
        parts.append(torch.where(mask[:, :, None], states, float("-inf")).max(dim=1).values)
    if pooling == "sum":  # Liu et al. 2018, Table 2: "Decomposable Att (Sum)"
        return (states * mask[:, :, None]).sum(dim=1)
    if pooling in ("mean", "max+mean"):
        summed = (states * mask[:, :, None]).sum(dim=1)
        parts.append(summed / mask.sum(dim=1, keepdim=True).clamp(min=1))
    return torch.cat(parts, dim=-1) if len(parts) > 1 else parts[0]
