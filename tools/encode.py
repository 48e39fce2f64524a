"""`just bench-encode`: sentences/s of mtl's `encode()` next to an InferSent-style encoder.

The same distinct sentences (SNLI dev + test: 25,741 with the full splits), raw strings in,
float32 vectors out, tokenization included, on the same BiLSTM-max weights over 300-d
inputs (random vectors for the sentences' words when the vectors file is not 300-d: the
cost is the same), each contender timed `runs` times, interleaved, median reported:

- `reference`: InferSent's `encode()` (Conneau et al. 2017, `models.py`): sentences sorted
  by length, batches of `batch` (64), each batch's word vectors gathered on the host from a
  word -> vector dict into a (T, B, 300) array, copied to the device, `pack_padded_sequence`,
  the LSTM, `pad_packed_sequence`, max over time, copied back to the host per batch. Its
  tokenizer is the same as mtl's here (InferSent's NLTK `word_tokenize` would only add to
  its time), so the comparison is of what happens after.
- `mtl`: `SentenceEncoder.encode(sentences)` as a user calls it;
- `mtl tokens`: the same with `batch_tokens=` (batches sized by padded tokens, not sentences:
  hundreds of short sentences per call, a few long ones);
- `mtl bf16`: `encode(compute_dtype="bf16")`, where the device computes bf16 natively (a CPU
  with AVX512-BF16 or AMX, a GPU), with how far its embeddings are from the fp32 ones.

A second, instrumented pass of mtl's encode splits its time into tokenize (text -> ids),
batch (ids -> padded tensors on the device), encode (the encoder's forward, synchronized)
and copy (vectors back to the host): where the time goes.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from mtl.config import apply_overrides
from mtl.data.batches import longest_first_batches
from mtl.data.snli import snli_sentences
from mtl.eval.encoder import SentenceEncoder
from mtl.models.encoders.base import EncoderConfig, build_encoder, frozen_embedding
from mtl.models.precision import bf16_supported
from mtl.runtime.device import resolve_device, to_device
from mtl.text.tokenizer import Tokenizer
from mtl.text.vocab import Vocabulary

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from tools.configs import BenchEncodeConfig as BenchEncodeConfig

INPUT_DIM = 300  # glove.840B.300d, the paper's vectors


class InferSentStyle:
    """InferSent's encode(): host-side word vectors per batch, packed LSTM, max, copy back per batch."""

    def __init__(self, lstm: nn.LSTM, vectors: dict[str, np.ndarray], tokenizer: Tokenizer, device):
        self.lstm, self.vectors, self.tokenizer, self.device = lstm, vectors, tokenizer, device
        self.dim = next(iter(vectors.values())).shape[0]

    def encode(self, sentences: list[str], batch_size: int) -> np.ndarray:
        words = [
            [w for w in tokens if w in self.vectors] or ["</s>"]
            for tokens in self.tokenizer.tokenize(sentences)
        ]
        lengths = np.array([len(w) for w in words])
        order = np.argsort(-lengths, kind="stable")
        out = []
        with torch.inference_mode():
            for start in range(0, len(words), batch_size):
                chosen = order[start : start + batch_size]
                batch = np.zeros((lengths[chosen[0]], len(chosen), self.dim), dtype=np.float32)
                for column, index in enumerate(chosen):
                    for row, word in enumerate(words[index]):
                        batch[row, column] = self.vectors[word]
                packed = pack_padded_sequence(
                    torch.from_numpy(batch).to(self.device), lengths[chosen].tolist()
                )
                states = pad_packed_sequence(self.lstm(packed)[0])[0]  # (T, B, 2H), zeros at padding
                out.append(torch.max(states, 0)[0].cpu().numpy())
        embeddings = np.vstack(out)
        return embeddings[np.argsort(order, kind="stable")]


def run(bench: BenchEncodeConfig) -> dict:
    if bench.threads and not torch.cuda.is_available():
        torch.set_num_threads(bench.threads)
    device = resolve_device(bench.device)
    sentences = distinct_sentences(bench)
    tokenizer = Tokenizer(lowercase=True)
    words = sorted({w for tokens in tokenizer.tokenize(sentences) for w in tokens})
    rng = np.random.default_rng(0)
    matrix = rng.normal(0, 0.4, size=(len(words) + 2, INPUT_DIM)).astype(np.float32)
    matrix[0] = 0.0
    torch.manual_seed(0)
    encoder = build_encoder(
        frozen_embedding(torch.from_numpy(matrix)),
        EncoderConfig(encoder="bilstm", hidden=bench.hidden, pooling="max"),
    )
    ours = SentenceEncoder(encoder, Vocabulary(words), tokenizer, None, device, name="bench")
    lstm = ours.encoder.lstm
    reference = InferSentStyle(
        lstm, {w: matrix[i + 2] for i, w in enumerate(words)} | {"</s>": matrix[1]}, tokenizer, device
    )

    def first_time(**options):  # as a sentence list encoded for the first time: tokenized
        return lambda: (ours.token_cache.clear(), ours.encode(sentences, **options))

    contenders = {
        "reference": lambda: reference.encode(sentences, bench.batch),
        "mtl": first_time(batch_size=bench.encode_batch),
        # the same sentences encoded again (monitor=, the transfer suite): their tokens cached
        "mtl again": lambda: ours.encode(sentences, batch_size=bench.encode_batch),
    }
    if bench.batch_tokens:
        contenders["mtl tokens"] = first_time(batch_size=bench.batch_tokens, batch_tokens=bench.batch_tokens)
    bf16 = bf16_supported(device)
    if bf16:
        contenders["mtl bf16"] = first_time(batch_size=bench.encode_batch, compute_dtype="bf16")
    for encode in contenders.values():  # warm up: kernels, allocator, spaCy's caches
        encode()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(bench.runs):
        for name, encode in contenders.items():
            times[name].append(timed(encode, device))
    return {
        "device": str(device),
        "threads": torch.get_num_threads(),
        "sentences": len(sentences),
        "hidden": bench.hidden,
        "batch": bench.batch,
        "encode_batch": bench.encode_batch,
        "batch_tokens": bench.batch_tokens,
        "seconds": {name: statistics.median(values) for name, values in times.items()},
        "split": split_times(ours, sentences, bench.encode_batch, device),
        "bf16_drift": bf16_drift(ours, sentences, bench.encode_batch) if bf16 else None,
    }


