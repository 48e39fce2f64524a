"""`just bench-slurm`: what running through SLURM costs against running here, on the SLURM the shell
points at (`SLURM_CONF`; on this machine: `python3 tests/slurm_cluster.py start FOLDER`).

1. Start-up: seconds from the command to the run's first logged training step, `just
   train-multitask` here against `launcher=slurm`, the same run, alternating `runs` times.
2. A requeued run's lost work: a run checkpointing only every `checkpoint_every` steps is
   requeued (`scontrol requeue`) once it has trained `requeue_at` steps; the steps it logged
   before the requeue that it trained again after it, and the seconds from the requeue to its
   next training step, SLURM's hold on a requeued job (two minutes) lifted by `StartTime=now`.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mtl.config import AtLeast1, apply_overrides
from mtl.errors import UserError
from mtl.jobs.slurm import RUN_FILE


@dataclass
class BenchSlurmConfig:
    preset: str = "cpu-small"  # the run to time (experiments/<preset>.toml)
    keys: str = "tasks=nli nli.train_split=train_small max_steps=60 eval_every=100000 wandb=disabled"  # more train-multitask keys, space-separated
    partition: str = ""  # slurm.partition=
    runs: AtLeast1 = 3  # start-up timings per launcher, alternating
    requeue_at: AtLeast1 = 30  # the step after which the run is requeued
    checkpoint_every: AtLeast1 = 1000  # of the requeued run: no checkpoint but the one a requeue makes


def _train(out: Path, config: BenchSlurmConfig, slurm: bool, *extra: str) -> subprocess.Popen:
    launcher = ["launcher=slurm", *([f"slurm.partition={config.partition}"] if config.partition else [])]
    return subprocess.Popen(
        [sys.executable, "-m", "mtl", "train-multitask", f"preset={config.preset}", *config.keys.split(),
         f"out={out}", *extra, *(launcher if slurm else [])],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _rows(out: Path) -> list[dict]:
    """The log's whole lines (the last one may still be being written: it has no line feed yet)."""
    try:
        text = (out / "metrics.jsonl").read_text(encoding="utf-8")
    except OSError:
        return []
    return [json.loads(line) for line in text.split("\n")[:-1] if line]


def _steps(out: Path) -> list[int]:
    return [row["global_step"] for row in _rows(out) if any(key.endswith("/train/loss") for key in row)]


def _until(condition, process: subprocess.Popen, what: str, limit: float = 900) -> float:
    started = time.monotonic()
    while not condition():
        if process.poll() is not None and not condition():
            raise UserError(f"bench-slurm: the run ended before {what}: {process.stderr.read()[-300:]}")
        if time.monotonic() - started > limit:
            raise UserError(f"bench-slurm: no {what} within {limit:.0f} s")
        time.sleep(0.05)
    return time.monotonic()


def startup(root: Path, config: BenchSlurmConfig, slurm: bool, index: int) -> float:
    out = root / f"{'slurm' if slurm else 'local'}-{index}"
    started = time.monotonic()
    process = _train(out, config, slurm)
    first = _until(lambda: bool(_steps(out)), process, "its first step")
    process.communicate()
    return first - started


def requeued(root: Path, config: BenchSlurmConfig) -> tuple[int, float]:
    out = root / "requeued"
    process = _train(out, config, True, f"checkpoint_every={config.checkpoint_every}")
    _until(lambda: len(_steps(out)) >= config.requeue_at, process, f"step {config.requeue_at}")
    job = json.loads((out / RUN_FILE).read_text(encoding="utf-8"))["job_id"]
    subprocess.run(["scontrol", "requeue", job], check=True)
    asked = time.monotonic()
    while (
        subprocess.run(["squeue", "-h", "-o", "%T", "-j", job], capture_output=True, text=True).stdout.strip()
        != "PENDING"
    ):
        time.sleep(0.1)
    # The first attempt is gone: what it trained, and the last checkpoint it wrote.
    log_before = (out / "metrics.jsonl").read_text(encoding="utf-8")
    rows = _rows(out)
    trained = max(_steps(out))
    saved = max((r["global_step"] for r in rows if r.get("phase/event") == "checkpoint"), default=0)
    subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True)
    resumed = _until(
        lambda: (out / "metrics.jsonl").read_text(encoding="utf-8") != log_before and len(_steps(out)) > 0,
        process, "a step after the requeue",
    )  # fmt: skip
    process.communicate()
    if process.returncode != 0:
        raise UserError("bench-slurm: the requeued run failed")
    return trained - saved, resumed - asked


def run(config: BenchSlurmConfig) -> str:
    with tempfile.TemporaryDirectory(prefix="mtl-bench-slurm-") as folder:
        root = Path(folder)
        local, slurm = [], []
        for index in range(config.runs):
            local.append(startup(root, config, False, index))
            slurm.append(startup(root, config, True, index))
        lost, back = requeued(root, config)
    here, there = statistics.median(local), statistics.median(slurm)
    return "\n".join(
        [
            f"start-up to the first training step, median of {config.runs}: here {here:.1f} s, "
            f"launcher=slurm {there:.1f} s (+{there - here:.1f} s: submission, scheduling, the job's start)",
            f"  here: {', '.join(f'{s:.1f}' for s in local)} s; slurm: {', '.join(f'{s:.1f}' for s in slurm)} s",
            f"requeued at step {config.requeue_at}+ (checkpoint_every={config.checkpoint_every}): "
            f"{lost} steps trained again; {back:.1f} s from the requeue to training again "
            "(SLURM's two-minute hold on a requeued job lifted)",
        ]
    )


def command(args: Sequence[str]) -> None:
    print(run(apply_overrides(BenchSlurmConfig(), args)))
