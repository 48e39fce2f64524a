"""Scoring a task that watches a run without training (`<task>.train=false`).

Its head is never trained, so a classification task is scored as SentEval scores a transfer
task: a logistic regression fitted on the frozen encoder's features (the task's own Siamese
recipe, [u; v; |u - v|; u * v] for a pair) of at most `<task>.probe_train` of its training
examples (a seeded draw, the same at every evaluation), then its accuracy and mean log loss on
the split. Every rank fits the same probe on the same examples, so all agree without a
collective.
"""

from __future__ import annotations

import numpy as np
import torch

from mtl import metrics
from mtl.data.batches import SentenceTable, TaskExamples
from mtl.models.heads import MultitaskModel, TaskHead
from mtl.tasks.base import Task
from mtl.train.data.embed import embed_rows

SEED_OFFSET = 104_729  # the probe's draw of training examples: apart from the run's other generators


def probed_metrics(
    model: MultitaskModel,
    task: Task,
    examples: dict[str, TaskExamples],
    split: str,
    table: SentenceTable,
    seed: int,
    batch_size: int,
    device: torch.device,
) -> dict[str, float]:
    """`task`'s metric and loss on `split` by a linear probe (see the module's docstring)."""
    train = examples["train"]
    count = min(len(train), task.config.probe_train)
    rows = np.sort(np.random.default_rng([seed, SEED_OFFSET]).permutation(len(train))[:count])
    head = model.heads[task.name]
    fit_on, fit_labels = (
        probe_features(model, head, train.subset(rows), table, batch_size, device),
        train.labels[rows],
    )
    scored = examples[split]
    from sklearn.linear_model import LogisticRegression  # 1 s of imports a run without probes never needs

    probe = LogisticRegression(max_iter=1000)
    if len(np.unique(fit_labels)) < 2:  # one class in the draw: it is every prediction
        predicted = np.full(len(scored), fit_labels[0])
        probabilities = (predicted == scored.labels).astype(float)
    else:
        probe.fit(fit_on, fit_labels)
        features = probe_features(model, head, scored, table, batch_size, device)
        predicted = probe.predict(features)
        every = probe.predict_proba(features)
        known = {label: i for i, label in enumerate(probe.classes_)}
        probabilities = np.array(
            [every[n, known[label]] if label in known else 0.0 for n, label in enumerate(scored.labels)]
        )
    loss = float(np.mean(-np.log(np.clip(probabilities, 1e-12, 1.0))))
    return {
        metrics.evaluation(task.name, split, task.metric): float(np.mean(predicted == scored.labels)),
        metrics.evaluation(task.name, split, "loss"): loss,
    }


@torch.inference_mode()
def probe_features(model, head: TaskHead, examples: TaskExamples, table, batch_size, device) -> np.ndarray:
    """The head's recipe over the frozen embeddings of each example's sentences: (N, features)."""
    was_training = model.training
    model.eval()
    try:
        distinct, inverse = np.unique(examples.sentences, return_inverse=True)
        embedded = embed_rows(model.encoder, table, distinct, batch_size, device)
        columns = torch.from_numpy(inverse.reshape(examples.sentences.shape)).to(device)
        features = head.recipe.features(*(embedded[columns[:, k]] for k in range(columns.shape[1])))
        return features.float().cpu().numpy()
    finally:
        model.train(was_training)
