"""torch.optim's optimizers without importing torch._dynamo in a process that compiles nothing.

torch.optim guards its optimizers against the compiler: `add_param_group`, `zero_grad`,
`state_dict` and `load_state_dict` are wrapped in `torch._disable_dynamo`, and `step` in a guard
that sets the grad mode and calls `torch._dynamo.graph_break()`. Each guard imports torch._dynamo
the first time it runs (1.3-2.0 CPU-s after torch here), in every process a test, a study or
torchrun starts, and in every transfer that fits a torch classifier. Without it a tiny training
process took 3.99 CPU-s against 4.42 (medians of three, RESULTS.md 2026-11-30): less than the
import, as autograd still imports SymPy, a part of it, for the step's seeded backward.

The guards act only while dynamo traces, and nothing can trace before torch._dynamo is imported.
So an optimizer made by `without_dynamo(cls)` calls the functions the guards wrap (setting the
grad mode as the step's guard does) for as long as torch._dynamo is not in the process; once it
is (torch.compile anywhere, `compile=true`), it calls torch's guarded methods, as a plain
optimizer does. The update is torch's own either way, bit for bit.
"""

from __future__ import annotations

import functools
import inspect
import sys
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # torch itself is not imported here: scikit-learn's fitting processes import
    import torch  # the transfer classifiers' module, which imports this one, and need no torch

Optimizer = TypeVar("Optimizer", bound="torch.optim.Optimizer")

GUARDED = ("add_param_group", "zero_grad", "state_dict", "load_state_dict")  # and step


def dynamo_imported() -> bool:
    return "torch._dynamo" in sys.modules


@functools.cache
def without_dynamo(optimizer_class: type[Optimizer]) -> type[Optimizer]:
    """`optimizer_class` (torch.optim.Adam, ...) with its guards skipped until dynamo is imported:
    a subclass of the same name (profiler labels and `isinstance` read as before). The functions
    the guards wrap are found once, here, not on every step."""
    guarded = {name: getattr(optimizer_class, name) for name in (*GUARDED, "step")}
    inner = {name: inspect.unwrap(method) for name, method in guarded.items()}  # itself where unguarded

    def call(name: str, self, *args: Any) -> Any:
        return (guarded if dynamo_imported() else inner)[name](self, *args)

    class Unguarded(optimizer_class):
        def add_param_group(self, param_group: dict[str, Any]) -> None:
            return call("add_param_group", self, param_group)

        def zero_grad(self, set_to_none: bool = True) -> None:
            return call("zero_grad", self, set_to_none)

        def state_dict(self) -> dict[str, Any]:
            return call("state_dict", self)

        def load_state_dict(self, state_dict: dict[str, Any]) -> None:
            return call("load_state_dict", self, state_dict)

        def step(self, closure=None):
            if dynamo_imported():
                return guarded["step"](self, closure)
            import torch  # imported already: this is one of its optimizers

            # what torch's step guard does but its graph breaks: the grad mode of `differentiable=`
            with torch.set_grad_enabled(self.defaults["differentiable"]):
                return inner["step"](self, closure)

    Unguarded.__name__, Unguarded.__qualname__ = optimizer_class.__name__, optimizer_class.__qualname__
    return Unguarded
