"""Optimizers: InferSent's SGD, Adam, and SBERT's AdamW (no decay on biases and LayerNorm)."""

from __future__ import annotations

import torch
from torch import nn

from mtl.train.config import OptimConfig


def build_optimizer(
    config: OptimConfig, parameters: list[nn.Parameter], pretrained: set[int]
) -> torch.optim.Optimizer:
    """One optimizer over `parameters`; `pretrained`: ids of a pretrained backbone's parameters.

    Every parameter group keeps its `base_lr`, which step-driven lr schedules scale.
    """
    if config.optim == "sgd":
        return torch.optim.SGD(
            [{"params": parameters, "base_lr": config.lr}], lr=config.lr, **update_kernel(parameters)
        )
    if config.optim == "adam":
        return torch.optim.Adam(
            [{"params": parameters, "base_lr": config.lr}], lr=config.lr, **update_kernel(parameters)
        )
    # SBERT: AdamW, no weight decay on biases and LayerNorm (the 1-d parameters); a pretrained
    # backbone has its own lr (hf_lr), the new heads theirs (lr).
    groups: dict[tuple[bool, bool], list[nn.Parameter]] = {}
    for p in parameters:
        groups.setdefault((id(p) in pretrained, p.ndim > 1), []).append(p)
    return torch.optim.AdamW(
        [
            {
                "params": params,
                "lr": (base := config.hf_lr if in_backbone else config.lr),
                "base_lr": base,
                "weight_decay": config.weight_decay if decays else 0.0,
            }
            for (in_backbone, decays), params in sorted(groups.items(), reverse=True)  # backbone first
        ],
        **update_kernel(parameters),
    )


def update_kernel(parameters: list[nn.Parameter]) -> dict[str, bool]:
    """The optimizer's fused kernel where PyTorch has one (CPU and CUDA, floating point): one op
    for the whole update, where the per-parameter loop PyTorch picks by default on the CPU
    dispatches an op or more per parameter and `foreach` on CUDA several (issue 40: the host's
    work per step)."""
    fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in parameters)
    return {"fused": True} if fused and parameters else {}  # else: PyTorch's choice


def build_optimizers(
    config: OptimConfig,
    task_parameters: dict[str, list[nn.Parameter]],
    pretrained: set[int],
    shared_extra: list[nn.Parameter] | None = None,
) -> dict[str, torch.optim.Optimizer]:
    """An optimizer per task (as the original code), or one shared by all (`optimizer_per_task=false`,
    which schedule=mixed resolves to); `shared_extra`: a balancer's parameters, in the shared one."""
    if config.optimizer_per_task:
        return {task: build_optimizer(config, params, pretrained) for task, params in task_parameters.items()}
    everything = list({id(p): p for params in task_parameters.values() for p in params}.values())
    everything += shared_extra or []
    shared = build_optimizer(config, everything, pretrained)
    return dict.fromkeys(task_parameters, shared)
