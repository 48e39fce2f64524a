"""`just bench-slurm`: what running through SLURM costs against running here, on the SLURM the shell
points at (`SLURM_CONF`; on this machine: `python3 tests/slurm_cluster.py start FOLDER`).

1. Start-up: seconds from the command to the run's first logged training step, `just
   train-multitask` here against `launcher=slurm`, the same run, alternating `runs` times; with
   `nodes=2`, also the run over two nodes (`slurm.nodes=2 slurm.tasks_per_node=1`).
2. A requeued run's lost work: a run checkpointing only every `checkpoint_every` steps is
   requeued (`scontrol requeue`) once it has trained `requeue_at` steps; the steps it logged
   before the requeue that it trained again after it, and the seconds from the requeue to its
   next training step, SLURM's hold on a requeued job (two minutes) lifted by `StartTime=now`.
3. With `preempt=<partition>`, a preempted run's lost work: a job of that partition (a higher
   priority) takes the node of a run checkpointing every `preempt_checkpoint_every` steps, once it
   has trained `preempt_at`; whether the run checkpointed within the partition's grace, the steps
   it trained again, and the seconds from the preempting job's submission to the run resumed. Give
   `preempt_keys` a model whose step and checkpoint outlast the grace to see SIGKILL's cost.
"""

from __future__ import annotations

import json
import re
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
from mtl.jobs.slurm import RUN_FILE, job_fields


@dataclass
class BenchSlurmConfig:
    preset: str = "cpu-small"  # the run to time (experiments/<preset>.toml)
    keys: str = "tasks=nli nli.train_split=train_small max_steps=60 eval_every=100000 wandb=disabled"  # more train-multitask keys, space-separated
    partition: str = ""  # slurm.partition=
    runs: AtLeast1 = 3  # start-up timings per launcher, alternating
    requeue_at: AtLeast1 = 30  # the step after which the run is requeued
    checkpoint_every: AtLeast1 = 1000  # of the requeued run: no checkpoint but the one a requeue makes
    nodes: AtLeast1 = 1  # 2: also time the run over two nodes (slurm.nodes=2, a process each); 1: not
    preempt: str = (
        ""  # a partition whose jobs preempt the run's (the test SLURM's: urgent); empty: not measured
    )
    preempt_keys: str = ""  # more train-multitask keys for the preempted run alone (hidden=4096: a slow step)
    preempt_at: AtLeast1 = 3  # the step after which the preempting job is submitted
    preempt_checkpoint_every: AtLeast1 = 2  # of the preempted run: the checkpoint a SIGKILL falls back to


