"""`just bench-train`: milliseconds per NLI and SQuAD step for every encoder, next to the floor.

The floor is a bare `torch.nn.LSTM` (same layers, width and input size) running forward and
backward over the very same padded batches: what any BiLSTM step must at least cost.
Steps run on the real data (SNLI, ClassifSQuAD, the configured vectors) through the
trainer's own step, with nothing logged.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import torch

from mtl.config import AtLeast0, Range, apply_overrides
from mtl.train.config import TrainConfig
from mtl.train.data import prepare
from mtl.train.runlog import NullLog
from mtl.train.trainer import Trainer

ORIGINAL_MS = {512: 570.0, 2048: 7800.0}  # the original implementation's NLI step here (issue #3)
SPEEDUP_TARGET, FLOOR_TARGET = 1.8, 1.3

# (label, overrides): the paper's sizes (Table 1) and the cpu-small preset's.
SETTINGS = [
    ("bilstm 512 (cpu-small)", ["encoder=bilstm", "hidden=512"]),
    ("bilstm 2048 (paper)", ["encoder=bilstm", "hidden=2048"]),
    ("bilstm2 1024 (paper)", ["encoder=bilstm2", "hidden=1024"]),
    ("bilstm2 256", ["encoder=bilstm2", "hidden=256"]),
    ("transformer 512x4 (paper)", ["encoder=transformer", "hidden=512", "transformer_heads=8"]),
    (
        "transformer 128x2",
        ["encoder=transformer", "hidden=128", "transformer_layers=2", "transformer_ffn=256"],
    ),
    ("decomposable 200 (paper)", ["encoder=decomposable", "hidden=200"]),
]


@dataclass
class BenchTrainConfig:
    steps: Annotated[int, Range(3)] = 8  # timed steps per task and setting, after `warmup`
    warmup: AtLeast0 = 2  # untimed steps first
    only: str = ""  # comma-separated label prefixes, e.g. "bilstm 512"
    nli_train_split: str = "train_small"  # SNLI split the batches come from
    classifsquad: str = "data/classifsquad"  # ClassifSQuAD build the batches come from
    vectors: str | None = None  # GloVe file; None: the usual search
    threads: AtLeast0 = 0  # torch threads; 0 keeps torch's default


def run(bench: BenchTrainConfig) -> list[dict]:
    if bench.threads:
        torch.set_num_threads(bench.threads)
    base = apply_overrides(
        TrainConfig(),
        [
            f"nli_train_split={bench.nli_train_split}",
            f"classifsquad={bench.classifsquad}",
            "wandb=disabled",
            "head_layers=1",
            "batch_nli=64",
            "batch_squad=128",
            "device=cpu",
            *([f"vectors={bench.vectors}"] if bench.vectors else []),
        ],
    )
    data = prepare(base, progress=False)
    chosen = [
        s
        for s in SETTINGS
        if not bench.only or any(s[0].startswith(p.strip()) for p in bench.only.split(","))
    ]
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for label, overrides in chosen:
            config = apply_overrides(base, overrides)
            trainer = Trainer(config, Path(scratch) / "run", data=data, progress=False)
            trainer.log = NullLog()
            row = {"setting": label, "params": trainer.model.trainable_parameters()}
            for task in ("nli", "squad"):
                batches = [trainer.streams[task].next()[0] for _ in range(bench.warmup + bench.steps)]
                trainer.streams[task].load_state_dict({"epoch": 0, "position": 0})
                times = [_time(lambda t=task, tr=trainer: tr._train_step(t)) for _ in batches]
                row[f"{task}_ms"] = 1000 * statistics.median(times[bench.warmup :])
                row[f"{task}_pairs_s"] = config.schedule.batch_sizes[task] / (row[f"{task}_ms"] / 1000)
                if config.model.encoder.startswith("bilstm"):
                    row[f"{task}_floor_ms"] = 1000 * _lstm_floor(trainer, task, batches, bench.warmup)
            rows.append(row)
            print(format_row(row), flush=True)
    return rows


def _time(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _lstm_floor(trainer: Trainer, task: str, batches: list, warmup: int) -> float:
    """Median seconds of a bare nn.LSTM forward+backward over the same sentences, padded."""
    encoder = trainer.model.encoder
    lstm = torch.nn.LSTM(
        encoder.input_size, encoder.hidden, num_layers=encoder.layers, bidirectional=True, batch_first=True
    )
    examples, table = trainer.data.examples[task]["train"], trainer.data.table
    times = []
    for rows in batches:
        sentence_rows = examples.sentences[rows].T.reshape(-1)
        tokens, _ = table.batch(sentence_rows)
        inputs = encoder.embedding(tokens)
        times.append(_time(lambda x=inputs: lstm(x)[0].sum().backward()))
    return statistics.median(times[warmup:])


def format_row(row: dict) -> str:
    def cell(key: str) -> str:
        return f"{row[key]:9.0f}" if key in row else f"{'-':>9}"

    return (
        f"{row['setting']:<27}{row['params']:>12,} | NLI {cell('nli_ms')} ms floor {cell('nli_floor_ms')} ms "
        f"{row['nli_pairs_s']:7.0f} pairs/s | SQuAD {cell('squad_ms')} ms floor {cell('squad_floor_ms')} ms "
        f"{row['squad_pairs_s']:7.0f} triples/s"
    )


def report(rows: list[dict]) -> str:
    lines = [
        f"{'setting':<27}{'trainable':>12} | median ms per step (batch 64 NLI pairs, 128 SQuAD triples), "
        f"{torch.get_num_threads()} threads",
        *map(format_row, rows),
        "",
    ]
    for row in rows:
        hidden = int(row["setting"].split()[1]) if row["setting"].startswith("bilstm ") else None
        if hidden in ORIGINAL_MS:
            speedup = ORIGINAL_MS[hidden] / row["nli_ms"]
            ratio = row["nli_ms"] / row["nli_floor_ms"]
            ok = speedup >= SPEEDUP_TARGET and (hidden != 512 or ratio <= FLOOR_TARGET)
            lines.append(
                f"BiLSTM-max {hidden} NLI step: {row['nli_ms']:.0f} ms = {ratio:.2f}x the LSTM floor, "
                f"{speedup:.1f}x faster than the original's {ORIGINAL_MS[hidden]:.0f} ms "
                f"({'meets' if ok else 'MISSES'} targets: >= {SPEEDUP_TARGET}x faster"
                f"{f', <= {FLOOR_TARGET}x floor' if hidden == 512 else ''})"
            )
    return "\n".join(lines)
