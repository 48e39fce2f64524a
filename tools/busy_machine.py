"""`just bench-transfer hog=N`: the transfer suite on a machine shared with other work.

N busy processes (a loop each) run beside every suite. Each suite runs as `just transfer` does,
in a process of its own, twice in turn: with the default threads, and with every library on one
thread from the start (OMP_NUM_THREADS=1 and its kin). Where every fit and score of the suite is
on one thread (mtl/eval/transfer/threads.py) and only the embedding keeps the default threads,
the two should take about the same CPU time: a default that costs much more is a part of the
suite that still waits on a second thread for a core. Wall and CPU seconds (the process and
its k-fold workers, from the kernel's accounting), medians over `runs=` pairs, accuracies
checked equal.
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
from collections.abc import Iterator
from pathlib import Path

from mtl.errors import UserError
from tools.configs import BenchTransferConfig

ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
BUSY_LOOP = "while True: pass"


@contextlib.contextmanager
def hogs(count: int) -> Iterator[None]:
    """`count` processes that keep a core busy each, until the block ends."""
    busy = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(count)]
    try:
        yield
    finally:
        for process in busy:
            process.kill()
            process.wait()


def timed_transfer(keys: list[str], env: dict[str, str]) -> dict:
    """`just transfer keys...` in a process of its own: its wall and CPU seconds (user + system,
    its worker processes included) and its report's accuracies."""
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "mtl", "transfer", *keys, f"out={out}", "wandb=disabled"]
        started = time.perf_counter()
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        _, stderr = process.communicate()
        wall = time.perf_counter() - started
        if process.returncode != 0:
            last = (stderr.strip().splitlines() or ["(no output)"])[-1]
            raise UserError(f"just transfer {' '.join(keys)} failed: {last}")
        report = json.loads(next(Path(out).glob("transfer*.json")).read_text())
    results = report["results"]
    embedding = sum(r.get("embed_seconds", 0.0) for r in results.values())
    return {
        "wall": wall,
        "embed": embedding,
        "fits": sum(r["seconds"] for r in results.values()) - embedding,
        "results": results,
    }


def cpu_seconds_of_children() -> float:
    usage = os.times()
    return usage.children_user + usage.children_system


def run(bench: BenchTransferConfig) -> list[dict]:
    rows = []
    for mode in bench.modes.split(","):
        for label, chosen in bench.chosen_encoders():
            keys = [f"{key}={value}" for key, value in chosen.items()] + [
                f"tasks={bench.tasks}",
                f"mode={mode}",
            ]
            keys += [f"vectors={bench.vectors}"] if bench.vectors else []
            timed: dict[str, list[dict]] = {"default": [], "one thread": []}
            for _ in range(bench.runs):  # the two in turn: the machine's drift falls on both
                for threads, env in (
                    ("default", dict(os.environ)),
                    ("one thread", {**os.environ, **ONE_THREAD}),
                ):
                    with hogs(bench.hog):
                        before = cpu_seconds_of_children()
                        result = timed_transfer(keys, env)
                        result["cpu"] = cpu_seconds_of_children() - before
                    timed[threads].append(result)
                    print(
                        f"{label:<24} {mode:<9} {threads:<10} {result['wall']:6.1f} s wall, "
                        f"{result['cpu']:6.1f} CPU-s (embedding {result['embed']:.1f} s, scoring {result['fits']:.1f} s)",
                        flush=True,
                    )
            rows.append({"encoder": label, "mode": mode, "hog": bench.hog, **summarized(timed)})
    return rows


def summarized(timed: dict[str, list[dict]]) -> dict:
    """Medians of wall and CPU seconds per thread setting, and the tasks whose accuracies differ."""
    medians = {
        threads: {
            what: statistics.median(r[what] for r in results) for what in ("wall", "cpu", "embed", "fits")
        }
        for threads, results in timed.items()
    }
    first = {threads: results[0]["results"] for threads, results in timed.items()}
    differ = sorted(
        task
        for task, result in first["default"].items()
        if {k: v for k, v in result.items() if not k.endswith("seconds")}
        != {k: v for k, v in first["one thread"].get(task, {}).items() if not k.endswith("seconds")}
    )
    return {"medians": medians, "pairs": len(timed["default"]), "differ": differ}


def report(rows: list[dict]) -> str:
    lines = [f"the transfer suite beside {rows[0]['hog'] if rows else 0} busy processes (medians)"]
    for row in rows:
        default, one = row["medians"]["default"], row["medians"]["one thread"]
        lines.append(
            f"{row['encoder']} {row['mode']}: default threads {default['wall']:.1f} s wall, "
            f"{default['cpu']:.1f} CPU-s (embedding {default['embed']:.1f} s, scoring {default['fits']:.1f} s); "
            f"one thread {one['wall']:.1f} s, {one['cpu']:.1f} CPU-s (embedding {one['embed']:.1f} s, "
            f"scoring {one['fits']:.1f} s): "
            f"default/one {default['wall'] / one['wall']:.2f}x wall, {default['cpu'] / one['cpu']:.2f}x CPU "
            f"({row['pairs']} pairs); "
            + (f"results differ on {', '.join(row['differ'])}" if row["differ"] else "the same results")
        )
    return "\n".join(lines)
