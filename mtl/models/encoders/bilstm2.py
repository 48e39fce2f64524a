"""Two stacked BiLSTM layers (Liu et al. 2018, Section 3.1: "2-layer Bidirectional LSTM")."""

from __future__ import annotations

from torch import nn

from mtl.models.encoders.base import EncoderConfig, register
from mtl.models.encoders.bilstm import BiLSTMEncoder


@register("bilstm2")
def build(embedding: nn.Embedding, config: EncoderConfig) -> BiLSTMEncoder:
    return BiLSTMEncoder(
        embedding, config.hidden, layers=2, pooling=config.pooling, dropout=config.encoder_dropout
    )
