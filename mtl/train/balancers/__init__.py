"""How `schedule=mixed` turns one batch of every training task into one update: a balancer per
file, chosen by `balancer=`, registered by name (a plugin adds its own with `register_balancer`).

A mixed step runs each task's forward and backward in turn and keeps its gradient on the shared
encoder apart (`gradients`: one row per task), so a balancer may weigh, project or renormalise
them; each task's head has only its own task's gradient. Every rank sees the same, all-reduced
gradients and losses, so every rank makes the same decision.
"""

from __future__ import annotations

from collections.abc import Callable

from mtl.plugins import adds_to
from mtl.train.balancers import gradnorm, pcgrad, uncertainty, weighted_sum
from mtl.train.balancers.base import Balancer

BALANCERS: dict[str, type[Balancer]] = {}


def register_balancer(name: str) -> Callable[[type[Balancer]], type[Balancer]]:
    """Make a `Balancer` class available to balancer=NAME (a class decorator)."""
    return adds_to(BALANCERS, name)


for _name, _balancer in [
    ("sum", weighted_sum.Sum),
    ("uncertainty", uncertainty.Uncertainty),
    ("gradnorm", gradnorm.GradNorm),
    ("pcgrad", pcgrad.PCGrad),
]:
    register_balancer(_name)(_balancer)

__all__ = ["BALANCERS", "Balancer", "register_balancer"]