def bf16_drift(ours: SentenceEncoder, sentences: list[str], batch_size: int) -> dict[str, float]:
    """How far bf16 compute moves the embeddings from fp32's: the largest difference of a value,
    and the cosine of each sentence's two embeddings."""
    full = ours.encode(sentences, batch_size=batch_size)
    half = ours.encode(sentences, batch_size=batch_size, compute_dtype="bf16")
    cosines = (full * half).sum(1) / np.maximum(
        np.linalg.norm(full, axis=1) * np.linalg.norm(half, axis=1), 1e-12
    )
    return {
        "max_abs_difference": float(np.abs(full - half).max()),
        "max_abs_value": float(np.abs(full).max()),
        "min_cosine": float(cosines.min()),
        "median_cosine": float(np.median(cosines)),
    }


def distinct_sentences(bench: BenchEncodeConfig) -> list[str]:
    """Every distinct premise and hypothesis of the chosen SNLI splits, in file order."""
    sentences = snli_sentences(bench.snli, [split.strip() for split in bench.splits.split(",")])
    return sentences[: bench.limit] if bench.limit else sentences


def timed(action, device: torch.device) -> float:
    synchronize(device)
    started = time.perf_counter()
    action()
    synchronize(device)
    return time.perf_counter() - started


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def split_times(ours: SentenceEncoder, sentences: list[str], batch_size: int, device) -> dict[str, float]:
    """encode()'s stages timed apart (each synchronized, so their sum exceeds a plain call a little)."""
    stages = dict.fromkeys(("tokenize", "batch", "encode", "copy"), 0.0)
    started = time.perf_counter()
    ours.token_cache.clear()  # the stages of a first encode(): tokenizing included
    ids = ours.token_ids(sentences)
    stages["tokenize"] = time.perf_counter() - started
    lengths = np.array([len(i) for i in ids])
    with torch.inference_mode():
        for chosen in longest_first_batches(lengths, batch_size):
            clock = time.perf_counter()
            batch = np.zeros((len(chosen), lengths[chosen].max()), dtype=np.int64)
            for row, index in enumerate(chosen):
                batch[row, : lengths[index]] = ids[index]
            tokens = to_device(torch.from_numpy(batch), device)
            synchronize(device)
            stages["batch"] += time.perf_counter() - clock
            clock = time.perf_counter()
            embedded = ours.encoder(tokens, torch.from_numpy(lengths[chosen]))
            synchronize(device)
            stages["encode"] += time.perf_counter() - clock
            clock = time.perf_counter()
            embedded.float().cpu().numpy()
            stages["copy"] += time.perf_counter() - clock
    return stages


def report(results: dict) -> str:
    seconds, count = results["seconds"], results["sentences"]
    lines = [
        f"bench-encode: {count:,} distinct SNLI sentences, BiLSTM-max {results['hidden']} over 300-d inputs, "
        f"{results['device']}, {results['threads']} thread(s); median of the runs",
        "",
        "| contender | seconds | sentences/s | vs reference |",
        "|---|---:|---:|---:|",
    ]
    batches = {
        "reference": f"batch {results['batch']}",
        "mtl": f"batch {results['encode_batch']}",
        "mtl again": f"batch {results['encode_batch']}, the same sentences again: tokens cached",
        "mtl tokens": f"{results.get('batch_tokens', 0):,} tokens per batch",
        "mtl bf16": f"batch {results['encode_batch']}, compute_dtype=bf16",
    }
    for name, value in seconds.items():
        lines.append(
            f"| {name} ({batches[name]}) | {value:.2f} | {count / value:,.0f} | {seconds['reference'] / value:.2f}x |"
        )
    split = results["split"]
    total = sum(split.values())
    lines += ["", "mtl's encode() by stage (one instrumented pass):", ""]
    lines += [f"- {stage}: {value:.2f} s ({100 * value / total:.0f}%)" for stage, value in split.items()]
    drift = results.get("bf16_drift")
    if drift is None:
        lines += [
            "",
            "bf16 compute: not timed: this device has no native bf16 (a CPU needs AVX512-BF16 or AMX)",
        ]
    else:
        lines += [
            "",
            f"bf16 compute against fp32: largest difference of a value {drift['max_abs_difference']:.4f} "
            f"(values up to {drift['max_abs_value']:.3f}); cosine of a sentence's two embeddings: "
            f"min {drift['min_cosine']:.5f}, median {drift['median_cosine']:.5f}",
        ]
    return "\n".join(lines)


def command(args: Sequence[str]) -> None:
    """The command line's `key=value` arguments onto BenchEncodeConfig; run; print what it gives."""
    print(report(run(apply_overrides(BenchEncodeConfig(), args))))
