"""A task's metric summed over examples; Siamese heads encode each distinct sentence once."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from tqdm.auto import tqdm

from mtl import metrics
from mtl.console import progress_stream
from mtl.data.batches import SentenceTable, TaskExamples, contiguous_batches
from mtl.models.heads import MultitaskModel, TaskHead
from mtl.models.precision import autocast
from mtl.runtime.distributed import Distributed
from mtl.tasks.base import Task
from mtl.train.data.embed import embed_rows
from mtl.train.data.probe import probed_metrics


def evaluate_tasks(
    model: MultitaskModel,
    data,
    split: str,
    run,
    dist: Distributed,
    device: torch.device,
    progress: bool = False,
    only: str | None = None,
) -> dict[str, float]:
    """Each task's metric on `split` (where it has one; `only`: that task's alone); each rank scores its share of the examples
    (a `train=false` classification task is scored by a linear probe, `probe.probed_metrics`).

        `data`: the run's TrainingData; `run`: its RunConfig (precision, eval_batch). `progress`: a
        bar over this rank's examples (ClassifSQuAD's dev set is 164k triples at paper scale).
    """
    results = {}
    shares = {}
    for name, task in data.tasks.items():
        if split not in data.examples[name] or only not in (None, name):
            continue
        if not task.config.train and task.untrained == "probe":  # an untrained head: a linear probe
            results.update(
                probed_metrics(
                    model, task, data.examples[name], split, data.table, run.seed, run.eval_batch, device
                )
            )
            continue
        examples = data.examples[name][split]
        if task.in_batch and not task.corpus_metric:  # whole training-size batches, dealt to the ranks
            batches = contiguous_batches(len(examples), task.config.batch)[dist.rank :: dist.world_size]
            shares[name] = (
                examples.subset(np.concatenate(batches)) if batches else examples.subset(np.arange(0))
            )
        else:
            shares[name] = examples.subset(dist.part(len(examples)))
    with tqdm(
        total=sum(len(share) for share in shares.values()),
        desc=f"evaluate {split}",
        unit=" examples",
        leave=False,
        disable=not progress,
        dynamic_ncols=True,
        file=progress_stream(),
    ) as bar:
        for name, share in shares.items():
            task, examples = data.tasks[name], data.examples[name][split]
            bar.set_postfix_str(name, refresh=False)
            with autocast(run.precision, device):
                if task.corpus_metric:
                    values = _corpus_metrics(
                        model,
                        task,
                        share,
                        examples.labels,
                        data.table,
                        dist,
                        run.eval_batch,
                        device,
                        bar.update,
                    )
                    results.update({metrics.evaluation(name, split, key): v for key, v in values.items()})
                else:
                    sums = metric_sum(model, task, share, data.table, run.eval_batch, device, bar.update)
                    total, loss = dist.sum(list(sums))
                    results[metrics.evaluation(name, split, task.metric)] = total / len(examples)
                    results[metrics.evaluation(name, split, "loss")] = loss / len(examples)
    return results


def _corpus_metrics(
    model, task: Task, share, labels: np.ndarray, table, dist: Distributed, batch_size: int, device, advance
) -> dict[str, float]:
    """`task.corpus_metrics` of the whole split (`labels`): each rank's outputs on its `share`,
    gathered on every rank."""
    with torch.inference_mode():
        was_training = model.training
        model.eval()
        try:
            outputs = _batched_outputs(model, task.name, share, table, batch_size, device, advance)
        finally:
            model.train(was_training)
    every = dist.gather_objects(outputs.float().cpu().numpy())
    return task.corpus_metrics(np.concatenate(every), labels)


@torch.inference_mode()
def metric_sum(
    model: MultitaskModel,
    task: Task,
    examples: TaskExamples,
    table: SentenceTable,
    batch_size: int,
    device: torch.device,
    advance: Callable[[float], object] = lambda done: None,
) -> tuple[float, float]:
    """The sums of `task`'s metric and of its training loss over `examples` (sums, so ranks' shares
    add up; accuracy: correct ones); `advance(n)` as the work of n examples is done (a bar)."""
    if len(examples) == 0:
        return 0.0, 0.0
    was_training = model.training
    model.eval()
    try:
        head = model.heads[task.name]
        if task.in_batch:
            return _in_batch_sum(model, task, examples, table, device, advance)
        if isinstance(head, TaskHead) and not model.encoder.pair_model:
            outputs = _siamese_outputs(model.encoder, head, examples, table, batch_size, device, advance)
        else:
            outputs = _batched_outputs(model, task.name, examples, table, batch_size, device, advance)
        total, loss = 0.0, 0.0
        for start in range(0, len(examples), 4096):
            labels = torch.from_numpy(examples.labels[start : start + 4096]).to(device)
            total += task.scores(outputs[start : start + 4096], labels).sum().item()
            loss += task.losses(outputs[start : start + 4096], labels).sum().item()
        return total, loss
    finally:
        model.train(was_training)


def _in_batch_sum(model, task: Task, examples: TaskExamples, table, device, advance) -> tuple[float, float]:
    """Each batch of `task.config.batch` consecutive examples scored against itself, as in training."""
    total, loss = 0.0, 0.0
    for rows in contiguous_batches(len(examples), task.config.batch):
        outputs = model(task.name, table.batch_columns(examples.sentences[rows], device))
        labels = torch.from_numpy(examples.labels[rows]).to(device)
        total += task.scores(outputs, labels).sum().item()
        loss += task.losses(outputs, labels).sum().item()
        advance(len(rows))
    return total, loss


def _siamese_outputs(encoder, head: TaskHead, examples, table, batch_size, device, advance) -> torch.Tensor:
    rows, inverse = np.unique(examples.sentences, return_inverse=True)
    inverse = torch.from_numpy(inverse.reshape(examples.sentences.shape)).to(device)
    # Encoding the distinct sentences is the work: the bar moves with it, in whole examples.
    encoded, reported = 0, 0

    def encoded_rows(n: int) -> None:
        nonlocal encoded, reported
        encoded += n
        now = encoded * len(examples) // len(rows)
        advance(now - reported)
        reported = now

    embedded = embed_rows(encoder, table, rows, batch_size, device, encoded_rows)
    outputs = []
    for start in range(0, len(examples), 4096):
        columns = inverse[start : start + 4096]
        features = head.recipe.features(*(embedded[columns[:, k]] for k in range(columns.shape[1])))
        outputs.append(head.classifier(features))
    return torch.cat(outputs)


def _batched_outputs(model, task: str, examples, table, batch_size, device, advance) -> torch.Tensor:
    outputs = []
    for start in range(0, len(examples), batch_size):
        rows = examples.sentences[start : start + batch_size]
        outputs.append(model(task, table.batch_columns(rows, device)))
        advance(len(rows))
    return torch.cat(outputs)