def _train(out: Path, config: BenchSlurmConfig, slurm: bool, *extra: str) -> subprocess.Popen:
    """The run in `out`, here or through SLURM; a key of `extra` replaces the same key of `keys=`."""
    launcher = ["launcher=slurm", *([f"slurm.partition={config.partition}"] if config.partition else [])]
    keys = {key.partition("=")[0]: key for key in [*config.keys.split(), *extra]}
    return subprocess.Popen(
        [sys.executable, "-m", "mtl", "train-multitask", f"preset={config.preset}", *keys.values(),
         f"out={out}", *(launcher if slurm else [])],
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


def startup(root: Path, config: BenchSlurmConfig, slurm: bool, index: int, nodes: int = 1) -> float:
    out = root / f"{'slurm' if slurm else 'local'}-{nodes}-{index}"
    started = time.monotonic()
    spread = [f"slurm.nodes={nodes}", "slurm.tasks_per_node=1"] if nodes > 1 else []
    process = _train(out, config, slurm, *spread)
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


@dataclass(frozen=True)
class Preempted:
    trained: int  # the last step the run logged before SLURM stopped it
    saved: int  # the checkpoint it resumed from
    in_grace: bool  # whether the run's own checkpoint, after its step, was written in time
    back_s: float  # from the preempting job's submission to the run resumed (its checkpoint loaded)


def preempted(root: Path, config: BenchSlurmConfig) -> Preempted:
    out = root / "preempted"
    keys = [f"checkpoint_every={config.preempt_checkpoint_every}", *config.preempt_keys.split()]
    process = _train(out, config, True, *keys)
    _until(lambda: len(_steps(out)) >= config.preempt_at, process, f"step {config.preempt_at}")
    record = json.loads((out / RUN_FILE).read_text(encoding="utf-8"))
    job = record["job_id"]
    asked = time.monotonic()
    subprocess.run(  # the whole node, now: SLURM must stop the run's job to start it
        ["sbatch", "--parsable", f"--partition={config.preempt}", "--exclusive",
         f"--nodelist={job_fields(job)['NodeList']}", "--output=/dev/null", "--wrap", "true"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    # Until the job's next attempt resumes the run (and cuts its log to the checkpoint): the steps
    # the stopped attempt logged, SLURM's hold on a requeued job lifted where there is one.
    trained, lifted = max(_steps(out)), False
    while (saved := _resumed_at(Path(record["stdout"]))) is None:
        if process.poll() is not None:
            raise UserError(
                f"bench-slurm: the preempted run ended instead of resuming: {process.stderr.read()[-300:]}"
            )
        trained = max([trained, *_steps(out)])
        if not lifted and job_fields(job).get("JobState") == "PENDING":
            lifted = (
                subprocess.run(
                    ["scontrol", "update", f"JobId={job}", "StartTime=now+2"], check=False
                ).returncode
                == 0
            )
        time.sleep(0.1)
    back = time.monotonic()
    # the run's one line once its own checkpoint is written (none where SIGKILL came first)
    in_grace = f"stopped at step {trained}:" in Path(record["stderr"]).read_text(encoding="utf-8")
    subprocess.run(["scancel", job], check=True)  # measured: the rest of the run is not
    process.communicate()
    return Preempted(trained, saved, in_grace, back - asked)


def _resumed_at(log: Path) -> int | None:
    """The step the job's latest attempt resumed the run at, from its log; None before a resume."""
    try:
        found = re.findall(r"^resuming \S+ at step (\d+)$", log.read_text(encoding="utf-8"), re.M)
    except OSError:
        return None
    return int(found[-1]) if found else None


def run(config: BenchSlurmConfig) -> str:
    spreads = [1, config.nodes] if config.nodes > 1 else [1]
    with tempfile.TemporaryDirectory(prefix="mtl-bench-slurm-") as folder:
        root = Path(folder)
        local, slurm = [], {nodes: [] for nodes in spreads}
        for index in range(config.runs):
            local.append(startup(root, config, False, index))
            for nodes in spreads:
                slurm[nodes].append(startup(root, config, True, index, nodes))
        lost, back = requeued(root, config)
        stopped = preempted(root, config) if config.preempt else None
    here = statistics.median(local)
    lines = [f"start-up to the first training step, median of {config.runs}: here {here:.1f} s"]
    for nodes, times in slurm.items():
        there = statistics.median(times)
        what = "launcher=slurm" + (f" over {nodes} nodes" if nodes > 1 else "")
        lines.append(
            f"  {what} {there:.1f} s (+{there - here:.1f} s: submission, scheduling, the job's start)"
        )
    lines.append(
        f"  here: {', '.join(f'{s:.1f}' for s in local)} s; "
        + "; ".join(
            f"{nodes} node(s): {', '.join(f'{s:.1f}' for s in times)} s" for nodes, times in slurm.items()
        )
    )
    lines.append(
        f"requeued at step {config.requeue_at}+ (checkpoint_every={config.checkpoint_every}): "
        f"{lost} steps trained again; {back:.1f} s from the requeue to training again "
        "(SLURM's two-minute hold on a requeued job lifted)"
    )
    if stopped is not None:
        how = (
            "checkpointed its step within the grace"
            if stopped.in_grace
            else f"was killed before its own checkpoint: resumed from step {stopped.saved}"
        )
        lines.append(
            f"preempted by partition {config.preempt} after step {stopped.trained} "
            f"(preempt_checkpoint_every={config.preempt_checkpoint_every}{', ' if config.preempt_keys else ''}"
            f"{config.preempt_keys}): {how}; {stopped.trained - stopped.saved} steps trained again; "
            f"{stopped.back_s:.1f} s from the preempting job's submission to the run resumed"
        )
    return "\n".join(lines)


def command(args: Sequence[str]) -> None:
    print(run(apply_overrides(BenchSlurmConfig(), args)))
