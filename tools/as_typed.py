"""`just bench-transfer as_typed=true senteval=PATH`: the transfer command a user types against
SentEval's whole process, both cold, on the same GloVe bag of words and SentEval's tokens.

Each side is a process of its own, measured whole: mtl's `python -m mtl transfer
baseline=glove-bow tokenizer=whitespace tasks=... mode=...` with no thread setting (the bench's
own OMP_NUM_THREADS and kin are taken out of its environment), SentEval (tools/senteval_itself.py,
its vectors read once before its clock, as its bag-of-words example does) on one thread. Both
commands run once over every task of `tasks=`, then once per task (start-up paid each time), the
two alternated, mtl first in odd rounds and SentEval first in even ones, `runs=` rounds. CPU
seconds are the process tree's, counted by a cgroup of its own where this machine lets the bench
make one (cgroup v2, then v1's cpuacct); elsewhere the children the process waited for
(`os.times`), which misses workers a process leaves behind, and the report says which.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from mtl.errors import UserError
from mtl.eval.transfer import suite
from mtl.text.vectors import resolve_vectors_path
from tools.busy_machine import ONE_THREAD, cpu_seconds_of_children
from tools.configs import BenchTransferConfig
from tools.senteval_itself import command_line, compared_score

THREAD_KEYS = (*ONE_THREAD, "TORCH_NUM_THREADS", "NUMEXPR_NUM_THREADS")
CGROUP_ROOTS = (  # (folder holding new groups, the file of the CPU used, its unit in seconds)
    (Path("/sys/fs/cgroup"), "cpu.stat", 1e-6),  # v2 mounted at the root
    (Path("/sys/fs/cgroup/unified"), "cpu.stat", 1e-6),  # v2 beside v1 (hybrid)
    (Path("/sys/fs/cgroup/cpuacct"), "cpuacct.usage", 1e-9),
)
EMPTY_WAIT_SECONDS = 30.0  # a process's leftover workers must leave its group within this


def cgroup_root() -> tuple[Path, str, float] | None:
    """Where this machine lets the bench make a group that counts a process tree's CPU; None: nowhere."""
    for root, usage, unit in CGROUP_ROOTS:
        probe = root / f"mtl-bench-probe-{os.getpid()}"
        try:
            probe.mkdir()
        except OSError:
            continue
        try:
            if (probe / usage).is_file() and (probe / "cgroup.procs").is_file():
                return root, usage, unit
        finally:
            probe.rmdir()
    return None


def read_usage(group: Path, usage: str, unit: float) -> float:
    text = (group / usage).read_text()
    if usage == "cpu.stat":  # "usage_usec N" among its lines
        fields = dict(line.split() for line in text.splitlines() if line.strip())
        return int(fields["usage_usec"]) * unit
    return int(text) * unit


@contextlib.contextmanager
def counted(name: str) -> Iterator[tuple[Callable[[], None] | None, dict[str, float]]]:
    """(a preexec function that puts a new process into a group of its own, or None; a dict whose
    "cpu" the block's end fills in: the group's CPU seconds once every process of it has left, or
    without a group the CPU seconds of the children this process waited for)."""
    spent: dict[str, float] = {}
    found = cgroup_root()
    if found is None:
        before = cpu_seconds_of_children()
        yield None, spent
        spent["cpu"] = cpu_seconds_of_children() - before
        return
    root, usage, unit = found
    group = root / f"mtl-bench-{os.getpid()}-{name}"
    group.mkdir()

    def join() -> None:
        (group / "cgroup.procs").write_text(str(os.getpid()))

    try:
        yield join, spent
        deadline = time.monotonic() + EMPTY_WAIT_SECONDS
        while (group / "cgroup.procs").read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.1)
        if left := (group / "cgroup.procs").read_text().split():
            raise UserError(
                f"{name}: {len(left)} process(es) still running {EMPTY_WAIT_SECONDS:.0f} s after the command "
                "ended: its CPU cannot be counted whole"
            )
        spent["cpu"] = read_usage(group, usage, unit)
    finally:
        for pid in (group / "cgroup.procs").read_text().split():  # a leftover process: stopped
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), 9)
        deadline = time.monotonic() + EMPTY_WAIT_SECONDS
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                group.rmdir()
                break
            time.sleep(0.1)


def how_counted() -> str:
    found = cgroup_root()
    if found is None:
        return "CPU: the children each process waited for (no cgroup could be made here: workers left behind are missed)"
    return f"CPU: each process tree in a cgroup of its own ({found[0]}, {found[1]})"


