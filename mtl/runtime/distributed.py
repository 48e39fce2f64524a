"""Training over several processes started by `torchrun` (one per GPU, or per CPU share).

`torchrun` sets RANK, WORLD_SIZE and LOCAL_RANK; without them everything here is a single
process and every call is local. Rank 0 is the main process: it alone writes the run
folder, checkpoints and W&B. Collectives use NCCL for CUDA tensors and gloo for CPU ones.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import TypeVar

import numpy as np
import torch
import torch.distributed as dist

from mtl.errors import UserError
from mtl.runtime.device import resolve_device

T = TypeVar("T")
TIMEOUT = datetime.timedelta(minutes=30)  # a ClassifSQuAD build on rank 0 can keep the others waiting


def processes_per_node() -> int:
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1"))


def gpu_per_process() -> bool:
    """Whether each process of this machine has a GPU of its own (the same answer on every rank)."""
    return torch.cuda.is_available() and processes_per_node() <= torch.cuda.device_count()


class Distributed:
    def __init__(self, rank: int = 0, world_size: int = 1, local_rank: int = 0):
        self.rank, self.world_size, self.local_rank = rank, world_size, local_rank

    @classmethod
    def from_environment(cls) -> Distributed:
        """The process group `torchrun` described, joined once; a single process without it."""
        world_size = int(os.environ.get("WORLD_SIZE", "1"))
        if world_size == 1:
            return cls()
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if not dist.is_initialized():
            # gloo for CPU tensors (also on GPU machines: counts, objects, device=cpu runs),
            # NCCL for CUDA ones.
            backend = "gloo"
            if gpu_per_process():
                torch.cuda.set_device(local_rank)
                backend = "cpu:gloo,cuda:nccl"
            dist.init_process_group(backend, timeout=TIMEOUT)
        return cls(dist.get_rank(), dist.get_world_size(), local_rank)

    @property
    def active(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def device(self, name: str) -> torch.device:
        """The config's device; `auto` or `cuda` is this process's own GPU under torchrun."""
        if self.active and name == "auto" and torch.cuda.is_available() and not gpu_per_process():
            if self.is_main:
                warnings.warn(
                    f"{processes_per_node()} processes per node but {torch.cuda.device_count()} GPU(s): "
                    "training on the CPU (device=auto); start one process per GPU to train on them",
                    stacklevel=2,
                )
            name = "cpu"
        device = resolve_device(name)
        if self.active and device.type == "cuda" and device.index is None:
            if not gpu_per_process():
                raise UserError(
                    f"device={name} with {processes_per_node()} processes on a machine with "
                    f"{torch.cuda.device_count()} GPU(s): start at most that many (--nproc-per-node), "
                    "or train on the CPU with device=cpu"
                )
            return torch.device("cuda", self.local_rank)
        return device

    def part(self, count: int) -> np.ndarray:
        """This rank's share of `count` items: contiguous, sizes differing by at most one."""
        return np.array_split(np.arange(count), self.world_size)[self.rank]

    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sums of `values` over ranks (float64 on the CPU, so counts stay exact)."""
        if not self.active:
            return list(values)
        tensor = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(tensor)
        return tensor.tolist()

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` summed over ranks, in place (NCCL for a CUDA tensor, gloo for a CPU one)."""
        if self.active:
            dist.all_reduce(tensor)
        return tensor

    def any(self, flag: bool) -> bool:
        """Whether `flag` is set on any rank: every rank gets the same answer, so all act alike."""
        return self.sum([float(flag)])[0] > 0 if self.active else flag

    def broadcast(self, value: T) -> T:
        """Rank 0's `value` on every rank (any picklable object)."""
        if not self.active:
            return value
        holder = [value if self.is_main else None]
        dist.broadcast_object_list(holder, src=0)
        return holder[0]

    def gather_objects(self, value: T) -> list[T]:
        """Every rank's `value` (any picklable object), in rank order, on every rank."""
        if not self.active:
            return [value]
        every: list = [None] * self.world_size
        dist.all_gather_object(every, value)
        return every

    def main_first(self, work: Callable[[], T], others_too: bool = True) -> T:
        """Run `work` on rank 0, then (with `others_too`) on the other ranks; rank 0's result otherwise.

        A failure on rank 0 stops every rank with its message instead of leaving them
        waiting at the next collective.
        """
        if not self.active:
            return work()
        result, failure = None, None
        if self.is_main:
            try:
                result = work()
            except BaseException as error:
                failure = error
        message = self.broadcast(None if failure is None else f"{failure}")
        if failure is not None:
            raise failure
        if message is not None:
            raise RankZeroStopped(f"rank 0 stopped: {message}")
        if not others_too:
            return self.broadcast(result)
        return result if self.is_main else work()

    def barrier(self) -> None:
        if self.active:
            dist.barrier()


