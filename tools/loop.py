"""`just bench-loop`: a whole training run's examples/s next to its steps timed alone.

A step benchmark (`just bench-train`) times steps and nothing else; a user's run also draws
batches, builds each step's record, writes `metrics.jsonl`, logs W&B history, moves the bar
and keeps the phases table. This bench trains a real run (`Trainer.fit`, W&B as a user
without an API key gets it: offline, in a scratch folder) of two NLI blocks of `steps`
steps, the first a warm-up, and reads the second block's examples/s from the run's phases
table (evaluation and its checkpoint fall between the blocks, outside either). Then a
fresh trainer of the same configuration steps alone (`Trainer.train_step`, no run log,
no bar, no W&B) over the very same batches, each step timed to the end of its kernels.
The two alternate `runs` times; medians are reported, and the loop's share of the time:
what the whole run pays per step beyond the step itself, and what a checkpoint costs at
this size (written three times by the stepping trainer; the measured block holds one only
when `checkpoint_every` falls inside it).
"""

from __future__ import annotations

import contextlib
import io
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from mtl.config import apply_overrides
from mtl.runtime.device import resolve_device
from mtl.train.config.inputs import resolve_inputs
from mtl.train.config.train_config import TrainConfig, with_overrides
from mtl.train.data.training_data import prepare
from mtl.train.loop.trainer import Trainer

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from tools.configs import BenchLoopConfig as BenchLoopConfig
from tools.train import with_300d_inputs


def run(bench: BenchLoopConfig) -> dict:
    if bench.threads and not torch.cuda.is_available():
        torch.set_num_threads(bench.threads)
    device = resolve_device(bench.device)
    config = with_overrides(
        TrainConfig(),
        [
            "tasks=nli",
            f"nli.train_split={bench.nli_train_split}",
            f"nli.steps={bench.steps}",
            f"nli.batch={bench.batch}",
            f"max_steps={2 * bench.steps}",
            f"encoder={bench.encoder}",
            f"hidden={bench.hidden}",
            "optim=sgd",
            "precision=fp32",
            "max_eval=256",  # the evaluation between the blocks is not timed: keep it short
            "sample_test=true",  # and the final test's
            f"wandb={bench.wandb}",
            *([f"wandb_every={bench.wandb_every}"] if bench.wandb_every else []),
            *([f"checkpoint_every={bench.checkpoint_every}"] if bench.checkpoint_every else []),
            f"prefetch={bench.prefetch}",
            f"device={bench.device}",
            *([f"vectors={bench.vectors}"] if bench.vectors else []),
            *([f"nli.source={bench.snli}"] if bench.snli else []),
        ],
    )
    config = resolve_inputs(config)
    data = prepare(config, progress=False)
    inputs = with_300d_inputs(data)
    loop_rates, step_rates, overheads, saves = [], [], [], []
    with tempfile.TemporaryDirectory() as scratch:
        for attempt in range(bench.runs):
            block = whole_run(config, data, Path(scratch) / f"run-{attempt}")
            steps = steps_alone(config, data, Path(scratch) / f"steps-{attempt}", bench.steps, device)
            loop_rates.append(block["examples"] / block["seconds"])
            step_rates.append(steps["examples"] / steps["seconds"])
            overheads.append(1000 * (block["seconds"] - steps["seconds"]) / bench.steps)
            saves.append(steps["save_seconds"])
            print(
                f"run {attempt + 1}: whole run {loop_rates[-1]:,.0f} examples/s, steps alone "
                f"{step_rates[-1]:,.0f} examples/s",
                flush=True,
            )
    return {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "threads": torch.get_num_threads(),
        "inputs": inputs,
        "setting": f"{bench.encoder} {bench.hidden}",
        "steps": bench.steps,
        "batch": bench.batch,
        "wandb": bench.wandb,
        "wandb_every": block["wandb_every"],  # as the run resolved it
        "checkpoint_every": block["checkpoint_every"],
        "prefetch": bench.prefetch,
        "loop_examples_per_s": statistics.median(loop_rates),
        "step_examples_per_s": statistics.median(step_rates),
        "overhead_ms_per_step": statistics.median(overheads),
        "step_ms": 1000 * bench.batch / statistics.median(step_rates),
        "checkpoint_seconds": statistics.median(saves),
        "checkpoint_mb": steps["save_bytes"] / 2**20,
    }


