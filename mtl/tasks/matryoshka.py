"""Matryoshka representation learning (Kusupati et al. 2022; sentence-transformers' MatryoshkaLoss):
a task's loss at several widths of the embeddings (their first w dimensions), weighted and
summed, so that `encode(truncate_dim=w)` keeps quality. Heads that compare embeddings (mnrl,
qt, sts) score each width directly; a classification head has a classifier of its own for each
width below the full one (the paper's MRL: a linear classifier per nesting). In training only.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from mtl.config import Range, read_numbers
from mtl.errors import UserError
from mtl.models.heads import Widths
from mtl.tasks.configs import TaskConfig


def matryoshka_widths(config: TaskConfig, name: str, dim: int) -> Widths:
    """(width, weight) of each width of `matryoshka=` (Kusupati et al. 2022; sentence-transformers'
    MatryoshkaLoss), checked against the encoder's `dim`."""
    if not config.matryoshka.strip():
        if config.matryoshka_weights.strip():
            raise UserError(
                f"{name}.matryoshka_weights= weighs the widths of {name}.matryoshka=: give those too"
            )
        return ()
    widths = read_numbers(f"{name}.matryoshka", config.matryoshka, int, Range(1))
    weights = (
        read_numbers(f"{name}.matryoshka_weights", config.matryoshka_weights, float, Range(0, low_open=True))
        if config.matryoshka_weights.strip()
        else []
    )
    if weights and len(weights) != len(widths):
        raise UserError(
            f"{name}.matryoshka_weights={config.matryoshka_weights}: give one weight per width of "
            f"{name}.matryoshka={config.matryoshka} ({len(widths)})"
        )
    if not all(0 < w <= dim for w in widths) or len(set(widths)) < len(widths):
        raise UserError(
            f"{name}.matryoshka={config.matryoshka}: the encoder's embeddings have {dim} dimensions: "
            f"give distinct widths from 1 to {dim}"
        )
    return tuple(zip(widths, weights or [1.0] * len(widths), strict=True))


def over_widths(
    loss: Callable[[torch.Tensor], torch.Tensor],
    full: torch.Tensor,
    truncated: tuple[tuple[float, torch.Tensor], ...],
) -> torch.Tensor:
    """`loss` of the full width's outputs; when training with matryoshka=, the weighted sum of
    `loss` at each width instead (the full width counted only where listed, as
    sentence-transformers' MatryoshkaLoss)."""
    if not truncated:
        return loss(full)
    return sum(weight * loss(outputs) for weight, outputs in truncated)
