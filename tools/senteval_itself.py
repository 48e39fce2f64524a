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
import types
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
    """SentEval calls `.cuda()` on every tensor and model, and its split classifier (SICK-E) moves
    its data `.to(torch.device('cuda'))`: without a GPU, stay on the CPU."""
    import torch

    if torch.cuda.is_available():
        return
    moved = torch.Tensor.to

    def on_the_cpu(device):
        return "cpu" if str(device).startswith("cuda") else device

    def to(self, *args, **kwargs):
        if "device" in kwargs:
            kwargs["device"] = on_the_cpu(kwargs["device"])
        return moved(
            self, *(on_the_cpu(a) if isinstance(a, torch.device | str) else a for a in args), **kwargs
        )

    torch.Tensor.to = to  # type: ignore[method-assign]
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


SENTEVAL_NAMES = {"SICK-E": "SICKEntailment", "SICK-R": "SICKRelatedness", "STS-B": "STSBenchmark"}


def _getargspec_as_before() -> None:
    """SentEval's utils.get_optimizer reads `inspect.getargspec(...)[0]`, gone since Python 3.11:
    its successor gives the same first field (the argument names)."""
    import inspect

    if not hasattr(inspect, "getargspec"):
        inspect.getargspec = inspect.getfullargspec  # type: ignore[attr-defined]


def _ragged_arrays_as_before(module) -> None:
    """SentEval's STS loader makes arrays of token lists of unequal lengths, which NumPy >= 1.24
    refuses (NumPy made them object arrays before, with a warning): in that module only, such an
    array is made as before, an object array of the lists."""
    real = module.np

    def array(value, *args, **kwargs):
        try:
            return real.array(value, *args, **kwargs)
        except ValueError:
            made = real.empty(len(value), dtype=object)
            for position, item in enumerate(value):
                made[position] = item
            return made

    module.np = types.SimpleNamespace(
        **{name: getattr(real, name) for name in dir(real) if not name.startswith("__") and name != "array"},
        array=array,
    )


def run(checkout: Path, data: Path, vectors: str, mode: str, tasks: list[str]) -> dict:
    """Each of mtl's task names scored by SentEval (under its own name): seconds, and the test
    accuracy of a classification task or the Pearson r of an STS year (its datasets' mean, as
    mtl's `all/pearson`)."""
    _cuda_as_no_op()
    _getargspec_as_before()
    sys.path.insert(0, str(checkout))
    import senteval.engine  # the user's SentEval
    import senteval.sts

    _ragged_arrays_as_before(senteval.sts)

    params = {"task_path": str(data), **senteval_params(mode)}
    engine = senteval.engine.SE(params, bag_of_vectors(vectors))
    results = {}
    for task in tasks:
        started = time.perf_counter()
        scores = engine.eval(SENTEVAL_NAMES.get(task, task))
        seconds = time.perf_counter() - started
        if "acc" in scores:
            results[task] = {"seconds": seconds, "acc": float(scores["acc"]) / 100}
        else:  # STS12-16: no classifier, the cosine's correlation over each dataset
            results[task] = {"seconds": seconds, "all/pearson": float(scores["all"]["pearson"]["mean"])}
    return results


def command_line(checkout: str, data: Path, vectors: str, mode: str, tasks: str) -> list[str]:
    """This module as a process of its own, on `tasks` (comma-separated): what the benches run."""
    return [
        sys.executable, "-m", "tools.senteval_itself", "--checkout", str(Path(checkout).expanduser()),
        "--data", str(data), "--vectors", vectors, "--mode", mode, "--tasks", tasks,
    ]  # fmt: skip


def compared_score(result: dict) -> float:
    """The score a task is compared by, in SentEval's results here or in mtl's report: its test
    accuracy, or an STS year's Pearson r."""
    return result["acc"] if "acc" in result else result["all/pearson"]


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