def whole_run(config: TrainConfig, data, folder: Path) -> dict:
    """The measured (second) block of a real run: its examples and seconds, from the phases table."""
    # The run's lines and bar are written (their cost counts), to a buffer, not over this report.
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        trainer = Trainer(config, folder, data=data, progress=True)
        trainer.fit()
    measured, settings = trainer.run.state.phases.rows[1], trainer.run.config.run
    return {
        "examples": measured["examples"],
        "seconds": measured["seconds"],
        "wandb_every": settings.wandb_every,
        "checkpoint_every": settings.checkpoint_every,
    }


def steps_alone(config: TrainConfig, data, folder: Path, steps: int, device: torch.device) -> dict:
    """The same block's batches, stepped by a fresh trainer with nothing around the steps."""
    trainer = Trainer(config, folder, data=data, progress=False)
    task = config.main_task  # the first block's task: the batches the whole run began with
    stream = trainer.run.setup.streams[task]
    for _ in range(steps):  # the warm-up block's batches, stepped too (as in the run)
        trainer.train_step({task: stream.next()[0]})
    finish = torch.cuda.synchronize if device.type == "cuda" else lambda: None
    examples, seconds = 0, 0.0
    for _ in range(steps):
        rows = stream.next()[0]
        finish()
        started = time.perf_counter()
        trainer.train_step({task: rows})
        finish()
        seconds += time.perf_counter() - started
        examples += len(rows)
    trainer.prefetcher.close()
    saves = []
    for _ in range(3):  # what a checkpoint inside a block costs (the measured block may hold none)
        started = time.perf_counter()
        trainer.evaluation.save_latest()
        saves.append(time.perf_counter() - started)
    size = (folder / "checkpoints" / "latest.pt").stat().st_size
    return {
        "examples": examples,
        "seconds": seconds,
        "save_seconds": statistics.median(saves),
        "save_bytes": size,
    }


def report(results: dict) -> str:
    loop, alone = results["loop_examples_per_s"], results["step_examples_per_s"]
    return "\n".join(
        [
            f"bench-loop: {results['setting']}, NLI batches of {results['batch']}, {results['inputs']}; "
            f"{results['device']}, {results['threads']} thread(s); W&B {results['wandb']} (a row per "
            f"{results['wandb_every']} steps), a checkpoint per {results['checkpoint_every']} steps, prefetch "
            f"{results['prefetch']}; a block of {results['steps']} steps after one of warm-up; median of the runs",
            "",
            "| | examples/s |",
            "|---|---:|",
            f"| whole run (`Trainer.fit`: run log, W&B, bar, phases) | {loop:,.0f} |",
            f"| the same batches, steps alone | {alone:,.0f} |",
            "",
            f"The whole run trains at {loop / alone:.1%} of the steps' rate: "
            f"{results['overhead_ms_per_step']:.2f} ms per step around a {results['step_ms']:.2f} ms step.",
            f"A checkpoint ({results['checkpoint_mb']:,.0f} MB) takes {results['checkpoint_seconds']:.2f} s to "
            f"write: {1000 * results['checkpoint_seconds'] / results['checkpoint_every']:.2f} ms per step at one "
            f"per {results['checkpoint_every']} steps.",
        ]
    )


def command(args: Sequence[str]) -> None:
    """The command line's `key=value` arguments onto BenchLoopConfig; run; print what it gives."""
    print(report(run(apply_overrides(BenchLoopConfig(), args))))
