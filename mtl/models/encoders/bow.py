"""Bag of words: a sentence as the pooled vectors of its known words (mean by default, or sum,
max, max+mean).

Over frozen GloVe it is SentEval's and InferSent's GloVe BoW baseline (`just transfer
baseline=glove-bow`); with `embeddings=trainable` the vectors learn from the task, as the
Quick-Thoughts BoW encoder of Appendix B (embedding size 300, 1,500 candidates, context 7).
Words without a vector (the unknown id) are left out, as SentEval's bag of words leaves them
out; a sentence of such words only embeds as zeros. `hidden=` does not apply: the embedding is the word vectors' width.
"""

from __future__ import annotations

import torch
from torch import nn

from mtl.models.encoders.base import Encoder, EncoderConfig, Pooling, register
from mtl.text.vocab import UNKNOWN_ID


class BagOfWordsEncoder(Encoder):
    def __init__(self, embedding: nn.Module, pooling: Pooling):
        super().__init__(embedding)
        self.set_pooling(embedding.embedding_dim, pooling)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        known = tokens > UNKNOWN_ID  # (B, T): neither padding nor a word without a vector
        pooled = self.pool_states(self.embedding(tokens), known)  # (B, output_dim)
        # max over no position is -inf: such a sentence embeds as zeros, as mean and sum give
        return torch.where(known.any(dim=1, keepdim=True), pooled, 0.0)


@register("bow")
def build(embedding: nn.Module, config: EncoderConfig) -> BagOfWordsEncoder:
    return BagOfWordsEncoder(embedding, config.pooling)
