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


def seed_step(seed: int, device: torch.device) -> None:
    """Seed the generators a step on `device` draws from (dropout masks): the CPU's, and on a GPU
    every GPU's, as `torch.manual_seed` does. Not `torch.manual_seed` itself, which mtl calls every
    step: where CUDA (or XPU, MTIA) is not initialised it queues their seeding with a formatted
    copy of the call stack, 0.25-0.9 ms a call here (by the stack's depth), against 1.3 us for the
    CPU's generator alone. The CPU generator's state is the same either way; a step on a GPU runs
    after the model went there, so CUDA is initialised and seeded at once."""
    torch.random.default_generator.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.manual_seed_all(seed)
