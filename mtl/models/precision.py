"""Mixed precision from config: `auto` picks bf16 where the device computes it natively."""

from __future__ import annotations

import contextlib

import torch

from mtl.errors import UserError
from mtl.models.encoders import traits

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def bf16_supported(device: torch.device) -> bool:
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        try:  # oneDNN's check for native bf16 (AVX512-BF16 or AMX)
            return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
        except (AttributeError, RuntimeError):
            return False
    return False


def resolve_precision(name: str, device: torch.device, encoder: str | None = None) -> str:
    """`fp32`, `bf16` or `fp16` for `device`; `auto` is bf16 where supported, else fp32.

    Except the LSTMs on CUDA: cuDNN runs their fp32 on TF32 tensor cores already, and bf16
    measured 1.0x down to 0.69x fp32's speed there (an H100, the paper's batch sizes).
    """
    recurrent = encoder is not None and traits(encoder).recurrent
    if name == "auto":
        if device.type == "cuda" and recurrent:
            return "fp32"
        return "bf16" if bf16_supported(device) else "fp32"
    if name == "bf16" and device.type == "cuda" and not bf16_supported(device):
        raise UserError("precision=bf16 but this GPU has no bf16: use precision=fp16 or fp32")
    if name == "bf16" and device.type == "cpu" and recurrent and not bf16_supported(device):
        # oneDNN's LSTM fails to build its bf16 kernel without native bf16 (found on an AVX2-only
        # AMD EPYC); a GRU stays fp32 under autocast, so bf16 would change nothing for it.
        raise UserError(
            f"precision=bf16 with encoder={encoder} on this CPU: it has no native bf16 (AVX512-BF16 or "
            "AMX), which PyTorch's CPU LSTM needs in bf16; use precision=fp32 (or auto)"
        )
    if name == "fp16" and device.type == "cpu" and recurrent:
        raise UserError(
            f"precision=fp16 with encoder={encoder} on the CPU: PyTorch's CPU LSTM has no fp16 kernel; "
            "use precision=bf16 or fp32 (fp16 is for GPUs)"
        )
    return name


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=DTYPES[precision])


def grad_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler:
    """Loss scaling for fp16 on CUDA, where small gradients would underflow; a no-op otherwise."""
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16" and device.type == "cuda")
