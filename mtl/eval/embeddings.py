"""What `encode()` hands back, as sentence-transformers' `encode` does: truncated, normalized,
quantized, and as numpy, torch or a list of tensors.

Quantization follows `sentence_transformers.quantization.quantize_embeddings` so an index
built from one library's int8 or binary embeddings takes the other's: int8/uint8 split each
dimension's observed range into 256 steps, binary/ubinary keep the sign bits, 8 to a byte.
"""

from __future__ import annotations

import numpy as np
import torch

from mtl.errors import UserError

PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")


def finished(
    embeddings: torch.Tensor,
    *,
    normalize: bool,
    truncate_dim: int | None,
    precision: str,
    to_numpy: bool,
    to_tensor: bool,
) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
    """`embeddings` (N, D) in the form asked for; a float32 result is never copied twice."""
    if truncate_dim is not None:
        embeddings = embeddings[:, :truncate_dim]  # Matryoshka: the first dimensions, before normalizing
    if normalize:
        embeddings = torch.nn.functional.normalize(embeddings, p=2, dim=1)
    if precision != "float32":
        embeddings = torch.from_numpy(quantized(embeddings.cpu().numpy(), precision))
    if to_tensor:
        return embeddings
    if to_numpy:
        return embeddings.cpu().numpy()
    return list(embeddings)


def quantized(embeddings: np.ndarray, precision: str) -> np.ndarray:
    """float32 (N, D) embeddings at `precision`: int8/uint8 (N, D), binary/ubinary (N, ceil(D/8))."""
    if precision in ("binary", "ubinary"):
        packed = np.packbits(embeddings > 0, axis=1)
        return (packed.astype(np.int16) - 128).astype(np.int8) if precision == "binary" else packed
    if len(embeddings) < 2:
        raise UserError(
            f"encode(precision={precision!r}) calibrates each dimension's range on the sentences "
            "encoded together: give at least two (or quantize later with your own ranges)"
        )
    low, high = embeddings.min(axis=0), embeddings.max(axis=0)
    steps = (high - low) / 255
    steps[steps == 0] = 1  # a constant dimension: every value falls in the first bucket
    buckets = np.clip(np.floor((embeddings - low) / steps), 0, 255)
    return (buckets - 128).astype(np.int8) if precision == "int8" else buckets.astype(np.uint8)


def checked_options(precision: str, truncate_dim: object, width: int, output_value: str | None) -> None:
    """A one-line error for an option sentence-transformers takes but with a value mtl cannot honour."""
    if precision not in PRECISIONS:
        raise UserError(f"encode(precision={precision!r}): choose one of {', '.join(PRECISIONS)}")
    if truncate_dim is not None and (
        isinstance(truncate_dim, bool) or not isinstance(truncate_dim, int) or not 0 < truncate_dim <= width
    ):
        raise UserError(
            f"encode(truncate_dim={truncate_dim!r}): give a number of dimensions from 1 to {width}"
        )
    if output_value not in ("sentence_embedding", "token_embeddings", None):
        raise UserError(
            f"encode(output_value={output_value!r}): choose sentence_embedding, token_embeddings or None"
        )
