"""Sentence encoders, one per file, chosen by name through `ENCODERS` (config.py: torch-free).

The package's own names configure and check an encoder without torch; the encoders
themselves (`base.Encoder`, `base.build_encoder`) are imported from their modules.
"""

from mtl.models.encoders.config import ENCODERS, MAX_POSITIONS, EncoderConfig, EncoderTraits, register, traits

__all__ = ["ENCODERS", "MAX_POSITIONS", "EncoderConfig", "EncoderTraits", "register", "traits"]
