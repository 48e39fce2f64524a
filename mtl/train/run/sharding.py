"""strategy=fsdp: the model's parameters, gradients and optimizer state sharded over the
torchrun processes (PyTorch's FSDP2, `fully_shard`; Zhao et al. 2023), for a pretrained
transformer too large to train whole in each process's memory.

Each transformer layer is a unit of its own (gathered just before its forward, freed after it,
gathered again for backward), each task's head another, and the multitask model the root that
keeps the rest (the embeddings). Gradients are averaged over the processes as DDP's are, so a
step's update is the one DDP and one process make.

Checkpoints hold whole tensors, as a one-process run's do: every process gathers its shards
when one is written and takes its own shards of a loaded one, so a run resumes exactly at any
number of processes, with either strategy. Evaluation gathers the parameters once and runs
without collectives, so ranks may score different numbers of batches.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from mtl.models.encoders.hf import HFEncoder, transformer_layers
from mtl.models.heads import MultitaskModel

# FSDP2 and DTensor are imported by the first `shard` (about 1 s of imports, which every run that
# shards nothing, nearly all of them, skips): until then nothing is an FSDP module or a DTensor.
FSDP, TENSOR = "torch.distributed.fsdp", "torch.distributed.tensor"


def is_instance(value: Any, module: str, name: str) -> bool:
    """isinstance(value, module.name), False without importing `module` where nothing has."""
    loaded = sys.modules.get(module)
    return loaded is not None and isinstance(value, getattr(loaded, name))


def shard(model: MultitaskModel, device: torch.device) -> None:
    """Shard `model` (on `device`) in place over every process (its parameters become DTensors)."""
    if not isinstance(model.encoder, HFEncoder):
        raise TypeError(f"strategy=fsdp shards a pretrained transformer, not {type(model.encoder).__name__}")
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    # On `device`'s kind: FSDP would otherwise take a GPU's whenever there is one (device=cpu runs).
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    units = [
        layer  # the shared encoder's layers, and those of any transformer a head holds (Quick-Thoughts' g)
        for encoder in model.modules()
        if isinstance(encoder, HFEncoder)
        for layer in transformer_layers(encoder.backbone)
    ]
    encoder_parameters = {id(p) for p in model.encoder.parameters()}
    for head in model.heads.values():
        own = [p for p in head.parameters() if id(p) not in encoder_parameters]
        # A head holding the shared encoder (none does today) is left to the root.
        if own and len(own) == len(list(head.parameters())):
            units.append(head)
    for unit in units:
        fully_shard(unit, mesh=mesh)
    fully_shard(model, mesh=mesh)


def describe(model: nn.Module, processes: int) -> str:
    """One line of what sharding left each process to hold (rank 0's share)."""
    total = sum(p.numel() for p in model.parameters())
    own = sum(
        p.to_local().numel() if is_instance(p, TENSOR, "DTensor") else p.numel() for p in model.parameters()
    )
    return (
        f"strategy=fsdp: {len(_units(model))} units sharded over {processes} processes; "
        f"each holds about {own:,} of the {total:,} parameters, their gradients and optimizer state"
    )


def is_sharded(module: nn.Module) -> bool:
    return is_instance(module, FSDP, "FSDPModule")


class ShardedTaskNetwork(nn.Module):
    """One task's path through a sharded model, entered through the root, whose forward gathers
    what the layers' own units do not hold."""

    def __init__(self, model: MultitaskModel, task: str):
        super().__init__()
        self.model, self.task = model, task

    def forward(self, sentences: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        return self.model(self.task, sentences)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Gradients kept on each process (accumulate=: every micro-batch but the last), as DDP's."""
        units = _units(self.model)
        for unit in units:
            unit.set_requires_gradient_sync(False, recurse=False)
        try:
            yield
        finally:
            for unit in units:
                unit.set_requires_gradient_sync(True, recurse=False)


@contextlib.contextmanager
def gathered(model: nn.Module) -> Iterator[None]:
    """Within it, every process holds `model`'s whole parameters and its forward passes run
    without collectives (evaluation, whose ranks score different numbers of batches); nothing
    on an unsharded model."""
    units = _units(model)
    if not units:
        yield
        return
    for unit in units:
        unit.set_reshard_after_forward(False, recurse=False)
        unit.unshard()
    try:
        yield
    finally:
        for unit in units:
            unit.reshard()
            unit.set_reshard_after_forward(True, recurse=False)
        # FSDP orders backward's gathers by the forwards it saw: forget these, which differ by rank.
        if is_sharded(model):
            model.reset_iter_state()


def whole(tensor: Any) -> Any:
    """A DTensor's whole tensor (a collective: every process calls it, in the same order); any
    other value as it is."""
    return tensor.full_tensor() if is_instance(tensor, TENSOR, "DTensor") else tensor


def whole_state(module: nn.Module) -> dict[str, Any]:
    """`module.state_dict()` with whole tensors: what a one-process run saves (unsharded: its own)."""
    return {key: whole(value) for key, value in module.state_dict().items()}


def load_whole_state(module: nn.Module, saved: dict[str, Any]) -> None:
    """`module.load_state_dict` of whole tensors (`whole_state`'s), each process keeping its shards
    (unsharded: a plain load)."""
    current = module.state_dict()
    module.load_state_dict({key: _like(value, current.get(key)) for key, value in saved.items()})


def whole_optimizer_state(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """`optimizer.state_dict()` with whole tensors (Adam's moments of sharded parameters)."""
    saved = optimizer.state_dict()
    state = {
        index: {name: whole(value) for name, value in values.items()}
        for index, values in sorted(saved["state"].items())
    }
    return {**saved, "state": state}


def load_whole_optimizer_state(optimizer: torch.optim.Optimizer, saved: dict[str, Any]) -> None:
    """`optimizer.load_state_dict` of whole tensors, sharded as the parameters they belong to."""
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    state = {
        index: {name: _like(value, parameters[int(index)]) for name, value in values.items()}
        for index, values in saved["state"].items()
    }
    optimizer.load_state_dict({**saved, "state": state})


def _like(value: Any, like: Any) -> Any:
    """`value` sharded as `like` where `like` is a DTensor of its shape (each process slices its
    own copy: every one holds the whole value)."""
    if (
        not is_instance(like, TENSOR, "DTensor")
        or not isinstance(value, torch.Tensor)
        or value.shape != like.shape
    ):
        return value
    from torch.distributed.tensor import distribute_tensor

    return distribute_tensor(value.to(like.device), like.device_mesh, like.placements, src_data_rank=None)


def _units(model: nn.Module) -> list[Any]:
    return [module for module in model.modules() if is_sharded(module)]
