"""`just gpu-check`: every CUDA path and GPU benchmark in one go, into one results file, for the
session that is lent a GPU for a few minutes: run it at once, then copy the file's figures into
RESULTS.md.

In order, each a process of its own with its own time limit (a hung step costs its limit, not
the lot): the CUDA tests; `bench-train` at the paper's width (2048, fp32 and bf16), then where
that step's time goes (`profile=true`: GPU busy and idle, kernels, host waits); `bench-encode`
at 2048; the `schedule=mixed` step; GradCache against the plain mnrl step; `bench-hf` on MiniLM
(the shared copy, else the Hub). The file (`gpu-check-<time>.md`) names the device, torch, CUDA
and cuDNN, then each step's command, exit code, wall time and the last lines of its output, and is
rewritten after every step, so a session cut short keeps what finished. `quick=true` shrinks
every step (for a dry run on the CPU: `device=cpu quick=true`).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mtl.config import AtLeast1, apply_overrides
from mtl.console import say
from mtl.files import atomic
from mtl.files.paths import data_dir


@dataclass
class GpuCheckConfig:
    out: str = "."  # the folder the results file goes to
    device: str = "cuda"  # cuda; cpu: a dry run of the script itself (with quick=true)
    quick: bool = False  # every step shrunk: a dry run, not figures
    budget: AtLeast1 = 480  # seconds for all steps; each step's own limit is its share of it
    hf_model: str | None = None  # bench-hf's model; None: $MTL_DATA_DIR/models/all-MiniLM-L6-v2, else the Hub
    classifsquad: str = "data/classifsquad"  # the build the training benches read (a cut will do)


@dataclass(frozen=True)
class Step:
    name: str
    args: list[str]  # after `python -m`
    share: float  # of the budget


def steps(config: GpuCheckConfig) -> list[Step]:
    device = f"device={config.device}"
    width = "bilstm 512" if config.quick else "bilstm 2048"
    timed = ["steps=3", "warmup=1"] if config.quick else ["steps=5"]
    squad = f"classifsquad={config.classifsquad}"
    hf_model = config.hf_model or (
        str(data_dir() / "models" / "all-MiniLM-L6-v2")
        if data_dir() is not None and (data_dir() / "models" / "all-MiniLM-L6-v2").is_dir()
        else "sentence-transformers/all-MiniLM-L6-v2"
    )
    return [
        Step("CUDA tests", ["pytest", "-q", "-rs", "tests/test_cuda.py"], 0.15),
        Step(
            "training step", ["mtl", "bench-train", device, f"only={width}", *timed, "threads=0", squad], 0.2
        ),
        Step(
            "where the step's time goes",
            ["mtl", "bench-train", device, "profile=true", f"only={width}", *timed, "threads=0", squad],
            0.1,
        ),
        Step(
            "encode()",
            [
                "mtl",
                "bench-encode",
                device,
                f"hidden={512 if config.quick else 2048}",
                "runs=1" if config.quick else "runs=3",
                *(["limit=2000"] if config.quick else []),
            ],  # fmt: skip
            0.1,
        ),
        Step(
            "mixed step",
            [
                "mtl",
                "bench-train",
                device,
                "schedule=mixed",
                squad,
                *timed,
                "threads=0",
                *(["preset=cpu-small"] if config.quick else []),
            ],
            0.15,
        ),  # fmt: skip
        Step(
            "GradCache",
            [
                "mtl",
                "bench-train",
                device,
                "gradcache=mnrl",
                squad,
                *timed,
                "threads=0",
                *(["gradcache_batches=64"] if config.quick else []),
            ],
            0.15,
        ),  # fmt: skip
        Step("bench-hf", ["mtl", "bench-hf", device, f"hf_model={hf_model}", squad, *timed], 0.15),
    ]


def environment(device: str) -> list[str]:
    import torch

    lines = [f"- torch {torch.__version__}, Python {sys.version.split()[0]}"]
    if device == "cuda" and torch.cuda.is_available():
        lines.insert(0, f"- device: {torch.cuda.get_device_name()} ({torch.cuda.device_count()} visible)")
        lines.append(f"- CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}")
    else:
        lines.insert(0, f"- device: {device}" + (" (no CUDA device here)" if device == "cuda" else ""))
    return lines


def run(config: GpuCheckConfig) -> Path:
    out = atomic.check_output_dir(Path(config.out), "out") / f"gpu-check-{time.strftime('%Y%m%d-%H%M%S')}.md"
    header = [f"# gpu-check, {time.strftime('%Y-%m-%d %H:%M')}", "", *environment(config.device), ""]
    sections: list[str] = []
    started = time.perf_counter()
    chosen = steps(config)
    for step in chosen:
        limit = max(1, int(config.budget * step.share))
        command = [sys.executable, "-m", *step.args]
        say(f"gpu-check: {step.name} (at most {limit} s): {shlex.join(step.args)}")
        began = time.perf_counter()
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=limit,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            code, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as expired:
            code = "timed out"
            output = (expired.stdout or b"").decode(errors="replace") + (expired.stderr or b"").decode(
                errors="replace"
            )
        seconds = time.perf_counter() - began
        tail = "\n".join(line for line in output.splitlines() if "\r" not in line)[-4000:]  # no bar redraws
        sections += [f"## {step.name}", "", f"    {shlex.join(step.args)}", "",
                     f"exit {code}, {seconds:.0f} s", "", "```", tail, "```", ""]  # fmt: skip
        atomic.write_text(out, "\n".join(header + sections) + "\n", "gpu-check results")  # kept step by step
    say(f"gpu-check: {len(chosen)} steps in {time.perf_counter() - started:.0f} s; results in {out}")
    return out


def command(args: Sequence[str]) -> None:
    run(apply_overrides(GpuCheckConfig(), args))
