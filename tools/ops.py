"""`just bench-train ops=true`: the host's work in one training step, counted on the CPU.

A GPU step whose time does not grow with the batch is bound by the host: by the ops it
dispatches, each a kernel launch, and by the times it waits for the GPU. Both can be counted
without a GPU:

- ops: every aten op the PyTorch profiler records in the step, nested ones included (each is
  a trip through the dispatcher), with one exception: an LSTM/GRU call counts as one op
  forward and one backward, whatever the CPU kernel runs inside it, because on CUDA each is
  one cuDNN call;
- syncs: host reads of a tensor's value (`item()`, `tolist()`, `int()`, `float()`, `bool()`),
  each of which waits for the GPU when the tensor lives there. Host-side index arithmetic is
  numpy, so it does not count.

The floor is a bare packed LSTM forward and backward over the same batch, counted the same way.
"""

from __future__ import annotations

import collections
import contextlib
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from mtl.config import apply_overrides
from mtl.models.encoders.bilstm import BiLSTMEncoder
from mtl.train.config.train_config import TrainConfig
from mtl.train.data.training_data import TrainingData
from mtl.train.loop.trainer import Trainer

RECURRENT_OPS = ("aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu")
BACKWARD = "autograd::engine::evaluate_function"
READS = ("item", "tolist", "__int__", "__float__", "__bool__", "__index__")
# Every Siamese encoder on frozen vectors; the BiLSTMs on the packed kernel they run on CUDA.
ENCODERS = (
    "bilstm",
    "bilstm2",
    "lstm",
    "gru",
    "transformer",
    "innerattention",
    "hconvnet",
    "gatedconv",
    "decomposable",
)
PACKED = ("bilstm", "bilstm2")
WARMUP = 2  # steps before the counted one: the optimizer's state is made on its first step
HIDDEN = 256  # ops do not depend on the width; a narrow model makes the warm-up steps quick


@dataclass
class Counted:
    encoder: str
    step: HostWork
    floor: HostWork


def run(base: TrainConfig, data: TrainingData, only: str, task: str) -> list[Counted]:
    """Count one `task` step of every encoder (or those `only` names, comma-separated prefixes)."""
    chosen = [e for e in ENCODERS if not only or any(e.startswith(p.strip()) for p in only.split(","))]
    counted = []
    with tempfile.TemporaryDirectory() as scratch:
        for encoder in chosen:
            config = apply_overrides(base, [f"encoder={encoder}", f"hidden={HIDDEN}", "precision=fp32"])
            trainer = Trainer(config, Path(scratch) / encoder, data=data, progress=False)
            with kernel(BiLSTMEncoder, "packed" if encoder in PACKED else BiLSTMEncoder.kernel):
                counted.append(Counted(encoder, *count_step(trainer, task)))
    return counted


def count_step(trainer: Trainer, task: str) -> tuple[HostWork, HostWork]:
    """One step of `task` as the trainer takes it (after `WARMUP` steps), and the packed-LSTM floor
    over the same batch."""
    stream = trainer.run.setup.streams[task]
    for _ in range(WARMUP):
        trainer.train_step({task: stream.next()[0]})
    rows = stream.next()[0]
    step = count_host_work(lambda: trainer.train_step({task: rows}))
    embedding = trainer.run.model.encoder.embedding
    lstm = nn.LSTM(embedding.embedding_dim, HIDDEN, bidirectional=True, batch_first=True).to(
        trainer.run.device
    )
    sentences = trainer.run.data.examples[task]["train"].sentences[rows]
    columns = trainer.run.data.table.batch_columns(sentences, trainer.run.device)
    return step, count_host_work(packed_lstm_floor(lstm, embedding, columns))


@contextlib.contextmanager
def kernel(encoder_class: type[BiLSTMEncoder], name: str) -> Iterator[None]:
    before, encoder_class.kernel = encoder_class.kernel, name
    try:
        yield
    finally:
        encoder_class.kernel = before


