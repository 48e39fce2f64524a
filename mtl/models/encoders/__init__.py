"""Sentence encoders, one per file, chosen by name through `ENCODERS`."""

from mtl.models.encoders import bilstm, bilstm2, decomposable, gru, hf, lstm, transformer  # noqa: F401  (register)
from mtl.models.encoders.base import ENCODERS, Encoder, EncoderConfig, EncoderTraits, build_encoder, traits

__all__ = ["ENCODERS", "Encoder", "EncoderConfig", "EncoderTraits", "build_encoder", "traits"]
