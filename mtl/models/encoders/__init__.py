"""Sentence encoders, one per file, chosen by name through `ENCODERS`."""

from mtl.models.encoders import (  # noqa: F401  (register)
    bilstm,
    bilstm2,
    decomposable,
    gru,
    hconvnet,
    hf,
    innerattention,
    lstm,
    transformer,
)
from mtl.models.encoders.base import ENCODERS, Encoder, EncoderConfig, EncoderTraits, build_encoder, traits

__all__ = ["ENCODERS", "Encoder", "EncoderConfig", "EncoderTraits", "build_encoder", "traits"]
