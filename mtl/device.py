"""The device a run uses, from config: `auto` picks CUDA when present."""

from __future__ import annotations

import torch

from mtl.errors import UserError


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """`tensor` on `device`; from the CPU to a GPU through pinned memory, without waiting for the copy."""
    if device.type != "cuda" or tensor.device.type != "cpu":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UserError(f"device={name!r} is not a device: use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"device={name!r} but CUDA is not available here: use device=cpu or device=auto")
    return device
