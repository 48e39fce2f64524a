"""`just bench-transfer`: wall time of the transfer suite, standard and fast, per encoder.

Encoders: the GloVe bag-of-vectors baseline and a 1024-dimensional encoder (a run given
with `run=`, else an untrained BiLSTM-max of 512 per direction: the same cost); `encoders=`
times one of them. `tokenizer=whitespace` gives the baselines SentEval's own tokens, as the
comparison with SentEval in RESULTS.md runs them.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Sequence

from mtl.config import apply_overrides
from mtl.errors import UserError
from mtl.eval.transfer import suite
from mtl.text.vectors import resolve_vectors_path

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from tools import as_typed, busy_machine
from tools.configs import BenchTransferConfig as BenchTransferConfig
from tools.senteval_itself import command_line

TARGET_FAST_1024_SECONDS = 600.0


def run(bench: BenchTransferConfig) -> list[dict]:
    rows = []
    for mode in bench.modes.split(","):
        for label, chosen in bench.chosen_encoders():
            timed = []
            for _ in range(bench.runs):
                with tempfile.TemporaryDirectory() as out:
                    config = suite.TransferConfig(
                        **chosen,
                        tasks=bench.tasks,
                        mode=mode,
                        out=out,
                        wandb="disabled",
                        vectors=bench.vectors,
                    )
                    started = time.perf_counter()
                    _, report = suite.run(config)
                    timed.append(
                        {
                            "encoder": label,
                            "mode": mode,
                            "seconds": time.perf_counter() - started,
                            "dim": report["dim"],
                            "tasks": {t: r["seconds"] for t, r in report["results"].items()},
                            "embedding": {
                                t: r.get("embed_seconds", 0.0) for t, r in report["results"].items()
                            },
                            "acc": {t: r["acc"] for t, r in report["results"].items() if "acc" in r},
                        }
                    )
            rows.append(median_run(timed))
            print(format_row(rows[-1]), flush=True)
        if bench.senteval and mode.startswith("senteval"):
            rows.append(median_run([senteval_itself(bench, mode) for _ in range(bench.runs)]))
            print(format_row(rows[-1]), flush=True)
    return rows


def median_run(timed: list[dict]) -> dict:
    """The run whose suite time is the median (the lower middle one of an even count)."""
    ordered = sorted(timed, key=lambda row: row["seconds"])
    return {**ordered[(len(ordered) - 1) // 2], "runs": len(timed)}


def senteval_itself(bench: BenchTransferConfig, mode: str) -> dict:
    """SentEval, from the checkout bench.senteval, on the same tasks and GloVe vectors, in a process
    of its own (senteval_itself.py): its tasks' seconds and accuracies."""
    vectors = resolve_vectors_path(bench.vectors)
    data = suite.data_root(suite.TransferConfig(baseline="glove-bow")).parent  # SentEval's task_path
    command = command_line(bench.senteval, data, str(vectors), mode, bench.tasks)
    started = time.perf_counter()
    finished = subprocess.run(command, capture_output=True, text=True)
    if finished.returncode != 0:
        last = (finished.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise UserError(f"SentEval itself (senteval={bench.senteval}) failed: {last}")
    results = json.loads(finished.stdout.strip().splitlines()[-1])
    return {
        "encoder": "SentEval itself (glove-bow)",
        "mode": mode,
        "seconds": time.perf_counter() - started,
        "dim": None,
        "tasks": {t: r["seconds"] for t, r in results.items()},  # embedding not timed apart in SentEval
        "acc": {t: r["acc"] for t, r in results.items() if "acc" in r},
    }


def format_row(row: dict) -> str:
    """The suite's time, then each task's seconds and the share of them its classifier's fits took
    (the rest: embedding the task's sentences; SentEval itself does not time them apart)."""
    total = sum(row["tasks"].values()) or 1.0
    apart = "embedding" in row
    per_task = ", ".join(
        f"{task} {seconds:.1f} s"
        + (f" ({_fit_share(seconds, row['embedding'][task])} fits)" if apart else "")
        for task, seconds in row["tasks"].items()
    )
    runs = f" (median of {row['runs']} runs)" if row.get("runs", 1) > 1 else ""
    return (
        f"{row['encoder']:<28} {row['mode']:<20} {row['seconds']:6.1f} s, tasks {sum(row['tasks'].values()):.1f} s"
        + (f", fits {(total - sum(row['embedding'].values())) / total:.0%}" if apart else "")
        + f"{runs}\n    {per_task}"
    )


def against_senteval(rows: list[dict]) -> list[str]:
    """For each mode SentEval itself ran: each mtl GloVe row's time (sum of the tasks' seconds) as a
    share of SentEval's, and the test accuracy differences (points)."""
    lines = []
    for senteval in (row for row in rows if row["encoder"].startswith("SentEval itself")):
        theirs = sum(senteval["tasks"].values())
        for row in rows:
            if row["mode"] != senteval["mode"] or not row["encoder"].startswith("glove-bow"):
                continue
            ours = sum(row["tasks"].values())
            differences = ", ".join(
                f"{task} {round(100 * (row['acc'][task] - senteval['acc'][task]), 2) + 0.0:+.2f}"  # no "-0.00"
                for task in senteval["acc"]
            )
            lines.append(
                f"{row['encoder']} against SentEval itself, {row['mode']}: {ours:.1f} s against "
                f"{theirs:.1f} s = {ours / theirs:.2f}x its time; test accuracy minus SentEval's: {differences}"
            )
    return lines


def _fit_share(seconds: float, embedding: float) -> str:
    return f"{max(0.0, seconds - embedding) / seconds:.0%}" if seconds > 0 else "-"


def report(rows: list[dict]) -> str:
    lines = [
        "transfer suite wall time (encoding included, 2 processes for k-fold tasks)",
        *map(format_row, rows),
    ]
    for row in rows:
        if row["mode"] == "fast" and row["dim"] == 1024:
            verdict = "meets" if row["seconds"] < TARGET_FAST_1024_SECONDS else "MISSES"
            lines.append(
                f"fast suite, 1024-d encoder: {row['seconds'] / 60:.1f} min {verdict} the "
                f"{TARGET_FAST_1024_SECONDS / 60:.0f} min target"
            )
    return "\n".join(lines + against_senteval(rows))


def command(args: Sequence[str]) -> None:
    """The command line's `key=value` arguments onto BenchTransferConfig; run; print what it gives."""
    config = apply_overrides(BenchTransferConfig(), args)
    if config.as_typed:
        print(as_typed.report(as_typed.run(config), config))
        return
    if config.hog:
        print(busy_machine.report(busy_machine.run(config)))
        return
    print(report(run(config)))
