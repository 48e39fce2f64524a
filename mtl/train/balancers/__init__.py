"""How `schedule=mixed` turns one batch of every training task into one update: a balancer per
file, chosen by `balancer=`, registered by name (a plugin adds its own with `register_balancer`).

A mixed step runs each task's forward and backward in turn and keeps its gradient on the shared
encoder apart (`gradients`: one row per task), so a balancer may weigh, project or renormalise
them; each task's head has only its own task's gradient. Every rank sees the same, all-reduced
gradients and losses, so every rank makes the same decision.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from mtl.plugins import Registry, adds_to

if TYPE_CHECKING:
    from mtl.train.balancers.base import Balancer  # torch: imported when a mixed run builds one

BALANCERS: Registry[type[Balancer]] = Registry(
    {
        "sum": "mtl.train.balancers.weighted_sum",
        "uncertainty": "mtl.train.balancers.uncertainty",
        "gradnorm": "mtl.train.balancers.gradnorm",
        "pcgrad": "mtl.train.balancers.pcgrad",
    }
)


# name -> the keys that configure that balancer alone: one given with another balancer is refused
BALANCER_KEYS: dict[str, tuple[str, ...]] = {"gradnorm": ("gradnorm_alpha",)}


def register_balancer(name: str, keys: tuple[str, ...] = ()) -> Callable[[type[Balancer]], type[Balancer]]:
    """Make a `Balancer` class (balancers.base) available to balancer=NAME (a class decorator);
    `keys`: the existing keys it reads (a plugin GradNorm variant: ("gradnorm_alpha",))."""
    if keys:
        BALANCER_KEYS[name] = tuple(keys)
    return adds_to(BALANCERS, name)


def balancer_key_owners() -> dict[str, list[str]]:
    """Each balancer-specific key -> the balancers that take it."""
    owners: dict[str, list[str]] = {}
    for name, keys in BALANCER_KEYS.items():
        for key in keys:
            owners.setdefault(key, []).append(name)
    return owners


__all__ = ["BALANCERS", "BALANCER_KEYS", "balancer_key_owners", "register_balancer"]
