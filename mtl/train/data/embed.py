"""Sentence embeddings of a run's indexed sentences, batched by length: what evaluation and the
linear probe of a `train=false` task build their features from."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from mtl.data.batches import SentenceTable, longest_first_batches
from mtl.runtime.device import to_device


def embed_rows(
    encoder,
    table: SentenceTable,
    rows: np.ndarray,
    batch_size: int,
    device: torch.device,
    advance: Callable[[int], object] = lambda done: None,
) -> torch.Tensor:
    """Embeddings (len(rows), D) of table rows, batched by length; `advance(n)` after n rows."""
    out = None
    for chosen in longest_first_batches(table.lengths[rows], batch_size):
        tokens, lengths = table.batch(rows[chosen])
        embedded = encoder(to_device(tokens, device), lengths)
        if out is None:
            out = torch.empty(len(rows), embedded.shape[1], device=device)
        out[to_device(torch.from_numpy(chosen), device)] = embedded.float()
        advance(len(chosen))
    return out
