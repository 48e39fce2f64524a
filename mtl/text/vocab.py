"""The training vocabulary and its frozen embedding matrix."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from mtl.text.vectors import WordVectors

PAD, UNK = "<pad>", "<unk>"
UNKNOWN_ID = 1  # the id of UNK: any word outside the vocabulary


class Vocabulary:
    """Word <-> id; id 0 pads, id 1 stands for any word outside the vocabulary."""

    def __init__(self, words: Iterable[str]):
        self.words = [PAD, UNK, *(w for w in dict.fromkeys(words) if w not in (PAD, UNK))]
        self.index = {word: i for i, word in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def ids(self, tokens: Sequence[str]) -> np.ndarray:
        unk = self.index[UNK]
        return np.fromiter((self.index.get(t, unk) for t in tokens), dtype=np.int64, count=len(tokens))

    @classmethod
    def build(
        cls, training: Iterable[Sequence[str]], evaluation: Iterable[Sequence[str]], vectors: WordVectors
    ) -> Vocabulary:
        """Every training word, plus evaluation words that have a vector (frozen, so no leak)."""
        words = dict.fromkeys(word for tokens in training for word in tokens)
        words.update(dict.fromkeys(w for tokens in evaluation for w in tokens if w in vectors))
        return cls(words)


def embedding_matrix(vocabulary: Vocabulary, vectors: WordVectors, seed: int) -> np.ndarray:
    """GloVe rows where a vector exists, else a fixed U(-0.1, 0.1) draw (InferSent); padding is 0."""
    rng = np.random.default_rng(seed)
    matrix = rng.uniform(-0.1, 0.1, size=(len(vocabulary), vectors.dim)).astype(np.float32)
    matrix[0] = 0.0
    for i, word in enumerate(vocabulary.words):
        row = vectors.index.get(word)
        if row is not None:
            matrix[i] = vectors.matrix[row]
    return matrix
