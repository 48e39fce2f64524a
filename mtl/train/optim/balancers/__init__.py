"""How `schedule=mixed` turns one batch of every training task into one update: a balancer per
file, chosen by `balancer=`, registered by name (a plugin adds its own with `register_balancer`).

A mixed step runs each task's forward and backward in turn and keeps its gradient on the shared
encoder apart (`gradients`: one row per task), so a balancer may weigh, project or renormalise
them; each task's head has only its own task's gradient. Every rank sees the same, all-reduced
gradients and losses, so every rank makes the same decision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from mtl.config import AtLeast1, NonNegativeFloat, PositiveFloat, key_owners_of
from mtl.plugins import Registry, adds_to

if TYPE_CHECKING:
    from mtl.train.optim.balancers.base import Balancer  # torch: imported when a mixed run builds one

BALANCERS: Registry[type[Balancer]] = Registry(
    {
        "sum": "mtl.train.optim.balancers.weighted_sum",
        "uncertainty": "mtl.train.optim.balancers.uncertainty",
        "gradnorm": "mtl.train.optim.balancers.gradnorm",
        "pcgrad": "mtl.train.optim.balancers.pcgrad",
        "famo": "mtl.train.optim.balancers.famo",
        "upgrad": "mtl.train.optim.balancers.jacobian",
        "aligned": "mtl.train.optim.balancers.jacobian",
        "nash": "mtl.train.optim.balancers.jacobian",
    }
)


# The balancers that add the tasks' losses, as a schedule of one task a step does: any schedule
# takes them; every other one combines the tasks of one step and needs schedule=mixed
ADDS_LOSSES = {"sum"}


def combines_a_steps_tasks(balancer: str) -> bool:
    """Whether `balancer` combines the gradients of the tasks one step trains (schedule=mixed's)."""
    return balancer not in ADDS_LOSSES


@dataclass
class GradNormOptions:
    gradnorm_alpha: NonNegativeFloat = (
        1.5  # balancer=gradnorm: how strongly slow tasks are pulled up (Chen et al.)
    )


@dataclass
class FAMOOptions:
    famo_w_lr: PositiveFloat = 0.025  # balancer=famo: the task logits' Adam learning rate (the authors')
    famo_gamma: NonNegativeFloat = (
        0.01  # balancer=famo: the logits' L2 weight decay (the authors'; LibMTL 0.001)
    )


@dataclass
class AlignedOptions:
    aligned_scale: Literal["min", "median", "rmse"] = (
        "min"  # balancer=aligned: scaled by the smallest singular value (the paper), median or rmse (its code)
    )


@dataclass
class NashOptions:
    nash_max_norm: NonNegativeFloat = (
        1.0  # balancer=nash: the combined gradient's norm cap (the authors'; 0: none)
    )
    nash_update_every: AtLeast1 = (
        1  # balancer=nash: steps between solves; the weights are kept between (the authors': 1)
    )
    nash_optim_niter: AtLeast1 = 20  # balancer=nash: the solver's iterations per solve (the authors')


# name -> the dataclass of the keys that configure that balancer alone (given flat on the command
# line, `gradnorm_alpha=2`; recorded as schedule.balancer_options): one given with another
# balancer is refused, and the balancer is built with `options=` an instance of it.
BALANCER_OPTIONS: dict[str, type] = {
    "gradnorm": GradNormOptions,
    "famo": FAMOOptions,
    "aligned": AlignedOptions,
    "nash": NashOptions,
}


def register_balancer(name: str, options: type | None = None) -> Callable[[type[Balancer]], type[Balancer]]:
    """Make a `Balancer` class (balancers.base) available to balancer=NAME (a class decorator);
    `options`: a dataclass of its own keys (`my_beta: PositiveFloat = 0.9`), handed to it as
    `options=` when built (it reads `options.my_beta`)."""
    if options is not None:
        if not dataclasses.is_dataclass(options):
            raise TypeError(f"balancer {name!r}: register_balancer(options=) takes a dataclass of its keys")
        BALANCER_OPTIONS[name] = options
    return adds_to(BALANCERS, name)


def balancer_key_owners() -> dict[str, list[str]]:
    """Each balancer-specific key -> the balancers that take it."""
    return key_owners_of(BALANCER_OPTIONS)


__all__ = [
    "BALANCERS",
    "BALANCER_OPTIONS",
    "AlignedOptions",
    "FAMOOptions",
    "GradNormOptions",
    "NashOptions",
    "balancer_key_owners",
    "combines_a_steps_tasks",
    "register_balancer",
]