@dataclass
class HostWork:
    """What one call dispatched: aten ops (recurrent calls as one each way) and host reads."""

    ops: int
    syncs: int
    by_op: dict[str, int] = field(default_factory=dict)


def count_host_work(step: Callable[[], object]) -> HostWork:
    """Run `step` once under the profiler and count its ops and host reads (see the module)."""
    with count_reads() as reads, profile(activities=[ProfilerActivity.CPU]) as profiler:
        step()
    events = profiler.events()
    inside_recurrent, recurrent_calls = set(), 0
    for event in events:  # the autograd nodes a recurrent call's forward made
        if event.name in RECURRENT_OPS and not _has_ancestor(event, RECURRENT_OPS):
            recurrent_calls += 1
            inside_recurrent.update(e.sequence_nr for e in _descendants(event) if e.sequence_nr >= 0)
            inside_recurrent.add(event.sequence_nr)
    by_op: collections.Counter[str] = collections.Counter()
    recurrent_backward = False
    for event in events:
        if not event.name.startswith("aten::") or _has_ancestor(event, RECURRENT_OPS):
            continue
        node = next((a for a in _ancestors(event) if a.name.startswith(BACKWARD)), None)
        if node is not None and node.sequence_nr in inside_recurrent:
            recurrent_backward = True
            continue
        by_op[event.name] += 1
    # A recurrent call's backward runs as one op on cuDNN: one per call.
    ops = sum(by_op.values()) + (recurrent_calls if recurrent_backward else 0)
    return HostWork(ops, sum(reads.values()), dict(by_op.most_common()))


@contextlib.contextmanager
def count_reads() -> Iterator[collections.Counter[str]]:
    """Count calls of the tensor methods that read a value back to the host, while inside."""
    counts: collections.Counter[str] = collections.Counter()
    originals = {name: getattr(torch.Tensor, name) for name in READS}

    def counting(name: str, original):
        def read(self, *args, **kwargs):
            counts[name] += 1
            return original(self, *args, **kwargs)

        return read

    for name, original in originals.items():
        setattr(torch.Tensor, name, counting(name, original))
    try:
        yield counts
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)


def packed_lstm_floor(lstm: nn.LSTM, embedding: nn.Embedding, columns) -> Callable[[], None]:
    """A bare packed LSTM forward and backward over every sentence of a batch's `columns`."""

    def step() -> None:
        width = max(tokens.shape[1] for tokens, _ in columns)
        tokens = torch.cat([nn.functional.pad(t, (0, width - t.shape[1])) for t, _ in columns])
        lengths = torch.cat([n for _, n in columns])
        packed = nn.utils.rnn.pack_padded_sequence(
            embedding(tokens), lengths, batch_first=True, enforce_sorted=False
        )
        lstm(packed)[0].data.sum().backward()

    return step


def _ancestors(event) -> Iterator:
    parent = event.cpu_parent
    while parent is not None:
        yield parent
        parent = parent.cpu_parent


def _descendants(event) -> Iterator:
    stack = list(event.cpu_children)
    while stack:
        child = stack.pop()
        yield child
        stack.extend(child.cpu_children)


def _has_ancestor(event, names: tuple[str, ...]) -> bool:
    return any(a.name in names for a in _ancestors(event))


def report(counted: list[Counted]) -> str:
    """A line per encoder, `<encoder> ops/step N syncs/step S floor F`, then its most frequent ops."""
    lines = []
    for row in counted:
        kernel = "packed, as on CUDA" if row.encoder in PACKED else "this device's kernel"
        lines.append(
            f"{row.encoder} ops/step {row.step.ops} syncs/step {row.step.syncs} floor {row.floor.ops}"
        )
        top = ", ".join(f"{op.removeprefix('aten::')} {n}" for op, n in list(row.step.by_op.items())[:6])
        lines.append(f"    ({kernel}; most frequent: {top})")
    return "\n".join(lines)
