"""The optimizers `optim=` names, each with the defaults its `auto` keys take (lr, gradient
clipping, lr schedule, stopping rule), readable without torch: mtl's own are built in
optimizers.py, imported when a run first builds one; a plugin's registers its builder and its
defaults together (`register_optimizer("lamb", OptimizerDefaults(...))`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mtl.config import owners_of_keys
from mtl.plugins import Registry


@dataclass(frozen=True)
class OptimizerDefaults:
    lr: float  # lr=, when not given
    max_grad_norm: float  # the gradient norm clipped at, when max_grad_norm= is not given
    lr_schedule: str  # lr_schedule=auto
    stop: str  # stop=auto
    # SBERT's parameter groups: weight decay (weight_decay=) except on biases and LayerNorm, and
    # a pretrained backbone at hf_lr=; else one group per learning rate, without decay.
    decoupled_weight_decay: bool = False


# InferSent's SGD clips at 5, decays by epoch and shrinks on a stall (train_nli.py); SBERT's AdamW
# clips at 1, warms up and decays linearly to 0 at the end of its one epoch.
DEFAULTS: dict[str, OptimizerDefaults] = {
    "sgd": OptimizerDefaults(lr=0.1, max_grad_norm=5.0, lr_schedule="infersent", stop="min_lr"),
    "adam": OptimizerDefaults(lr=1e-3, max_grad_norm=5.0, lr_schedule="constant", stop="patience"),
    "adamw": OptimizerDefaults(
        lr=1e-3, max_grad_norm=1.0, lr_schedule="linear", stop="max_steps", decoupled_weight_decay=True
    ),
}

# name -> make(parameter groups, the run's OptimConfig) -> torch.optim.Optimizer. Each group holds
# its "params", "lr" and "base_lr" (what step-driven lr schedules scale), and its "weight_decay"
# for an optimizer with decoupled_weight_decay.
OPTIMIZERS: Registry[Callable[..., Any]] = Registry({name: "mtl.train.optim.optimizers" for name in DEFAULTS})


def register_optimizer(
    name: str, defaults: OptimizerDefaults
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Make an optimizer available to optim=NAME (a decorator on its `make(groups, config)`)."""

    def add(make: Callable[..., Any]) -> Callable[..., Any]:
        OPTIMIZERS[name] = make
        DEFAULTS[name] = defaults
        return make

    return add


def auto_optimizer(pretrained_encoder: bool) -> str:
    """What optim=auto means: SBERT's AdamW for a pretrained encoder, else InferSent's SGD."""
    return "adamw" if pretrained_encoder else "sgd"


def optimizer_key_owners() -> dict[str, list[str]]:
    """The OptimConfig keys only some optimizers read -> those optimizers: weight decay and a
    pretrained backbone's lr, for the ones with SBERT's parameter groups (a plugin's too)."""
    groups = ("weight_decay", "hf_lr")
    return owners_of_keys(
        {name: groups for name, defaults in DEFAULTS.items() if defaults.decoupled_weight_decay}
    )
