"""`just bench-ranks`: training throughput with 1, 2, ... processes under torchrun, side by side.

Each process count trains the same run (a preset, the same global batches) as its own
`torchrun --standalone` job with `threads` threads per process; runs alternate between
process counts `repeats` times so machine noise falls on all of them alike. Reported:
the median over steps of each task's examples per second (the global batch over the
step's wall time on rank 0, all-reduce included), after `warmup` steps of each task.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mtl import metrics
from mtl.config import AtLeast0, AtLeast1, apply_overrides
from mtl.errors import UserError
from mtl.runs import RunFolder, read_json, read_metrics


@dataclass
class BenchRanksConfig:
    processes: str = "1,2"  # comma-separated process counts to compare
    threads: AtLeast1 = 1  # torch threads per process
    preset: str = "cpu-small"  # the run to time (experiments/<preset>.toml)
    steps_nli: AtLeast1 = 20  # NLI steps per block
    steps_squad: AtLeast1 = 10  # ClassifSQuAD steps per block
    max_steps: AtLeast1 = 60  # steps per run
    warmup: AtLeast0 = 5  # untimed first steps of each task
    repeats: AtLeast1 = 2  # runs per process count, alternating
    device: str = "cpu"  # cpu (gloo) or cuda (one GPU per process, NCCL)
    classifsquad: str = "data/classifsquad"  # a ClassifSQuAD build (just build-classifsquad)
    max_squad_train: AtLeast1 = 50000  # training triples loaded (less tokenizing before the timed part)
    max_eval: AtLeast1 = 500  # dev/test examples per task for the final evaluation


def run(config: BenchRanksConfig) -> dict[int, dict[str, list[float]]]:
    counts = [int(n) for n in config.processes.split(",") if n.strip()]
    if not counts or min(counts) < 1:
        raise UserError(f"processes={config.processes!r}: give process counts such as 1,2")
    rates: dict[int, dict[str, list[float]]] = {n: {} for n in counts}
    with tempfile.TemporaryDirectory(prefix="mtl-bench-ranks-") as scratch:
        for repeat in range(config.repeats):
            for n in counts:
                out = Path(scratch) / f"{n}-{repeat}"
                _train(config, n, out)
                for task, values in _rates(out, config.warmup).items():
                    rates[n].setdefault(task, []).extend(values)
                print(f"{n} process(es), run {repeat + 1}: {_line(rates[n])}", flush=True)
    return rates


def _train(config: BenchRanksConfig, processes: int, out: Path) -> None:
    command = [
        *(sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}"),
        *("-m", "mtl", "train-multitask", f"preset={config.preset}", f"out={out}"),
        f"steps_nli={config.steps_nli}",
        f"steps_squad={config.steps_squad}",
        f"max_steps={config.max_steps}",
        f"eval_every={config.max_steps}",
        f"checkpoint_every={config.max_steps}",
        f"classifsquad={config.classifsquad}",
        f"max_squad_train={config.max_squad_train}",
        f"max_eval={config.max_eval}",
        f"device={config.device}",
        "wandb=disabled",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": str(config.threads), "MKL_NUM_THREADS": str(config.threads)}
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        raise UserError(f"the {processes}-process run failed (the end of its output is above)")


def _rates(run_dir: Path, warmup: int) -> dict[str, list[float]]:
    records = read_metrics(RunFolder(run_dir).metrics)
    tasks = read_json(RunFolder(run_dir).record)["config"]["tasks"]
    rates: dict[str, list[float]] = {}
    for task in tasks:
        values = [
            r[metrics.of_task(task, "examples_per_s")]
            for r in records
            if metrics.of_task(task, "examples_per_s") in r
        ]
        rates[task] = values[warmup:]
    return rates


def _line(rates: dict[str, list[float]]) -> str:
    return ", ".join(
        f"{task} {statistics.median(values):,.0f} examples/s (min {min(values):,.0f}, max {max(values):,.0f})"
        for task, values in rates.items()
        if values
    )


def report(rates: dict[int, dict[str, list[float]]], threads: int) -> str:
    one = min(rates)
    lines = [f"examples/s per process count ({threads} thread(s) per process; median over steps):"]
    for n, by_task in rates.items():
        speedups = ", ".join(
            f"{task} {statistics.median(values) / statistics.median(rates[one][task]):.2f}x"
            for task, values in by_task.items()
            if values and rates[one].get(task)
        )
        lines.append(f"  {n} process(es): {_line(by_task)}; vs {one}: {speedups}")
    return "\n".join(lines)


def command(args: Sequence[str]) -> None:
    """The command line's `key=value` arguments onto BenchRanksConfig; run; print what it gives."""
    config = apply_overrides(BenchRanksConfig(), args)
    print(report(run(config), config.threads))
