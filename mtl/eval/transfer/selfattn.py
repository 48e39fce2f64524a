"""`just transfer pooling=selfattn`: structured self-attention trained per transfer task over the
frozen encoder's token states (Liu et al. 2018, Section 5.1: "task-specific self-attention which
takes the place of mean- and max- aggregations", d_a = 128, r = 3; Table 2's "Multitask
LSTM(selfatten)", 6,144 dimensions from a 2,048-d LSTM).

Per task, the attention (SelfAttentivePooling) and a linear classifier over its r·D output (or
over [u, v, |u-v|, u*v] for a sentence pair) are trained together with Adam on the training
split, early-stopped on held-out data: the dev set where the task has one, else 10% of each
training fold. The folds are those of the task's protocol (10, or 5 with mode=fast). The
authors' own module (senteval_selfattention.py in kolchinski/NLI_2018) builds its two linear
maps with their dimensions swapped, so it runs only when a sentence is as long as d_a: mtl
follows the formula the paper prints. Relatedness and STS tasks take no trained classifier of
this kind (their registry entries say `attention`).
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from sklearn.metrics import f1_score
from sklearn.model_selection import StratifiedKFold, train_test_split

from mtl.eval.transfer.classifiers import Protocol
from mtl.models.encoders.base import SelfAttentivePooling, length_mask

BATCH = 64
LEARNING_RATE = 1e-3
MAX_EPOCHS = 50
HELD_OUT = 0.1  # share of a training fold that early-stops it when the task has no dev set


class States:
    """Every sentence's (T_i, D) states of one column of a split, batched into padded tensors."""

    def __init__(self, rows: list[np.ndarray]):
        self.rows = rows

    def batch(self, indices: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        chosen = [self.rows[i] for i in indices]
        width = max(len(r) for r in chosen)
        padded = np.zeros((len(chosen), width, chosen[0].shape[1]), dtype=np.float32)
        for row, states in enumerate(chosen):
            padded[row, : len(states)] = states
        return torch.from_numpy(padded), length_mask(
            torch.tensor([len(r) for r in chosen]), width, torch.device("cpu")
        )


class AttentionClassifier(torch.nn.Module):
    def __init__(self, width: int, columns: int, classes: int, da: int, r: int):
        super().__init__()
        self.attention = SelfAttentivePooling(width, da, r)
        features = self.attention.output_dim * (4 if columns == 2 else 1)
        self.linear = torch.nn.Linear(features, classes)

    def forward(self, columns: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        embedded = [self.attention(states, mask) for states, mask in columns]
        if len(embedded) == 2:
            u, v = embedded
            embedded = [torch.cat([u, v, (u - v).abs(), u * v], dim=-1)]
        return self.linear(embedded[0])


def fit_and_predict(
    columns: list[States],
    labels: np.ndarray,
    train: np.ndarray,
    held_out: np.ndarray,
    test: np.ndarray,
    da: int,
    r: int,
    protocol: Protocol,
) -> tuple[np.ndarray, float]:
    """Train on `train`, keep the epoch best on `held_out`; predictions for `test` and the best
    held-out accuracy."""
    torch.manual_seed(protocol.seed)
    random = np.random.RandomState(protocol.seed)
    width = columns[0].rows[0].shape[1]
    model = AttentionClassifier(width, len(columns), int(labels.max()) + 1, da, r)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    targets = torch.from_numpy(labels)

    def predict(indices: np.ndarray) -> np.ndarray:
        model.eval()
        with torch.no_grad():
            return np.concatenate(
                [
                    model([c.batch(chunk) for c in columns]).argmax(dim=1).numpy()
                    for chunk in np.array_split(indices, max(1, -(-len(indices) // 256)))
                ]
            )

    best, best_state, patience = -1.0, None, protocol.tenacity
    for _ in range(MAX_EPOCHS):
        model.train()
        order = train[random.permutation(len(train))]
        for start in range(0, len(order), BATCH):
            chosen = order[start : start + BATCH]
            loss = torch.nn.functional.cross_entropy(
                model([c.batch(chosen) for c in columns]), targets[chosen]
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        accuracy = float((predict(held_out) == labels[held_out]).mean())
        if accuracy > best:
            best, best_state, patience = accuracy, copy.deepcopy(model.state_dict()), protocol.tenacity
        else:
            patience -= 1
            if patience == 0:
                break
    model.load_state_dict(best_state)
    return predict(test), best


def evaluate(task, states_of, protocol: Protocol, da: int, r: int) -> dict[str, float]:
    """One transfer task with attention trained for it; `states_of(split)`: its columns' States."""
    if task.kind == "cv":
        columns, labels = states_of("all"), np.asarray(task.splits["all"].labels)
        folds = StratifiedKFold(protocol.folds, shuffle=True, random_state=protocol.seed)
        accuracies, held = [], []
        for train, test in folds.split(np.zeros(len(labels)), labels):
            train, held_out = _held_out(train, labels, protocol)
            predicted, dev = fit_and_predict(columns, labels, train, held_out, test, da, r, protocol)
            accuracies.append(float((predicted == labels[test]).mean()))
            held.append(dev)
        return {"acc": float(np.mean(accuracies)), "dev_acc": float(np.mean(held))}
    # trec (train/test) and dev (train/dev/test): one model, all splits' states side by side
    splits = ["train", "dev", "test"] if task.kind == "dev" else ["train", "test"]
    per_split = {s: states_of(s) for s in splits}
    columns = [
        States([row for s in splits for row in per_split[s][c].rows]) for c in range(len(per_split["train"]))
    ]
    labels = np.concatenate([np.asarray(task.splits[s].labels) for s in splits])
    bounds = np.cumsum([0] + [len(task.splits[s].labels) for s in splits])
    ranges = {s: np.arange(bounds[i], bounds[i + 1]) for i, s in enumerate(splits)}
    if task.kind == "dev":
        train, held_out = ranges["train"], ranges["dev"]
    else:
        train, held_out = _held_out(ranges["train"], labels, protocol)
    predicted, dev = fit_and_predict(columns, labels, train, held_out, ranges["test"], da, r, protocol)
    gold = labels[ranges["test"]]
    result = {"acc": float((predicted == gold).mean()), "dev_acc": dev}
    if task.name == "MRPC":
        result["f1"] = float(f1_score(gold, predicted, average="binary"))
    return result


def _held_out(indices: np.ndarray, labels: np.ndarray, protocol: Protocol) -> tuple[np.ndarray, np.ndarray]:
    kept, held = train_test_split(
        indices, test_size=HELD_OUT, stratify=labels[indices], random_state=protocol.seed
    )
    return np.sort(kept), np.sort(held)