def timed(command: list[str], env: dict[str, str], name: str) -> dict:
    """One command, cold: wall and CPU seconds of its whole process tree, and its stdout."""
    with counted(name) as (join, spent):
        started = time.perf_counter()
        finished = subprocess.run(command, env=env, capture_output=True, text=True, preexec_fn=join)
        wall = time.perf_counter() - started
        if finished.returncode != 0:
            last = (finished.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise UserError(f"{' '.join(command[2:5])} ... failed: {last}")
    return {"wall": wall, "cpu": spent["cpu"], "stdout": finished.stdout}


def mtl_command(bench: BenchTransferConfig, tasks: str, out: str, vectors: str) -> list[str]:
    return [
        sys.executable, "-m", "mtl", "transfer", "baseline=glove-bow", "tokenizer=whitespace",
        f"tasks={tasks}", f"mode={bench.modes}", f"vectors={vectors}", f"out={out}", "wandb=disabled",
    ]  # fmt: skip


def scores_of_mtl(out: str) -> dict[str, float]:
    report = json.loads(next(Path(out).glob("transfer*.json")).read_text())
    return {task: compared_score(result) for task, result in report["results"].items()}


def one_round(bench: BenchTransferConfig, tasks: str, vectors: str, mtl_first: bool) -> dict:
    """mtl's command and SentEval's process on `tasks`, in the order given: each one's seconds and scores."""
    as_typed = {k: v for k, v in os.environ.items() if k not in THREAD_KEYS}
    one_thread = {**as_typed, **ONE_THREAD}
    measured = {}
    for side in ("mtl", "senteval") if mtl_first else ("senteval", "mtl"):
        if side == "mtl":
            with tempfile.TemporaryDirectory() as out:
                result = timed(mtl_command(bench, tasks, out, vectors), as_typed, "mtl")
                result["scores"] = scores_of_mtl(out)
        else:
            data = suite.data_root(suite.TransferConfig(baseline="glove-bow")).parent  # SentEval's task_path
            command = command_line(bench.senteval, data, vectors, bench.modes, tasks)
            result = timed(command, one_thread, "senteval")
            given = json.loads(result["stdout"].strip().splitlines()[-1])
            result["scores"] = {task: compared_score(r) for task, r in given.items()}
        del result["stdout"]
        measured[side] = result
    return measured


def run(bench: BenchTransferConfig) -> list[dict]:
    if not bench.senteval:
        raise UserError(
            "as_typed=true times mtl against SentEval itself: give senteval=PATH (a SentEval checkout)"
        )
    if bench.modes not in ("senteval", "senteval-prototyping"):
        raise UserError(
            f"as_typed=true: modes={bench.modes}: give one of SentEval's, senteval or senteval-prototyping"
        )
    vectors = str(resolve_vectors_path(bench.vectors))
    tasks = bench.tasks.split(",")
    rows = []
    for label in [bench.tasks, *tasks] if len(tasks) > 1 else tasks:
        rounds = [one_round(bench, label, vectors, mtl_first=number % 2 == 0) for number in range(bench.runs)]
        row = {"tasks": label, "rounds": len(rounds)}
        for side in ("mtl", "senteval"):
            row[side] = {what: statistics.median(r[side][what] for r in rounds) for what in ("wall", "cpu")}
        first = rounds[0]
        row["differ"] = {
            task: round(100 * (first["mtl"]["scores"][task] - score), 2)
            for task, score in first["senteval"]["scores"].items()
            if abs(first["mtl"]["scores"][task] - score) >= 5e-5
        }
        rows.append(row)
        print(format_row(row), flush=True)
    return rows


def format_row(row: dict) -> str:
    mtl, senteval = row["mtl"], row["senteval"]
    differ = (
        "scores equal to SentEval's"
        if not row["differ"]
        else "scores minus SentEval's: " + ", ".join(f"{t} {d:+.2f}" for t, d in row["differ"].items())
    )
    return (
        f"{row['tasks']}: mtl as typed {mtl['cpu']:.1f} CPU-s, {mtl['wall']:.1f} s; SentEval (1 thread) "
        f"{senteval['cpu']:.1f} CPU-s, {senteval['wall']:.1f} s; mtl / SentEval {mtl['cpu'] / senteval['cpu']:.2f}x CPU, "
        f"{mtl['wall'] / senteval['wall']:.2f}x wall (medians of {row['rounds']}); {differ}"
    )


def report(rows: list[dict], bench: BenchTransferConfig) -> str:
    return "\n".join(
        [
            f"the transfer command as typed against SentEval's whole process, cold, {bench.modes}, "
            f"GloVe bag of words on SentEval's tokens; {how_counted()}",
            *map(format_row, rows),
        ]
    )
