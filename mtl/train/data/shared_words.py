"""Which words an exported encoder carries: none from data the run did not train on.

A run's vocabulary (what checkpoints hold, so a resume indexes the same rows) is every word
of every task's training data plus the evaluation words that have a vector. Its training
words without a vector get a fixed random row, learned from only through the examples that
held them. The exported encoder (encoder.json, the sentence-transformers folder, the W&B
encoder artifact: the files users share) keeps padding, the unknown word, the words of the
public vectors file, and the words of the training examples the run's batches actually held.
A task that never trained (a received preset naming a private corpus, stopped by max_steps
before its turn) leaves no word in it; any other word maps to the unknown vector there.
`just export-encoder vocabulary=public` keeps the vectors file's words alone, for sharing an
encoder trained on private text.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from mtl.data.batches import TaskStream
from mtl.train.data.training_data import TrainingData


def trained_rows(data: TrainingData, streams: Mapping[str, TaskStream]) -> np.ndarray:
    """Vocabulary ids to export, in order: padding, the unknown word, words with a public vector,
    and the words of the training examples `streams` have given."""
    table = data.table
    trained = np.zeros(len(table.lengths), dtype=bool)  # per sentence of the table
    for task, stream in streams.items():
        trained[data.examples[task]["train"].sentences[stream.seen()].ravel()] = True
    keep = public_rows_mask(data)
    keep[table.ids[np.repeat(trained, table.lengths)]] = True  # every token of those sentences
    return np.flatnonzero(keep)


def public_rows_mask(data: TrainingData) -> np.ndarray:
    """(V,) True for padding, the unknown word and the words of the public vectors file."""
    keep = np.array(data.public, dtype=bool, copy=True)
    keep[:2] = True
    return keep
