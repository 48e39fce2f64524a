"""Sentence encoders, one per file, chosen by name through `ENCODERS`."""

from mtl.models.encoders import bilstm, bilstm2, decomposable, hf, lstm, transformer  # noqa: F401  (register)
from mtl.models.encoders.base import ENCODERS, Encoder, EncoderConfig, build_encoder

__all__ = ["ENCODERS", "Encoder", "EncoderConfig", "build_encoder"]
