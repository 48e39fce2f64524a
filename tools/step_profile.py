"""`just bench-train profile=true`: where a training step's time goes, read off the PyTorch profiler.

A GPU step that takes longer than its kernels is waiting on the host. For mtl's step (fp32,
bucketed batches, each setting `only=` names) and the one-call packed floor over the same
batches, this reports per step:

- wall: milliseconds to the end of the step's kernels, timed without the profiler (its own
  bookkeeping slows the host);
- GPU busy: the union of the step's kernel and copy intervals on the device, from a profiled
  pass over the same batches; wall minus busy is the time the GPU sat idle, waiting for the
  host to launch its next kernel or for a host read;
- kernels and copies on the device, and host waits: the runtime calls in which the host blocks
  until the GPU catches up (synchronizations; every read of a value back to the host ends in one);
- the host ops with the most self time, and the kernels with the most GPU time.

On a CPU there are no kernels: wall and the host ops only.
"""

from __future__ import annotations

import collections
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from mtl.config import apply_overrides
from mtl.train.config.train_config import TrainConfig
from mtl.train.data.training_data import TrainingData
from mtl.train.loop.trainer import Trainer
from mtl.train.run.setup import BUCKET_WINDOW
from tools.batches import task_batches
from tools.ops import packed_lstm_floor

TOP = 8  # host ops and kernels listed per contender


@dataclass
class Profiled:
    wall_ms: float  # median per step, no profiler
    busy_ms: float | None  # GPU busy per step (None on a CPU)
    kernels: float  # kernels and copies on the device per step
    waits: float  # host waits per step
    host_ops: list[tuple[str, float]] = field(default_factory=list)  # (op, self ms per step)
    gpu_kernels: list[tuple[str, float]] = field(default_factory=list)  # (kernel, ms per step)


@dataclass
class Row:
    setting: str
    task: str
    contenders: dict[str, Profiled]


def run(
    base: TrainConfig,
    data: TrainingData,
    settings: list[tuple[str, list[str]]],
    tasks: list[str],
    steps: int,
    warmup: int,
) -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for label, overrides in settings:
            config = apply_overrides(base, [*overrides, "precision=fp32"])
            trainer = Trainer(config, Path(scratch) / "run", data=data, progress=False)
            for task in [t for t in tasks if t in config.tasks]:
                rows.append(Row(label, task, profile_task(trainer, task, steps, warmup)))
    return rows


def profile_task(trainer: Trainer, task: str, steps: int, warmup: int) -> dict[str, Profiled]:
    """mtl's step and the packed floor over the same bucketed batches of `task`."""
    examples = trainer.run.data.examples[task]["train"]
    batches = task_batches(trainer, task, BUCKET_WINDOW, warmup + steps)
    encoder, device = trainer.run.model.encoder, trainer.run.device
    floor_lstm = nn.LSTM(
        encoder.input_size, encoder.hidden, num_layers=encoder.layers, bidirectional=True, batch_first=True
    ).to(device)

    def floor(rows: np.ndarray) -> None:
        columns = trainer.run.data.table.batch_columns(examples.sentences[rows], device)
        packed_lstm_floor(floor_lstm, encoder.embedding, columns)()

    contenders: dict[str, Callable[[np.ndarray], None]] = {
        "mtl fp32": lambda rows: trainer.train_step({task: rows}),
        "packed floor": floor,
    }
    return {name: profile_steps(step, batches, warmup, device) for name, step in contenders.items()}


def profile_steps(
    step: Callable[[np.ndarray], None], batches: list, warmup: int, device: torch.device
) -> Profiled:
    on_gpu = device.type == "cuda"
    finish = torch.cuda.synchronize if on_gpu else lambda: None
    for rows in batches[:warmup]:
        step(rows)
    timed = batches[warmup:]
    walls = []
    for rows in timed:
        finish()
        started = time.perf_counter()
        step(rows)
        finish()
        walls.append(1000 * (time.perf_counter() - started))
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if on_gpu else [])]
    with profile(activities=activities) as profiler:
        for rows in timed:
            step(rows)
        finish()
    return summarize(profiler, statistics.median(walls), len(timed), on_gpu)


def summarize(profiler: profile, wall_ms: float, steps: int, on_gpu: bool) -> Profiled:
    events = profiler.events()
    on_device = [e for e in events if e.device_type != torch.autograd.DeviceType.CPU]
    intervals = sorted((e.time_range.start, e.time_range.end) for e in on_device)
    waits = sum(1 for e in events if _waits(e.name))
    host_self: collections.Counter[str] = collections.Counter()
    kernel_time: collections.Counter[str] = collections.Counter()
    for average in profiler.key_averages():
        if average.self_cpu_time_total > 0 and average.key.startswith("aten::"):
            host_self[average.key] += average.self_cpu_time_total / 1000 / steps
    for event in on_device:
        kernel_time[event.name] += (event.time_range.end - event.time_range.start) / 1000 / steps
    return Profiled(
        wall_ms=wall_ms,
        busy_ms=union_us(intervals) / 1000 / steps if on_gpu else None,
        kernels=len(on_device) / steps,
        waits=waits / steps,
        host_ops=host_self.most_common(TOP),
        gpu_kernels=kernel_time.most_common(TOP),
    )


def _waits(name: str) -> bool:
    """A CUDA runtime call the host blocks in: a synchronization (`.item()` copies, then waits for
    the stream), or a plain synchronous copy."""
    return name.startswith("cuda") and ("Synchronize" in name or name == "cudaMemcpy")


def union_us(intervals: list[tuple[float, float]]) -> float:
    """The time covered by sorted (start, end) intervals, overlaps counted once."""
    covered, reach = 0.0, float("-inf")
    for start, end in intervals:
        if end <= reach:
            continue
        covered += end - max(start, reach)
        reach = end
    return covered


def report(rows: list[Row], where: str) -> str:
    lines = [
        f"{where}; fp32, bucketed batches; per step (median wall over the timed steps, the rest from one profiled pass)"
    ]
    for row in rows:
        for name, p in row.contenders.items():
            busy = (
                f"GPU busy {p.busy_ms:.1f} ms ({p.busy_ms / p.wall_ms:.0%}), idle {p.wall_ms - p.busy_ms:.1f} ms"
                if p.busy_ms is not None
                else "no GPU"
            )
            lines.append(
                f"{row.setting} {row.task} {name}: wall {p.wall_ms:.1f} ms, {busy}, "
                f"{p.kernels:.0f} kernels and copies, {p.waits:.1f} host waits"
            )
            lines.append(
                "    host self ms: "
                + ", ".join(f"{op.removeprefix('aten::')} {ms:.2f}" for op, ms in p.host_ops)
            )
            if p.gpu_kernels:
                lines.append(
                    "    GPU ms: " + ", ".join(f"{name[:60]} {ms:.2f}" for name, ms in p.gpu_kernels)
                )
    return "\n".join(lines)
