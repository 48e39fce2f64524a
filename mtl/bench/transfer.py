"""`just bench-transfer`: wall time of the transfer suite, standard and fast, per encoder.

Encoders: the GloVe bag-of-vectors baseline and a 1024-dimensional encoder (a run given
with `run=`, else an untrained BiLSTM-max of 512 per direction: the same cost); `encoders=`
times one of them. `tokenizer=whitespace` gives the baselines SentEval's own tokens, as the
comparison with SentEval in RESULTS.md runs them.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from mtl.bench.configs import BenchTransferConfig as BenchTransferConfig
from mtl.config import apply_overrides
from mtl.eval.transfer import suite

TARGET_FAST_1024_SECONDS = 600.0


def run(bench: BenchTransferConfig) -> list[dict]:
    baseline_tokens = {} if bench.tokenizer == "spacy" else {"tokenizer": bench.tokenizer}
    encoders = {
        "glove-bow": (
            "glove-bow" + ("" if bench.tokenizer == "spacy" else f" ({bench.tokenizer})"),
            {"baseline": "glove-bow", **baseline_tokens},
        ),
        "1024": (
            "1024-d " + ("run" if bench.run else "random-bilstm 512"),
            {"run": bench.run}
            if bench.run
            else {"baseline": "random-bilstm", "random_hidden": 512, **baseline_tokens},
        ),
    }
    encoders = [encoders[name] for name in bench.encoders.split(",")]
    rows = []
    for mode in bench.modes.split(","):
        for label, chosen in encoders:
            with tempfile.TemporaryDirectory() as out:
                config = suite.TransferConfig(
                    **chosen, tasks=bench.tasks, mode=mode, out=out, wandb="disabled", vectors=bench.vectors
                )
                started = time.perf_counter()
                _, report = suite.run(config)
                rows.append(
                    {
                        "encoder": label,
                        "mode": mode,
                        "seconds": time.perf_counter() - started,
                        "dim": report["dim"],
                        "tasks": {t: r["seconds"] for t, r in report["results"].items()},
                        "embedding": {t: r.get("embed_seconds", 0.0) for t, r in report["results"].items()},
                    }
                )
            print(format_row(rows[-1]), flush=True)
    return rows


def format_row(row: dict) -> str:
    """The suite's time, then each task's seconds and the share of them its classifier's fits took
    (the rest: embedding the task's sentences)."""
    total = sum(row["tasks"].values()) or 1.0
    fitting = total - sum(row["embedding"].values())
    per_task = ", ".join(
        f"{task} {seconds:.1f} s ({_fit_share(seconds, row['embedding'][task])} fits)"
        for task, seconds in row["tasks"].items()
    )
    return (
        f"{row['encoder']:<28} {row['mode']:<20} {row['seconds']:6.1f} s, tasks {sum(row['tasks'].values()):.1f} s, "
        f"fits {fitting / total:.0%}\n"
        f"    {per_task}"
    )


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
    return "\n".join(lines)


def command(args: Sequence[str]) -> None:
    """The command line's `key=value` arguments onto BenchTransferConfig; run; print what it gives."""
    config = apply_overrides(BenchTransferConfig(), args)
    print(report(run(config)))
