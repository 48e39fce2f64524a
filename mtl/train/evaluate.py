"""A task's metric summed over examples; Siamese heads encode each distinct sentence once."""

from __future__ import annotations

import numpy as np
import torch

from mtl import metrics
from mtl.data.batches import SentenceTable, TaskExamples, contiguous_batches
from mtl.device import to_device
from mtl.distributed import Distributed
from mtl.models.heads import MultitaskModel, TaskHead
from mtl.precision import autocast
from mtl.tasks import Task


def evaluate_tasks(
    model: MultitaskModel, data, split: str, run, dist: Distributed, device: torch.device
) -> dict[str, float]:
    """Each task's metric on `split` (where it has one); each rank scores its share of the examples.

    `data`: the run's TrainingData; `run`: its RunConfig (precision, eval_batch).
    """
    results = {}
    for name, task in data.tasks.items():
        if split not in data.examples[name]:
            continue
        examples = data.examples[name][split]
        if task.corpus_metric:
            values = _corpus_metrics(model, task, examples, data.table, run, dist, device)
            results.update({metrics.evaluation(name, split, key): v for key, v in values.items()})
            continue
        if task.in_batch:  # whole batches of the training size, dealt to the ranks in turn
            batches = contiguous_batches(len(examples), task.config.batch)[dist.rank :: dist.world_size]
            share = examples.subset(np.concatenate(batches)) if batches else examples.subset(np.arange(0))
        else:
            share = examples.subset(dist.part(len(examples)))
        with autocast(run.precision, device):
            total = metric_sum(model, task, share, data.table, run.eval_batch, device)
        results[metrics.evaluation(name, split, task.metric)] = dist.sum([total])[0] / len(examples)
    return results


def _corpus_metrics(model, task: Task, examples, table, run, dist: Distributed, device) -> dict[str, float]:
    """`task.corpus_metrics` of the whole split: each rank's outputs, gathered on every rank."""
    share = examples.subset(dist.part(len(examples)))
    with torch.inference_mode(), autocast(run.precision, device):
        was_training = model.training
        model.eval()
        try:
            outputs = _batched_outputs(model, task.name, share, table, run.eval_batch, device)
        finally:
            model.train(was_training)
    every = dist.gather_objects(outputs.float().cpu().numpy())
    return task.corpus_metrics(np.concatenate(every), examples.labels)


@torch.inference_mode()
def metric_sum(
    model: MultitaskModel,
    task: Task,
    examples: TaskExamples,
    table: SentenceTable,
    batch_size: int,
    device: torch.device,
) -> float:
    """The sum of `task`'s metric over `examples` (a sum, so ranks' shares add up; accuracy: correct ones)."""
    if len(examples) == 0:
        return 0.0
    was_training = model.training
    model.eval()
    try:
        head = model.heads[task.name]
        if task.in_batch:
            return _in_batch_sum(model, task, examples, table, device)
        if isinstance(head, TaskHead) and not model.encoder.pair_model:
            outputs = _siamese_outputs(model.encoder, head, examples, table, batch_size, device)
        else:
            outputs = _batched_outputs(model, task.name, examples, table, batch_size, device)
        total = 0.0
        for start in range(0, len(examples), 4096):
            labels = torch.from_numpy(examples.labels[start : start + 4096]).to(device)
            total += task.scores(outputs[start : start + 4096], labels).sum().item()
        return total
    finally:
        model.train(was_training)


def _in_batch_sum(model, task: Task, examples: TaskExamples, table, device) -> float:
    """Each batch of `task.config.batch` consecutive examples scored against itself, as in training."""
    total = 0.0
    for rows in contiguous_batches(len(examples), task.config.batch):
        outputs = model(task.name, table.batch_columns(examples.sentences[rows], device))
        labels = torch.from_numpy(examples.labels[rows]).to(device)
        total += task.scores(outputs, labels).sum().item()
    return total


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


def _siamese_outputs(encoder, head: TaskHead, examples, table, batch_size, device) -> torch.Tensor:
    rows, inverse = np.unique(examples.sentences, return_inverse=True)
    inverse = torch.from_numpy(inverse.reshape(examples.sentences.shape)).to(device)
    embedded = embed_rows(encoder, table, rows, batch_size, device)
    outputs = []
    for start in range(0, len(examples), 4096):
        columns = inverse[start : start + 4096]
        features = head.recipe.features(*(embedded[columns[:, k]] for k in range(columns.shape[1])))
        outputs.append(head.classifier(features))
    return torch.cat(outputs)


def _batched_outputs(model, task: str, examples, table, batch_size, device) -> torch.Tensor:
    outputs = []
    for start in range(0, len(examples), batch_size):
        rows = examples.sentences[start : start + batch_size]
        outputs.append(model(task, table.batch_columns(rows, device)))
    return torch.cat(outputs)
