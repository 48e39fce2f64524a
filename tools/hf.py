"""`just bench-hf`: training steps per second of a pretrained transformer (encoder=hf), fp32 and bf16.

One NLI step and one ClassifSQuAD step at the default batch sizes (64 pairs, 128 triples),
as the trainer runs them (bucketed batches, forward, backward, clipping, AdamW). The data
is tokenized once; precisions alternate step by step so machine noise falls on both alike.
Reported: the median over `steps` timed steps per task and precision, after one untimed
step of each.
"""

from __future__ import annotations

import dataclasses
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from mtl.config import apply_overrides
from mtl.train.config.command_line import config_from_args
from mtl.train.config.inputs import resolve_inputs
from mtl.train.config.train_config import TrainConfig
from mtl.train.data.training_data import prepare
from mtl.train.loop.trainer import Trainer
from tools import gradcache

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from tools.configs import BenchHFConfig as BenchHFConfig

PRECISIONS = ("fp32", "bf16")


def run(config: BenchHFConfig) -> dict[str, dict[str, list[float]]]:
    """Seconds of each timed step, by task and precision."""
    if config.threads:
        torch.set_num_threads(config.threads)
    train = _train_config(config)
    data = prepare(train, progress=True)
    seconds: dict[str, dict[str, list[float]]] = {t: {p: [] for p in PRECISIONS} for t in train.tasks}
    with tempfile.TemporaryDirectory(prefix="mtl-bench-hf-") as scratch:
        trainers = {}
        for precision in PRECISIONS:
            train.run.precision = precision
            trainers[precision] = Trainer(train, Path(scratch) / precision, data=data, progress=False)
        for task in seconds:
            for step in range(config.steps + 1):
                for precision, trainer in trainers.items():
                    rows, _ = trainer.run.setup.streams[task].next()
                    started = time.perf_counter()
                    trainer.train_step({task: rows})
                    if trainer.run.device.type == "cuda":
                        torch.cuda.synchronize()
                    if step > 0:  # the first step of each warms up
                        seconds[task][precision].append(time.perf_counter() - started)
            print(f"{task}: {_line(seconds[task])}", flush=True)
    return seconds


def memory_contenders(config: BenchHFConfig) -> dict[str, str]:
    """The contenders' names and their training key: the plain step first."""
    contenders = {"plain": "gradient_checkpointing=false"}
    if config.checkpointing:
        contenders["checkpointed"] = "gradient_checkpointing=true"
    if config.lora_r:
        contenders[f"lora r={config.lora_r}"] = f"lora_r={config.lora_r}"
    if config.compile:
        contenders["compiled"] = "compile=true"
    return contenders


def checkpointing_rows(config: BenchHFConfig) -> list[dict]:
    """Per NLI batch size: ms and peak MB per step of the plain step and of each contender."""
    if config.threads:
        torch.set_num_threads(config.threads)
    rows = []
    data = None
    for batch in [int(b) for b in config.checkpointing_batches.split(",")]:
        sized = dataclasses.replace(config, batch_nli=batch)
        # Every contender steps through the same batches. The plain step goes through them once
        # untimed first: the first step of each new shape pays one-time costs (on CUDA, loading
        # kernels and planning matrix products) that would otherwise fall on the first contender.
        contenders = {"(untimed)": "gradient_checkpointing=false", **memory_contenders(config)}
        for contender, key in contenders.items():
            train = _train_config(sized, key)
            data = data or prepare(train, progress=True)  # the same data for every contender
            with tempfile.TemporaryDirectory(prefix="mtl-bench-hf-") as scratch:
                trainer = Trainer(train, Path(scratch) / "run", data=data, progress=False)
                row = gradcache.measured(trainer, "nli", config.warmup, config.steps, trainer.run.device)
            if contender == "(untimed)":
                continue
            row.update(batch=batch, contender=contender)
            print(f"batch {batch} {contender}: {row['ms']:.0f} ms, peak {row['peak_mb']:.1f} MB", flush=True)
            rows.append(row)
    return rows


def checkpointing_report(rows: list[dict], config: BenchHFConfig) -> str:
    lines = [
        f"{config.hf_model}: NLI training step, median of {config.steps}, fp32, {config.device}; peak memory "
        "above the step's start (gradcache.py's measure)",
        "",
        "| batch | contender | plain ms | ms | time ratio | plain peak MB | peak MB | memory ratio |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    by_batch: dict[int, dict[str, dict]] = {}
    for row in rows:
        by_batch.setdefault(row["batch"], {})[row["contender"]] = row
    for batch, contenders in by_batch.items():
        plain = contenders["plain"]
        for name, row in contenders.items():
            if name == "plain":
                continue
            lines.append(
                f"| {batch} | {name} | {plain['ms']:.0f} | {row['ms']:.0f} | {row['ms'] / plain['ms']:.2f}x | "
                f"{plain['peak_mb']:.1f} | {row['peak_mb']:.1f} | {row['peak_mb'] / max(plain['peak_mb'], 1e-9):.2f}x |"
            )
    return "\n".join(lines)


def _train_config(config: BenchHFConfig, *extra: str) -> TrainConfig:
    train = config_from_args(
        [
            "preset=cpu-small-hf",
            f"hf_model={config.hf_model}",
            f"max_seq_length={config.max_seq_length}",
            f"batch_nli={config.batch_nli}",
            f"batch_squad={config.batch_squad}",
            f"classifsquad={config.classifsquad}",
            f"device={config.device}",
            "max_eval=10",
            "sample_test=true",  # the steps are what is timed: the final test on 10 examples too
            "max_squad_train=20000",  # less to tokenize; the steps are what is timed
            "wandb=disabled",
            *extra,
        ]
    )
    return resolve_inputs(train)


def _line(by_precision: dict[str, list[float]]) -> str:
    return ", ".join(f"{p} {1 / statistics.median(s):.2f} steps/s" for p, s in by_precision.items() if s)


def report(seconds: dict[str, dict[str, list[float]]], config: BenchHFConfig) -> str:
    batches = dict(zip(seconds, (config.batch_nli, config.batch_squad), strict=True))  # the preset's order
    lines = [
        f"{config.hf_model}: median of {config.steps} training steps (forward, backward, AdamW) on "
        f"{torch.get_num_threads()} thread(s), {config.device}",
        "",
        "| step | batch | fp32 steps/s | bf16 steps/s | bf16 / fp32 |",
        "|---|---:|---:|---:|---:|",
    ]
    for task, by_precision in seconds.items():
        fp32, bf16 = (statistics.median(by_precision[p]) for p in PRECISIONS)
        lines.append(f"| {task} | {batches[task]} | {1 / fp32:.2f} | {1 / bf16:.2f} | {fp32 / bf16:.2f}x |")
    return "\n".join(lines)


def command(args: Sequence[str]) -> None:
    """The command line's `key=value` arguments onto BenchHFConfig; run; print what it gives."""
    config = apply_overrides(BenchHFConfig(), args)
    if config.checkpointing or config.lora_r or config.compile:
        print(checkpointing_report(checkpointing_rows(config), config))
        return
    print(report(run(config), config))
