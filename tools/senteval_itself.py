"""SentEval itself, from a checkout the user gives (`just bench-transfer senteval=PATH`), scoring
the same bag of GloVe vectors mtl's `baseline=glove-bow tokenizer=whitespace` computes: its
`senteval`/`senteval-prototyping` configurations timed task by task beside mtl's.

It runs in a process of its own (`python -m tools.senteval_itself ...`, one JSON line out):
SentEval's code moves every tensor and model with `.cuda()`, which on a machine without a GPU
is made a no-op here, in that process only, so that mtl's own process keeps torch as it is.
The batcher is SentEval's bag-of-words example's (examples/bow.py) with the vectors loaded once
before the clock starts (as mtl's suite loads them once): the mean of the lowercased words'
GloVe vectors, the words without one left out, zeros for a sentence with none.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from mtl.eval.transfer.classifiers import Protocol
from mtl.text.vectors import vector_store

MODES = ("senteval", "senteval-prototyping")


def senteval_params(mode: str) -> dict:
    """SentEval's `params` for `mode`, taken from the very settings mtl's own mode of that name
    fits with (SentEvalParams), so the two sides cannot drift apart."""
    settings = Protocol.named(mode).senteval
    classifier = ("nhid", "optim", "batch_size", "tenacity", "epoch_size", "max_epoch", "dropout")
    return {
        "usepytorch": True,
        "kfold": settings.kfold,
        "seed": settings.seed,
        "classifier": {key: getattr(settings, key) for key in classifier},
    }


def _cuda_as_no_op() -> None:
    """SentEval calls `.cuda()` on every tensor and model: without a GPU, stay on the CPU."""
    import torch

    if torch.cuda.is_available():
        return
    torch.Tensor.cuda = lambda self, *args, **kwargs: self  # type: ignore[method-assign]
    torch.nn.Module.cuda = lambda self, *args, **kwargs: self  # type: ignore[method-assign]
    torch.cuda.manual_seed = lambda seed: None  # type: ignore[assignment]


def bag_of_vectors(vectors_file: str):
    """SentEval's batcher over the vectors' words (loaded once, as mtl's suite does)."""
    store = vector_store(vectors_file)
    index, matrix = store.index, store.matrix
    dim = store.dim

    def batcher(params, batch):
        embeddings = []
        for sentence in batch:
            rows = [index[w] for w in (word.lower() for word in sentence) if w in index]
            embeddings.append(matrix[rows].mean(axis=0) if rows else np.zeros(dim, dtype=np.float32))
        return np.vstack(embeddings)

    return batcher


def run(checkout: Path, data: Path, vectors: str, mode: str, tasks: list[str]) -> dict:
    _cuda_as_no_op()
    sys.path.insert(0, str(checkout))
    import senteval.engine  # the user's SentEval

    params = {"task_path": str(data), **senteval_params(mode)}
    engine = senteval.engine.SE(params, bag_of_vectors(vectors))
    results = {}
    for task in tasks:
        started = time.perf_counter()
        scores = engine.eval(task)  # the tasks compared keep SentEval's names
        results[task] = {
            "seconds": time.perf_counter() - started,
            "acc": float(scores["acc"]) / 100,
        }
    return results


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", required=True, type=Path)
    parser.add_argument("--data", required=True, type=Path)  # the folder holding downstream/
    parser.add_argument("--vectors", required=True)
    parser.add_argument("--mode", required=True, choices=MODES)
    parser.add_argument("--tasks", required=True)
    args = parser.parse_args(argv)
    results = run(args.checkout, args.data, args.vectors, args.mode, args.tasks.split(","))
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
