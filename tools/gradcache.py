"""`just bench-train gradcache=mnrl` (or qt): GradCache's memory and time per step next to the
plain step, over batch sizes.

The task alone on the objectives' BiGRU-max (bench/objectives.py), the same batches for both
contenders (each step's peak measured alone, the median reported): `plain`, the whole batch in one forward and backward; `cached`, `<task>.mini_batch=`
examples at a time (mtl/train/step/grad_cache.py). Peak memory is the GPU's peak allocation on CUDA;
on the CPU, the peak resident set of the process during the timed steps above its size before
them (Linux: freed memory handed back with glibc's malloc_trim, then the peak reset through
/proc/self/clear_refs).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import statistics
import tempfile
import time
from pathlib import Path

import torch

from mtl.runtime.device import resolve_device
from mtl.train.data.training_data import prepare
from mtl.train.loop.trainer import Trainer
from tools.objectives import objective_config


def run(bench) -> list[dict]:
    """`bench`: the BenchTrainConfig (gradcache, gradcache_batches, mini_batch, steps, warmup, ...)."""
    task, device = bench.gradcache, resolve_device(bench.device)
    data = prepare(objective_config(bench, task), progress=False)  # the same data for every contender
    rows = []
    for batch in [int(b) for b in bench.gradcache_batches.split(",")]:
        # The plain step goes through the batches once untimed first: the first step of each new
        # shape pays one-time costs (on CUDA, loading kernels, planning matrix products).
        for contender, mini_batch in (("untimed", None), ("plain", None), ("cached", bench.mini_batch)):
            if mini_batch is not None and mini_batch >= batch:
                continue
            keys = [f"{task}.batch={batch}", *([f"{task}.mini_batch={mini_batch}"] if mini_batch else [])]
            config = objective_config(bench, task, *keys)
            with tempfile.TemporaryDirectory() as scratch:
                trainer = Trainer(config, Path(scratch) / "run", data=data, progress=False)
                row = measured(trainer, task, bench.warmup, bench.steps, device)
            del trainer
            gc.collect()
            if contender == "untimed":
                continue
            row.update(batch=batch, contender=contender, mini_batch=mini_batch)
            print(format_row(row), flush=True)
            rows.append(row)
    return rows


def measured(trainer: Trainer, task: str, warmup: int, steps: int, device: torch.device) -> dict:
    stream = trainer.run.setup.streams[task]
    batches = [stream.next()[0] for _ in range(warmup + steps)]
    for rows in batches[:warmup]:
        trainer.train_step({task: rows})
    finish = torch.cuda.synchronize if device.type == "cuda" else lambda: None
    times, peaks = [], []
    for rows in batches[warmup:]:
        finish()
        before = start_peak(device)
        started = time.perf_counter()
        trainer.train_step({task: rows})
        finish()
        times.append(time.perf_counter() - started)
        peaks.append(peak_since(before, device))
    return {"ms": 1000 * statistics.median(times), "peak_mb": statistics.median(peaks)}


def start_peak(device: torch.device) -> float:
    """Reset the peak; the memory in use now (MB)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return torch.cuda.memory_allocated(device) / 2**20
    gc.collect()
    # Memory the warm-up steps freed stays resident in malloc's arenas, and a step reusing it
    # would not raise the peak: hand it back to the system first (glibc), then reset the peak.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current resident size
    return _status_mb("VmRSS")


def peak_since(before: float, device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20 - before
    return _status_mb("VmHWM") - before


def _status_mb(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"/proc/self/status has no {key}: peak memory is measured on Linux")


def format_row(row: dict) -> str:
    how = f"mini_batch {row['mini_batch']}" if row["mini_batch"] else "whole batch"
    return (
        f"batch {row['batch']:>5}  {row['contender']:<6} ({how}): {row['ms']:8.0f} ms/step, "
        f"peak {row['peak_mb']:8.1f} MB above the step's start"
    )


def report(rows: list[dict], task: str) -> str:
    lines = [f"GradCache on {task}: median ms per step and peak memory, plain against cached"]
    lines += [format_row(row) for row in rows]
    by = {(r["batch"], r["contender"]): r for r in rows}
    for (batch, contender), row in by.items():
        plain = by.get((batch, "plain"))
        if contender == "cached" and plain:
            lines.append(
                f"batch {batch}: cached takes {row['peak_mb'] / max(plain['peak_mb'], 1e-9):.2f}x the plain "
                f"step's peak memory and {row['ms'] / plain['ms']:.2f}x its time"
            )
    return "\n".join(lines)
