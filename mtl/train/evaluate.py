"""Correct predictions of a task on examples; Siamese models encode each distinct sentence once."""

from __future__ import annotations

import numpy as np
import torch

from mtl.data.batches import SentenceTable, TaskExamples
from mtl.device import to_device
from mtl.models.heads import MultitaskModel


@torch.inference_mode()
def correct_predictions(
    model: MultitaskModel,
    task: str,
    examples: TaskExamples,
    table: SentenceTable,
    batch_size: int,
    device: torch.device,
) -> int:
    """How many of `examples` the model classifies right (a count, so ranks' shares add up)."""
    if len(examples) == 0:
        return 0
    was_training = model.training
    model.eval()
    try:
        if model.encoder.pair_model:
            predictions = _pair_predictions(model, task, examples, table, batch_size, device)
        else:
            predictions = _siamese_predictions(model, task, examples, table, batch_size, device)
    finally:
        model.train(was_training)
    return int((predictions == examples.labels).sum())


def embed_rows(
    encoder, table: SentenceTable, rows: np.ndarray, batch_size: int, device: torch.device
) -> torch.Tensor:
    """Embeddings (len(rows), D) of table rows, batched by length."""
    order = np.argsort(table.lengths[rows], kind="stable")
    out = None
    for start in range(0, len(rows), batch_size):
        chosen = order[start : start + batch_size]
        tokens, lengths = table.batch(rows[chosen])
        embedded = encoder(to_device(tokens, device), lengths)
        if out is None:
            out = torch.empty(len(rows), embedded.shape[1], device=device)
        out[to_device(torch.from_numpy(chosen), device)] = embedded.float()
    return out


def _siamese_predictions(model, task, examples, table, batch_size, device) -> np.ndarray:
    rows, inverse = np.unique(examples.sentences, return_inverse=True)
    inverse = torch.from_numpy(inverse.reshape(examples.sentences.shape)).to(device)
    embedded = embed_rows(model.encoder, table, rows, batch_size, device)
    head = model.heads[task]
    predictions = []
    for start in range(0, len(examples), 4096):
        columns = inverse[start : start + 4096]
        features = head.task.siamese(*(embedded[columns[:, k]] for k in range(columns.shape[1])))
        predictions.append(head.classifier(features).argmax(dim=-1).cpu())
    return torch.cat(predictions).numpy()


def _pair_predictions(model, task, examples, table, batch_size, device) -> np.ndarray:
    predictions = []
    for start in range(0, len(examples), batch_size):
        rows = examples.sentences[start : start + batch_size]
        predictions.append(model(task, table.batch_columns(rows, device)).argmax(dim=-1).cpu())
    return torch.cat(predictions).numpy()