PEER_LOST = (
    "Connection reset by peer",
    "Connection closed by peer",
    "Broken pipe",
    "NCCL communicator was aborted",
)


def lost_a_peer(error: BaseException) -> bool:
    """Whether `error` is a collective failing because another process of the job died.

    gloo raises a plain RuntimeError naming the socket error; NCCL a DistBackendError.
    """
    if os.environ.get("WORLD_SIZE", "1") == "1" or not isinstance(error, RuntimeError):
        return False
    return isinstance(error, dist.DistError) or any(text in str(error) for text in PEER_LOST)


class RankZeroStopped(UserError):
    """Rank 0's own error, which rank 0 prints: the other ranks stop without saying it again."""

    quiet = True


_local_only = threading.local()


@contextlib.contextmanager
def local_batches() -> Iterator[None]:
    """Within it, `gather_batch` gathers nothing: a rank scores a whole batch of its own (the
    affinity measurement, which every rank computes alike, on the same held batches)."""
    _local_only.on = True
    try:
        yield
    finally:
        _local_only.on = False


_step_forward = threading.local()


@contextlib.contextmanager
def scoring_as_the_step() -> Iterator[None]:
    """Within it, `gather_batch` gathers the ranks' rows even without gradients: a forward that
    must score a training batch as its step did (the losses FAMO measures after the update)."""
    _step_forward.on = True
    try:
        yield
    finally:
        _step_forward.on = False


_padding = threading.local()


@contextlib.contextmanager
def rows_are_padding(on: bool) -> Iterator[None]:
    """Within it (when `on`), this rank's rows are a weight-0 stand-in (a rank left without rows of
    a short batch still steps, as DDP needs): `gather_batch` gives the other ranks none of them, so
    the stand-in is no one's candidate and the loss stays the whole batch's."""
    _padding.on = on
    try:
        yield
    finally:
        _padding.on = False


def gather_batch(local: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Every rank's rows of `local` (the ranks' shares of one batch, in rank order), and where
    this rank's rows start among them; gradients flow back to the rank each row came from.

    What in-batch objectives (Quick-Thoughts, ranking) score each example against: with it
    the candidates, so the loss, are those of the whole batch at any number of processes.
    In one process, and outside training (evaluation gives each rank whole batches of its
    own, so no rank waits on another's), it is `local` itself.
    """
    training = torch.is_grad_enabled() or getattr(_step_forward, "on", False)
    if getattr(_local_only, "on", False) or not training:
        return local, 0
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return local, 0
    import torch.distributed.nn.functional as differentiable  # its autograd ops, only for a gather

    padding = getattr(_padding, "on", False)
    sizes = torch.tensor([0 if padding else len(local)], device=local.device)
    every_size = [torch.zeros_like(sizes) for _ in range(dist.get_world_size())]
    dist.all_gather(every_size, sizes)
    counts = [int(size) for size in every_size]
    # all_gather needs equal shapes; shares differ by one at most
    padded = _pad_rows(local[: counts[dist.get_rank()]], max(counts))
    parts = differentiable.all_gather(padded)
    gathered = torch.cat([part[:count] for part, count in zip(parts, counts, strict=True)])
    offset = sum(counts[: dist.get_rank()])
    if padding:  # the stand-in's labels must index a candidate; its loss weighs 0
        offset = max(0, min(offset, len(gathered) - len(local)))
    return gathered, offset


def _pad_rows(tensor: torch.Tensor, rows: int) -> torch.Tensor:
    if len(tensor) == rows:
        return tensor
    return torch.cat([tensor, tensor.new_zeros(rows - len(tensor), *tensor.shape[1:])])
