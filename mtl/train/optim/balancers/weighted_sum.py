"""balancer=sum: each task's loss times its `<task>.weight`, gradients added (the default)."""

from __future__ import annotations

from mtl.train.optim.balancers import register_balancer
from mtl.train.optim.balancers.base import Balancer


@register_balancer("sum")
class Sum(Balancer):
    """The weighted sum of the task losses (the base class's behaviour)."""
