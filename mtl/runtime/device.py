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
    if device.type not in ("cpu", "cuda"):
        raise UserError(f"device={name!r} is not one mtl trains on: use auto, cpu, cuda or cuda:N")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"device={name!r} but CUDA is not available here: use device=cpu or device=auto")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise UserError(
            f"device={name!r} but this machine has {torch.cuda.device_count()} GPU(s): use cuda:0 to "
            f"cuda:{torch.cuda.device_count() - 1}, or device=cuda"
        )
    return device
