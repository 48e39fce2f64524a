"""`just bench-train`: a training step of mtl next to the 2018 code's, measured side by side.

At the paper's input size (300-d vectors: the configured file when it has 300 dimensions,
else random 300-d vectors for the data's vocabulary, which cost the same), on real SNLI
and ClassifSQuAD batches, every contender steps on the very same batches, interleaved
(the order rotates every batch), so machine noise falls on all of them alike:

- `reference`: the step as InferSent and Liu et al.'s code take it: a bidirectional
  `nn.LSTM` over packed sequences, each sentence position (premise, hypothesis) encoded
  apart, max pooling, the task MLP, SGD, in fp32, reading its metrics every step as
  InferSent's `train_nli.py` does;
- `mtl fp32`, `mtl bf16`: the trainer's own step (`Trainer.train_step`) at each precision;
- `floor`: a bare bidirectional `nn.LSTM` forward and backward over each position padded to
  its own longest sentence: what any BiLSTM step must at least cost on the CPU (on a GPU,
  mtl's packed sequences skip the padding this floor runs over);
- `packed floor`: one `nn.LSTM` call, forward and backward, over every sentence of the batch
  packed together (128 for an NLI batch of 64 pairs), no head: the least cuDNN itself needs
  for the step's encoder work on a GPU.

On CUDA each contender's peak GPU memory per step is reported too.

With `device=cuda` every contender runs on the GPU (cuDNN), each timed to the end of its
kernels, and `precisions` may add fp16. Both batching modes are timed: `random` batches
(a plain shuffle, as the 2018 code draws them) and `bucketed` ones (mtl's default). The
headline compares mtl as it trains (bucketed, each precision) with the reference as the
2018 code trained (random batches).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from mtl.config import apply_overrides
from mtl.data.batches import TaskStream
from mtl.errors import UserError
from mtl.models.heads import HeadRecipe, mlp
from mtl.models.precision import bf16_supported, grad_scaler
from mtl.runtime.device import resolve_device, to_device
from mtl.tasks import seed_indices
from mtl.train.config.command_line import config_from_args
from mtl.train.config.inputs import resolve_inputs
from mtl.train.config.train_config import TrainConfig, with_overrides
from mtl.train.data.training_data import TrainingData, prepare
from mtl.train.loop.trainer import Trainer
from mtl.train.run.setup import BUCKET_WINDOW
from tools import gradcache, mixed, objectives, ops, step_profile
from tools.batches import task_batches

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from tools.configs import BenchTrainConfig as BenchTrainConfig

INPUT_DIM = 300  # glove.840B.300d, the paper's vectors

# (label, overrides): the BiLSTM rows of Table 1, and the cpu-small preset's size.
SETTINGS = [
    ("bilstm 512", ["encoder=bilstm", "hidden=512"]),
    ("bilstm 2048", ["encoder=bilstm", "hidden=2048"]),
    ("bilstm2 1024", ["encoder=bilstm2", "hidden=1024"]),
]
MODES = {"random": 1, "bucketed": BUCKET_WINDOW}  # batches per sorted window


class ReferenceModel(nn.Module):
    """The 2018 code's Siamese BiLSTM-max: packed sequences, positions encoded apart."""

    def __init__(
        self, embedding: nn.Embedding, hidden: int, layers: int, recipe: HeadRecipe, head_hidden: int
    ):
        super().__init__()
        self.embedding, self.recipe = embedding, recipe
        self.lstm = nn.LSTM(embedding.embedding_dim, hidden, num_layers=layers, bidirectional=True)
        self.classifier = mlp(recipe.width * 2 * hidden, head_hidden, 1, recipe.outputs, 0.0)

    def encode(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        # InferSent's BLSTMEncoder: sort by length on the host, pack, run, unpack, unsort, max
        # over time (the sort order copied to the GPU, as its code does).
        order = torch.argsort(lengths.cpu(), descending=True)
        embedded = self.embedding(tokens[order.to(tokens.device)]).transpose(0, 1)  # (T, B, E)
        packed = pack_padded_sequence(embedded, lengths.cpu()[order])
        output = pad_packed_sequence(self.lstm(packed)[0])[0]  # (T, B, 2H)
        output = output[:, torch.argsort(order).to(tokens.device)]
        return output.max(dim=0)[0]

    def forward(self, sentences) -> torch.Tensor:
        return self.classifier(self.recipe.features(*(self.encode(t, n) for t, n in sentences)))


def bench_inputs(bench: BenchTrainConfig) -> tuple[TrainConfig, TrainingData, str]:
    """The configuration every contender starts from, the data, and where the 300-d vectors came from."""
    if bench.threads:
        torch.set_num_threads(bench.threads)
    base = with_overrides(
        TrainConfig(),
        [
            f"tasks={bench.tasks}",
            # The paper's two tasks, by their keys (ignored for a task not in tasks=).
            f"nli_train_split={bench.nli_train_split}",
            f"classifsquad={bench.classifsquad}",
            *([f"vectors={bench.vectors}"] if bench.vectors else []),
            "wandb=disabled",
            "head_layers=1",  # InferSent's head, as the reference's
            f"device={bench.device}",
            "optim=sgd",
        ],
    )
    base = resolve_inputs(base)
    data = prepare(base, progress=False)
    return base, data, with_300d_inputs(data)


def run(bench: BenchTrainConfig) -> dict:
    base, data, inputs = bench_inputs(bench)
    device = resolve_device(bench.device)
    precisions = [p for p in bench.precisions.split(",") if supported(p, device)]
    chosen = chosen_settings(bench.only)
    results = {
        "inputs": inputs,
        "threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "precisions": precisions,
        "rows": [],
        "fill": {
            (task, mode): padding_fill(data, task, base.tasks[task].batch, window, base.run.seed)
            for task in [t.strip() for t in bench.tasks.split(",") if t.strip() in base.tasks]
            for mode, window in MODES.items()
        },
    }
    with tempfile.TemporaryDirectory() as scratch:
        for label, overrides in chosen:
            config = apply_overrides(base, [*overrides, "precision=fp32"])
            trainer = Trainer(config, Path(scratch) / "run", data=data, progress=False)
            for task in [t.strip() for t in bench.tasks.split(",") if t.strip() in config.tasks]:
                for mode, window in MODES.items():
                    row = time_contenders(trainer, task, mode, window, precisions, bench)
                    row.update(setting=label, params=trainer.run.model.trainable_parameters(task))
                    results["rows"].append(row)
                    print(format_row(row), flush=True)
    return results


def chosen_settings(only: str) -> list[tuple[str, list[str]]]:
    """The SETTINGS whose labels start with one of `only`'s comma-separated prefixes (all for "")."""
    return [s for s in SETTINGS if not only or any(s[0].startswith(p.strip()) for p in only.split(","))]


def device_name(device: torch.device) -> str:
    return (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"cpu, {torch.get_num_threads()} threads"
    )


def run_mixed(bench: BenchTrainConfig) -> str:
    """schedule=mixed: its step against the single-task steps, its balancers, affinity (mixed.py)."""
    if bench.threads:
        torch.set_num_threads(bench.threads)
    base = config_from_args(
        [
            f"preset={bench.preset}",
            f"nli_train_split={bench.nli_train_split}",
            f"classifsquad={bench.classifsquad}",
            *([f"vectors={bench.vectors}"] if bench.vectors else []),
            "wandb=disabled",
            f"device={bench.device}",
        ]
    )
    device = resolve_device(bench.device)
    base = resolve_inputs(base)
    data = prepare(base, progress=False)
    inputs = with_300d_inputs(data)
    results = mixed.run(base, data, bench.steps, bench.warmup, device)
    return f"inputs: {inputs}; {device_name(device)}\n" + mixed.report(results, f"preset={bench.preset}")


def supported(precision: str, device: torch.device) -> bool:
    if precision == "bf16":
        return bf16_supported(device)
    return precision == "fp32" or (precision == "fp16" and device.type == "cuda")


def padding_fill(data: TrainingData, task: str, batch_size: int, window: int, seed: int) -> float:
    """Real tokens over padded tokens in mtl's encoder calls, over an epoch of the task's batches."""
    examples = data.examples[task]["train"]
    lengths = data.table.lengths[examples.sentences]  # (N, sentences)
    stream = TaskStream(
        examples,
        data.bucket_keys(task, "train"),
        batch_size,
        seed=[seed, seed_indices({task: data.tasks[task].config})[task]],
        window=window,
    )
    real = padded = 0
    for rows in stream.epoch_batches(0):
        for call in data.tasks[task].recipe.calls:
            columns = lengths[rows][:, list(call)]
            real, padded = real + columns.sum(), padded + columns.max() * columns.size
    return float(real / padded)


def with_300d_inputs(data: TrainingData) -> str:
    """Make the frozen embeddings 300-d (the paper's size) and say where they came from."""
    dim = data.embeddings.shape[1]
    if dim == INPUT_DIM:
        return f"{data.vectors_path.name} ({INPUT_DIM}-d)"
    rng = np.random.default_rng(0)
    data.embeddings = rng.normal(0, 0.4, size=(data.embeddings.shape[0], INPUT_DIM)).astype(np.float32)
    data.embeddings[0] = 0.0
    return (
        f"random {INPUT_DIM}-d vectors for the data's {data.embeddings.shape[0]:,} words "
        f"({data.vectors_path.name} has {dim}-d vectors)"
    )


def time_contenders(
    trainer: Trainer, task: str, mode: str, window: int, precisions: list[str], bench
) -> dict:
    examples = trainer.run.data.examples[task]["train"]
    batches = task_batches(trainer, task, window, bench.warmup + bench.steps)
    encoder, device = trainer.run.model.encoder, trainer.run.device
    reference = ReferenceModel(
        encoder.embedding,
        encoder.hidden,
        encoder.layers,
        trainer.run.data.tasks[task].recipe,
        trainer.run.config.head.head_hidden,
    ).to(device)
    reference_optimizer = torch.optim.SGD([p for p in reference.parameters() if p.requires_grad], lr=0.1)
    floor = nn.LSTM(
        encoder.input_size, encoder.hidden, num_layers=encoder.layers, bidirectional=True, batch_first=True
    ).to(device)

    def reference_step(rows: np.ndarray) -> None:
        # InferSent's train_nli.py reads the batch's accuracy and loss after the forward pass and
        # the gradient norm before the update: on a GPU each read waits for the kernels before it.
        sentences = trainer.run.data.table.batch_columns(examples.sentences[rows], device)
        labels = to_device(torch.from_numpy(examples.labels[rows]), device)
        logits = reference(sentences)
        (logits.argmax(dim=1) == labels).sum().item()
        loss = nn.functional.cross_entropy(logits, labels)
        loss.item()
        reference_optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(reference.parameters(), 5.0).item()
        reference_optimizer.step()

    def floor_step(rows: np.ndarray) -> None:
        total = 0
        for tokens, _ in trainer.run.data.table.batch_columns(examples.sentences[rows], device):
            total = total + floor(encoder.embedding(tokens))[0].sum()
        total.backward()

    def packed_floor_step(rows: np.ndarray) -> None:
        columns = trainer.run.data.table.batch_columns(examples.sentences[rows], device)
        ops.packed_lstm_floor(floor, encoder.embedding, columns)()

    def mtl_step(precision: str):
        def step(rows: np.ndarray) -> None:
            trainer.run.config.run.precision, trainer.run.setup.scaler = precision, scalers[precision]
            trainer.train_step({task: rows})

        return step

    scalers = {p: grad_scaler(p, device) for p in precisions}
    # A CUDA step only queues kernels: wait for them, so each contender is timed to its end.
    finish = torch.cuda.synchronize if device.type == "cuda" else lambda: None
    contenders = {
        "reference": reference_step,
        **{f"mtl {p}": mtl_step(p) for p in precisions},
        "floor": floor_step,
        "packed floor": packed_floor_step,
    }
    names = list(contenders)
    times: dict[str, list[float]] = {name: [] for name in names}
    memory: dict[str, list[float]] = {name: [] for name in names}
    for i, rows in enumerate(batches):
        for name in names[i % len(names) :] + names[: i % len(names)]:  # rotate who goes first
            finish()
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            started = time.perf_counter()
            contenders[name](rows)
            finish()
            if i >= bench.warmup:
                times[name].append(1000 * (time.perf_counter() - started))
                if device.type == "cuda":
                    memory[name].append(torch.cuda.max_memory_allocated(device) / 2**20)
    padded = [trainer.run.data.table.lengths[examples.sentences[rows]].max(axis=0).sum() for rows in batches]
    return {
        "task": task,
        "mode": mode,
        "ms": {name: (statistics.median(t), min(t), max(t)) for name, t in times.items()},
        "memory_mb": {name: max(m) for name, m in memory.items() if m},  # peak over the steps (CUDA)
        "tokens_per_example": float(np.mean(padded)),
    }


def milliseconds(value: float) -> str:
    """Whole milliseconds for CPU steps, tenths for the few-millisecond steps of a GPU."""
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def where(results: dict) -> str:
    return results["device"] if results["device"] != "cpu" else f"{results['threads']} threads"


def format_row(row: dict) -> str:
    cells = "  ".join(
        f"{name} {milliseconds(median):>7} ({milliseconds(low)}-{milliseconds(high)})"
        for name, (median, low, high) in row["ms"].items()
    )
    if row.get("memory_mb"):
        cells += " | peak MB " + "  ".join(f"{name} {mb:,.0f}" for name, mb in row["memory_mb"].items())
    return f"{row['setting']:<13} {row['task']:<5} {row['mode']:<8} | {cells}"


def report(results: dict) -> str:
    lines = [
        f"inputs: {results['inputs']}; {where(results)}; median ms per step (min-max) over the same "
        "batches, interleaved (batch 64 NLI pairs, 128 SQuAD triples)",
        *map(format_row, results["rows"]),
        "",
        "real tokens in mtl's padded encoder calls over an epoch: "
        + ", ".join(f"{task} {mode} {fill:.0%}" for (task, mode), fill in results["fill"].items()),
    ]
    by_key = {(r["setting"], r["task"], r["mode"]): r for r in results["rows"]}
    for (setting, task, mode), row in by_key.items():
        if mode != "bucketed" or (setting, task, "random") not in by_key:
            continue
        reference = by_key[(setting, task, "random")]["ms"]["reference"][0]
        for precision in results["precisions"]:
            ms = row["ms"][f"mtl {precision}"][0]
            lines.append(
                f"{setting} {task} step, mtl {precision} bucketed: {milliseconds(ms)} ms = {reference / ms:.2f}x "
                f"faster than the reference on random batches ({milliseconds(reference)} ms); "
                f"{ms / row['ms']['floor'][0]:.2f}x "
                f"the bucketed floor"
                + (
                    f", {ms / row['ms']['packed floor'][0]:.2f}x the one-call packed floor"
                    if "packed floor" in row["ms"]
                    else ""
                )
            )
    for (setting, task, mode), row in by_key.items():
        same = row["ms"]["reference"][0] / row["ms"]["mtl fp32"][0]
        lines.append(
            f"{setting} {task} {mode}: mtl fp32 is {same:.2f}x faster than the reference on the same batches"
        )
    return "\n".join(lines)


def command(args: Sequence[str]) -> None:
    """`just bench-train`: the step benchmark, and with objectives= the seeds' objectives."""
    config = apply_overrides(BenchTrainConfig(), args)
    if config.gradcache:
        print(gradcache.report(gradcache.run(config), config.gradcache))
        return
    if config.ops:
        base, data, _ = bench_inputs(config)
        print(ops.report(ops.run(base, data, config.only, config.tasks.split(",")[0])))
        return
    if config.profile:
        base, data, inputs = bench_inputs(config)
        chosen = chosen_settings(config.only or "bilstm 2048")
        tasks = [t.strip() for t in config.tasks.split(",")]
        rows = step_profile.run(base, data, chosen, tasks, config.steps, config.warmup)
        print(step_profile.report(rows, f"inputs: {inputs}; {device_name(resolve_device(config.device))}"))
        return
    if config.schedule == "mixed":
        print(run_mixed(config))
        return
    if config.schedule:
        raise UserError(
            f"schedule={config.schedule}: bench-train times schedule=mixed only (or leave it out)"
        )
    if config.only != "objectives":
        print(report(run(config)))
    if config.objectives:
        objectives.run(config)
