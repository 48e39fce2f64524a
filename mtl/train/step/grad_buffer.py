"""Every trained parameter's gradient in one contiguous tensor (Megatron-LM's and apex's
contiguous gradient buffer), so that zeroing, the gradient norm and clipping are one op each
instead of one per parameter (the host's work per step is what bounds a GPU step).

`torch.nn.utils.clip_grad_norm_` over P parameters dispatches about 7P ops on the host (a norm,
a cast and a stack entry per parameter, then a scale per parameter); over this buffer the same
clipping is five ops whatever P is.
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import nn

from mtl.train.run.sharding import TENSOR, is_instance


class GradientBuffer:
    """The gradients of `parameters` as views of one flat tensor.

    A step attaches the views of the parameters it trains (the others keep no gradient, as
    `zero_grad(set_to_none=True)` leaves them); backward accumulates into them in place. If
    anything replaced a gradient tensor after `attach` (a gradient hook, a DDP reducer that
    assigns instead of copying), `clip` sees it and clips parameter by parameter instead.
    """

    def __init__(self, parameters: list[nn.Parameter]):
        self.parameters = list({id(p): p for p in parameters}.values())
        kinds = {(p.dtype, p.device) for p in self.parameters}
        # (A sharded parameter's gradient is its shard, strategy=fsdp's, which the views are not.)
        self.enabled = len(kinds) == 1 and all(
            p.is_contiguous() and not is_instance(p, TENSOR, "DTensor") for p in self.parameters
        )
        self.views: dict[int, torch.Tensor] = {}
        self.offsets: dict[int, int] = {}
        self.constants: dict[float, torch.Tensor] = {}
        if not self.enabled:
            return
        dtype, device = kinds.pop()
        self.flat = torch.zeros(sum(p.numel() for p in self.parameters), dtype=dtype, device=device)
        offset = 0
        for p in self.parameters:
            self.views[id(p)] = self.flat[offset : offset + p.numel()].view_as(p)
            self.offsets[id(p)] = offset
            offset += p.numel()

    def attach(self, parameters: list[nn.Parameter]) -> None:
        """Zero the buffer and make it the gradient of `parameters` (their gradients start at zero)."""
        if not self.enabled:
            return
        self.flat.zero_()
        for p in parameters:
            p.grad = self.views[id(p)]

    def clip(self, parameters: list[nn.Parameter], max_norm: float) -> torch.Tensor:
        """Scale the gradients of `parameters` so that their norm is at most `max_norm` (inf: not
        at all), as `clip_grad_norm_` does; return their norm before clipping (on the device)."""
        if not self.holds(parameters):
            norm = nn.utils.clip_grad_norm_(parameters, max_norm)
            return (
                norm.full_tensor() if is_instance(norm, TENSOR, "DTensor") else norm
            )  # (sharded: the whole norm)
        # Parameters attached but not trained by this step hold zeros: the norm over the whole
        # buffer is theirs.
        norm = torch.linalg.vector_norm(self.flat)
        if math.isfinite(max_norm):
            # clip_grad_norm_'s coefficient; the constants as tensors: a Python number in an op
            # costs the host four ops more (its conversion to a tensor).
            coefficient = self._constant(max_norm) / (norm + self._constant(1e-6))
            self.flat.mul_(coefficient.clamp_max_(1.0))
        return norm

    def _constant(self, value: float) -> torch.Tensor:
        if value not in self.constants:
            self.constants[value] = torch.tensor(value, dtype=self.flat.dtype, device=self.flat.device)
        return self.constants[value]

    def holds(self, parameters: list[nn.Parameter]) -> bool:
        """Whether the buffer is, still, the gradient of every one of `parameters` (the others: none)."""
        if not self.enabled or len(parameters) > len(self.views):
            return False
        attached = [p for p in self.parameters if p.grad is not None]
        return len(attached) == len(parameters) and all(p.grad is self.views.get(id(p)) for p in parameters)

    # The mixed step keeps each task's gradient on the shared encoder apart and rewrites the
    # gradients the balancer combines: over parameters that lie side by side in the buffer, each of
    # these is one op on their slice of it; over others (a balancer's own parameters, a buffer
    # that does not hold them), one op per parameter, as the gradients are tensors of their own.

    def region(self, parameters: list[nn.Parameter]) -> torch.Tensor | None:
        """The slice of the buffer that is, still, the gradient of `parameters` (which lie side by
        side in it, in that order); None where it is not."""
        if not parameters or not self.holds_each(parameters):
            return None
        start = self.offsets[id(parameters[0])]
        end = start + sum(p.numel() for p in parameters)
        expected = itertools.accumulate((p.numel() for p in parameters[:-1]), initial=start)
        if any(self.offsets[id(p)] != offset for p, offset in zip(parameters, expected, strict=True)):
            return None
        return self.flat[start:end]

    def holds_each(self, parameters: list[nn.Parameter]) -> bool:
        """Whether the buffer is, still, the gradient of each of `parameters` (others may be attached too)."""
        return self.enabled and all(
            p.grad is not None and p.grad is self.views.get(id(p)) for p in parameters
        )

    def gradient_of(self, parameters: list[nn.Parameter], device: torch.device) -> torch.Tensor:
        """A float32 copy of the gradients of `parameters`, as one vector (zeros where one has none)."""
        if (flat := self.region(parameters)) is not None:
            return flat.to(torch.float32, copy=True)
        if not parameters:
            return torch.zeros(0, device=device)
        return torch.cat(
            [
                (p.grad if p.grad is not None else torch.zeros_like(p)).detach().float().flatten().to(device)
                for p in parameters
            ]
        )

    def set_gradient(self, parameters: list[nn.Parameter], values: torch.Tensor) -> None:
        """Make `values` (a vector laid out as `gradient_of` gives it) the gradients of `parameters`."""
        if (flat := self.region(parameters)) is not None:
            flat.copy_(values)
            return
        offset = 0
        for p in parameters:
            p.grad = values[offset : offset + p.numel()].view_as(p).to(p.dtype).clone()
            offset += p.numel()

    def scale_gradient(self, parameters: list[nn.Parameter], factor: torch.Tensor) -> None:
        """Multiply the gradients of `parameters` by `factor` (a 0-d tensor)."""
        if (flat := self.region(parameters)) is not None:
            flat.mul_(factor.to(flat.dtype))
            return
        for p in parameters:
            if p.grad is not None:
                p.grad.mul_(factor.to(p.grad.dtype))

    def clear(self, parameters: list[nn.Parameter]) -> None:
        """Gradients of `parameters` back to none (zero, in the buffer): the next backward starts afresh."""
        if (flat := self.region(parameters)) is not None:
            flat.zero_()
            return
        for p in parameters:
            p.grad = None
