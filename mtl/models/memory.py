"""Refuse a model that cannot fit before allocating it: an impossible `hidden=` is one line, not an
out-of-memory traceback (or minutes of swapping) from inside the first layer's constructor."""

from __future__ import annotations

import os
from collections.abc import Callable

import torch
from torch import nn

from mtl.errors import UserError

BYTES_PER_PARAMETER = 8  # fp32 weights and their gradients, before any optimizer state


def check_fits(build: Callable[[], nn.Module], device: torch.device, settings: str) -> None:
    """Build the model on PyTorch's meta device (shapes only, no memory) and compare its trainable
    weights and gradients with the memory of `device`; `settings` names what sizes it (`hidden=...`)."""
    with torch.device("meta"):
        probe = build()
    parameters = sum(p.numel() for p in probe.parameters() if p.requires_grad)
    needed, memory = parameters * BYTES_PER_PARAMETER, device_memory(device)
    if memory is not None and needed > memory:
        raise UserError(
            f"{settings} makes {parameters:,} trainable parameters: {_size(needed)} for weights and "
            f"gradients alone, more than the {_size(memory)} of {device.type.upper()} memory here; "
            "choose a smaller size"
        )


def device_memory(device: torch.device) -> int | None:
    """Total bytes of memory of `device` (the machine's RAM for the CPU), or None when unknown."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _size(count: float) -> str:
    """`23.5 GiB`: bytes in the largest binary unit (up to TiB) that keeps the number at least 1."""
    unit = "B"
    for larger in ("KiB", "MiB", "GiB", "TiB"):
        if count < 1024:
            break
        count, unit = count / 1024, larger
    return f"{count:,.0f} B" if unit == "B" else f"{count:,.1f} {unit}"
