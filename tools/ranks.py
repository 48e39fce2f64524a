"""`just bench-ranks`: training throughput with 1, 2, ... processes under torchrun, side by side.

Each process count trains the same run (a preset, the same global batches) as its own
`torchrun --standalone` job with `threads` threads per process; runs alternate between
process counts `repeats` times so machine noise falls on all of them alike. Reported:
the median over steps of each task's examples per second (the global batch over the
step's wall time on rank 0, all-reduce included), after `warmup` steps of each task, and
the peak resident memory of the job's largest process (the kernel's count, imports and
data included). `strategies=ddp,fsdp` measures each process count under both (fsdp: an
encoder=hf preset; one process has nothing to shard, so it runs once).
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mtl import metrics
from mtl.config import AtLeast0, AtLeast1, apply_overrides, comma_list
from mtl.errors import UserError
from mtl.runs import RunFolder, read_json, read_metrics


@dataclass
class BenchRanksConfig:
    processes: str = "1,2"  # comma-separated process counts to compare
    strategies: str = "ddp"  # comma-separated: ddp, fsdp (strategy=, for an encoder=hf preset)
    hf_model: str | None = None  # an encoder=hf preset's model (a Hub id or a local folder)
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
    max_eval: AtLeast1 = 500  # dev and test examples per task (sample_test=true) for the final evaluation


# Runs the torchrun job and says the peak RSS of the largest process it waited for (Linux: KiB).
PEAK_MEMORY = (
    "import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
    "print(f'peak rss kib {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}', file=sys.stderr); "
    "sys.exit(done.returncode)"
)


@dataclass
class Measured:
    rates: dict[str, list[float]]  # task -> examples/s of each timed step
    peak_mib: list[float]  # of each run


def jobs(config: BenchRanksConfig) -> list[tuple[int, str]]:
    """(process count, strategy) pairs to time, in order; one process once, sharded or not."""
    counts = [int(n) for n in config.processes.split(",") if n.strip()]
    if not counts or min(counts) < 1:
        raise UserError(f"processes={config.processes!r}: give process counts such as 1,2")
    strategies = comma_list(config.strategies)
    if not strategies or set(strategies) - {"ddp", "fsdp"}:
        raise UserError(f"strategies={config.strategies!r}: give ddp, fsdp or both (ddp,fsdp)")
    # One process has nothing to shard over: it trains alike under either, so it runs once.
    return [(n, strategy) for n in counts for strategy in (strategies[:1] if n == 1 else strategies)]


def run(config: BenchRanksConfig) -> dict[tuple[int, str], Measured]:
    measured = {job: Measured({}, []) for job in jobs(config)}
    with tempfile.TemporaryDirectory(prefix="mtl-bench-ranks-") as scratch:
        for repeat in range(config.repeats):
            for (n, strategy), results in measured.items():
                out = Path(scratch) / f"{n}-{strategy}-{repeat}"
                results.peak_mib.append(_train(config, n, strategy, out))
                for task, values in _rates(out, config.warmup).items():
                    results.rates.setdefault(task, []).extend(values)
                print(f"{_label(n, strategy)}, run {repeat + 1}: {_line(results)}", flush=True)
    return measured


def _train(config: BenchRanksConfig, processes: int, strategy: str, out: Path) -> float:
    """Train one job; its largest process's peak memory in MiB."""
    command = [
        *(sys.executable, "-c", PEAK_MEMORY),
        *(sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}"),
        *("--log-dir", str(out.with_name(f"{out.name}-torchrun"))),  # in the scratch folder, not left in /tmp
        *("-m", "mtl", "train-multitask", f"preset={config.preset}", f"out={out}"),
        f"steps_nli={config.steps_nli}",
        f"steps_squad={config.steps_squad}",
        f"max_steps={config.max_steps}",
        f"eval_every={config.max_steps}",
        f"checkpoint_every={config.max_steps}",
        f"classifsquad={config.classifsquad}",
        f"max_squad_train={config.max_squad_train}",
        f"max_eval={config.max_eval}",
        "sample_test=true",  # the final test scored on max_eval= examples too, as before the key
        f"device={config.device}",
        f"strategy={strategy}",
        *([f"hf_model={config.hf_model}"] if config.hf_model else []),
        "wandb=disabled",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": str(config.threads), "MKL_NUM_THREADS": str(config.threads)}
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        raise UserError(f"the {_label(processes, strategy)} run failed (the end of its output is above)")
    return int(re.findall(r"peak rss kib (\d+)", done.stderr)[-1]) / 1024


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


def _label(processes: int, strategy: str) -> str:
    return "1 process" if processes == 1 else f"{processes} processes, {strategy}"


def _line(measured: Measured) -> str:
    rates = ", ".join(
        f"{task} {statistics.median(values):,.0f} examples/s (min {min(values):,.0f}, max {max(values):,.0f})"
        for task, values in measured.rates.items()
        if values
    )
    return f"{rates}; peak memory {statistics.median(measured.peak_mib):,.0f} MiB"


def report(measured: dict[tuple[int, str], Measured], threads: int) -> str:
    first = next(iter(measured.values()))
    lines = [
        f"examples/s per process count ({threads} thread(s) per process; median over steps), "
        "and the largest process's peak memory (median over runs):"
    ]
    for (n, strategy), results in measured.items():
        speedups = ", ".join(
            f"{task} {statistics.median(values) / statistics.median(first.rates[task]):.2f}x"
            for task, values in results.rates.items()
            if values and first.rates.get(task)
        )
        lines.append(f"  {_label(n, strategy)}: {_line(results)}; vs the first: {speedups}")
    return "\n".join(lines)


def command(args: Sequence[str]) -> None:
    """The command line's `key=value` arguments onto BenchRanksConfig; run; print what it gives."""
    config = apply_overrides(BenchRanksConfig(), args)
    print(report(run(config), config.threads))
