"""Optimizers: InferSent's SGD, Adam, and SBERT's AdamW (no decay on biases and LayerNorm), or a
plugin's (optimizer_registry.py), with each parameter's learning rate: a task's own
(`<task>.lr=`), the encoder's (`encoder_lr=`), a pretrained backbone's (`hf_lr=`, AdamW)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from mtl.runtime.no_dynamo import without_dynamo
from mtl.train.config.train_config import OptimConfig, parse_lr
from mtl.train.optim.optimizer_registry import DEFAULTS, OPTIMIZERS, register_optimizer

LrOf = Callable[[nn.Parameter], float]  # a parameter's lr, before any schedule


def build_optimizer(
    config: OptimConfig,
    parameters: list[nn.Parameter],
    pretrained: set[int],
    lr_of: LrOf | None = None,
    undecayed: set[int] = frozenset(),
) -> torch.optim.Optimizer:
    """One optimizer over `parameters`; `pretrained`: ids of a pretrained backbone's parameters;
    `lr_of`: each parameter's lr (None: `lr=` for all, AdamW's backbone `hf_lr=`); `undecayed`:
    ids of parameters AdamW leaves without weight decay besides the 1-d ones (trained word
    vectors: decay would pull the rows of rare words toward zero between their updates).

    Parameters are grouped by lr (and, for AdamW, by backbone and weight decay); every group keeps
    its `base_lr`, which step-driven lr schedules scale, and InferSent's schedule scales every
    group alike, so the ratios between them hold throughout.
    """
    lr_of = lr_of or (lambda p: config.lr)
    if not DEFAULTS[config.optim].decoupled_weight_decay:
        groups: dict[float, list[nn.Parameter]] = {}
        for p in parameters:  # in order: the encoder's lr first (what LrSchedule.lr reads)
            groups.setdefault(lr_of(p), []).append(p)
        return OPTIMIZERS[config.optim](
            [{"params": params, "lr": lr, "base_lr": lr} for lr, params in groups.items()], config
        )
    # SBERT: no weight decay on biases and LayerNorm (the 1-d parameters); a pretrained
    # backbone has its own lr (hf_lr, or encoder_lr), the new heads theirs (lr).
    encoder_lr = parse_lr(config.encoder_lr, config.lr, "encoder_lr")
    backbone_lr = encoder_lr if encoder_lr is not None else config.hf_lr
    decay_groups: dict[tuple[bool, bool, float], list[nn.Parameter]] = {}
    for p in parameters:
        in_backbone = id(p) in pretrained
        lr = backbone_lr if in_backbone else lr_of(p)
        decay_groups.setdefault((in_backbone, p.ndim > 1 and id(p) not in undecayed, lr), []).append(p)
    return OPTIMIZERS[config.optim](
        [
            {
                "params": params,
                "lr": lr,
                "base_lr": lr,
                "weight_decay": config.weight_decay if decays else 0.0,
            }
            for (_, decays, lr), params in sorted(decay_groups.items(), reverse=True)  # backbone first
        ],
        config,
    )


@register_optimizer("sgd", DEFAULTS["sgd"])
def sgd(groups: list[dict], config: OptimConfig) -> torch.optim.Optimizer:
    return without_dynamo(torch.optim.SGD)(groups, lr=config.lr, **update_kernel(groups))


@register_optimizer("adam", DEFAULTS["adam"])
def adam(groups: list[dict], config: OptimConfig) -> torch.optim.Optimizer:
    return without_dynamo(torch.optim.Adam)(groups, lr=config.lr, **update_kernel(groups))


@register_optimizer("adamw", DEFAULTS["adamw"])
def adamw(groups: list[dict], config: OptimConfig) -> torch.optim.Optimizer:
    return without_dynamo(torch.optim.AdamW)(groups, **update_kernel(groups))


def update_kernel(groups: list[dict]) -> dict[str, bool]:
    """The optimizer's fused kernel where PyTorch has one (CPU and CUDA, floating point): one op
    for the whole update, where the per-parameter loop PyTorch picks by default on the CPU
    dispatches an op or more per parameter and `foreach` on CUDA several (a GPU step of these
    small models is bound by the host's work, not the GPU's)."""
    parameters = [p for group in groups for p in group["params"]]
    fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in parameters)
    return {"fused": True} if fused and parameters else {}  # else: PyTorch's choice


def learning_rates(
    config: OptimConfig,
    task_lrs: dict[str, str],
    encoder: list[nn.Parameter],
    heads: dict[str, list[nn.Parameter]],
    word_vectors: list[nn.Parameter] | None = None,
) -> Callable[[str | None], LrOf]:
    """`lr_of(task)`: each parameter's lr in `task`'s optimizer (None: the one every task shares).

    A head's: its task's `<task>.lr=` where given, else `lr=`. The encoder's: `encoder_lr=` where
    given, else, in a task's own optimizer, that task's lr, and in a shared one `lr=`. Trained
    word vectors (`word_vectors`, part of the encoder): `embedding_lr=` where given, else the
    encoder's. Multiples (x0.5) are of `lr=`. Anything else (a balancer's parameters): `lr=`.
    """
    own = {name: parse_lr(text, config.lr, f"{name}.lr") for name, text in task_lrs.items()}
    encoder_lr = parse_lr(config.encoder_lr, config.lr, "encoder_lr")
    embedding_lr = parse_lr(config.embedding_lr, config.lr, "embedding_lr")
    in_encoder = {id(p) for p in encoder}
    in_vectors = {id(p) for p in word_vectors or []}
    head_of = {id(p): task for task, params in heads.items() for p in params}

    def lr_of(task: str | None) -> LrOf:
        def lr(p: nn.Parameter) -> float:
            if id(p) in in_vectors and embedding_lr is not None:
                return embedding_lr
            owner = task if id(p) in in_encoder else head_of.get(id(p))
            if id(p) in in_encoder and encoder_lr is not None:
                return encoder_lr
            found = own.get(owner) if owner is not None else None
            return found if found is not None else config.lr

        return lr

    return lr_of


def build_optimizers(
    config: OptimConfig,
    task_parameters: dict[str, list[nn.Parameter]],
    pretrained: set[int],
    shared_extra: list[nn.Parameter] | None = None,
    lr_of: Callable[[str | None], LrOf] | None = None,
    undecayed: set[int] = frozenset(),
) -> dict[str, torch.optim.Optimizer]:
    """An optimizer per task (as the original code), or one shared by all (`optimizer_per_task=false`,
    which schedule=mixed resolves to); `shared_extra`: a balancer's parameters, in the shared one;
    `lr_of(task)`: each parameter's lr in that task's optimizer (task None: the shared one);
    `undecayed`: see build_optimizer."""
    lr_of = lr_of or (lambda task: lambda p: config.lr)
    if config.optimizer_per_task:
        return {
            task: build_optimizer(config, params, pretrained, lr_of(task), undecayed)
            for task, params in task_parameters.items()
        }
    everything = list({id(p): p for params in task_parameters.values() for p in params}.values())
    everything += shared_extra or []
    shared = build_optimizer(config, everything, pretrained, lr_of(None), undecayed)
    return dict.fromkeys(task_parameters, shared)
