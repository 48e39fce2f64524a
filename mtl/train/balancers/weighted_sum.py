"""balancer=sum: each task's loss times its `<task>.weight`, gradients added (the default)."""

from __future__ import annotations

from mtl.train.balancers.base import Balancer


class Sum(Balancer):
    """The weighted sum of the task losses (the base class's behaviour)."""
