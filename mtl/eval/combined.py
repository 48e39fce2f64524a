"""Several encoders as one: each sentence's embeddings concatenated, in the order given.

Skip-Thought's combine-skip (uni-skip and bi-skip side by side) and Quick-Thoughts'
concatenations of separately trained models are evaluated this way: the transfer
classifiers see one longer vector. Each part encodes with its own tokenizer, vocabulary and
vectors, exactly as it would alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mtl.errors import UserError
from mtl.eval.encoder import SentenceEncoder
from mtl.text.coverage import Coverage


class CombinedEncoder:
    """Quacks like a `SentenceEncoder` where transfer and neighbours use one."""

    def __init__(self, parts: Sequence[SentenceEncoder]):
        if len(parts) < 2:
            raise UserError("combining encoders needs two at least: run=runs/a,runs/b")
        self.parts = list(parts)
        self.name = "+".join(part.name for part in self.parts)
        self.vectors = self.parts[0].vectors

    @property
    def dim(self) -> int:
        return sum(part.dim for part in self.parts)

    @property
    def coverage(self) -> Coverage | None:
        return self.parts[0].coverage  # the first part's vocabulary: the others report their own

    def encode(self, sentences, batch_size: int = 128, pooling: str | None = None, **options) -> np.ndarray:
        """The parts' embeddings of `sentences`, concatenated ((N, sum of dims); one string: 1-D)."""
        return np.concatenate(
            [
                part.encode(sentences, batch_size=batch_size, pooling=pooling, **options)
                for part in self.parts
            ],
            axis=-1,
        )

    def token_states(self, sentences, batch_size: int = 128):
        raise UserError(
            "pooling=selfattn trains attention over one encoder's states: transfer the runs one by one"
        )
