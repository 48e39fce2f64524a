"""`just bench-transfer`: wall time of the transfer suite, standard and fast, per encoder.

Encoders: the GloVe bag-of-vectors baseline and a 1024-dimensional encoder (a run given
with `run=`, else an untrained BiLSTM-max of 512 per direction: the same cost).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

from mtl.config import apply_overrides
from mtl.errors import UserError
from mtl.eval.transfer import suite

TARGET_FAST_1024_SECONDS = 600.0


@dataclass
class BenchTransferConfig:
    run: str | None = None  # a trained run with 1024-d embeddings; None: random BiLSTM-max 512
    modes: str = "fast,standard"  # protocols to time
    tasks: str = "all"  # as transfer
    vectors: str | None = None  # GloVe file; None: the usual search

    def __post_init__(self) -> None:
        if bad := [m for m in self.modes.split(",") if m not in ("fast", "standard")]:
            raise UserError(f"modes={self.modes!r}: {bad[0]!r} is not fast or standard")


def run(bench: BenchTransferConfig) -> list[dict]:
    encoders = [
        ("glove-bow", {"baseline": "glove-bow"}),
        (
            "1024-d " + ("run" if bench.run else "random-bilstm 512"),
            {"run": bench.run} if bench.run else {"baseline": "random-bilstm", "random_hidden": 512},
        ),
    ]
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
                    }
                )
            print(format_row(rows[-1]), flush=True)
    return rows


def format_row(row: dict) -> str:
    slowest = sorted(row["tasks"].items(), key=lambda item: -item[1])[:3]
    return (
        f"{row['encoder']:<28} {row['mode']:<9} {row['seconds'] / 60:6.1f} min  "
        f"(slowest: {', '.join(f'{t} {s:.0f} s' for t, s in slowest)})"
    )


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
