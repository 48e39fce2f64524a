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

from mtl.eval.transfer.classifiers import Protocol
from mtl.eval.transfer.fitting import ClassifierFamily
from mtl.eval.transfer.protocols import TaskFeatures, protocol_of
from mtl.models.encoders.base import SelfAttentivePooling, length_mask
from mtl.runtime.no_dynamo import without_dynamo

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


class AttentionFit:
    """The attention and its linear classifier as one `fitting.Classifier`: `x` are row numbers
    into the task's `columns` (one States per sentence position), and training stops early on
    the validation rows given, else on a stratified 10% of the training rows."""

    def __init__(self, columns: list[States], classes: int, da: int, r: int, protocol: Protocol):
        torch.manual_seed(protocol.seed)
        self.random = np.random.RandomState(protocol.seed)
        self.columns, self.protocol = columns, protocol
        self.model = AttentionClassifier(columns[0].rows[0].shape[1], len(columns), classes, da, r)

    def logits(self, rows: np.ndarray) -> torch.Tensor:
        self.model.eval()
        with torch.no_grad():
            chunks = np.array_split(rows, max(1, -(-len(rows) // 256)))
            return torch.cat([self.model([c.batch(chunk) for c in self.columns]) for chunk in chunks])

    def score(self, rows: np.ndarray, y: np.ndarray) -> float:
        return float((self.logits(rows).argmax(dim=1).numpy() == np.asarray(y)).mean())

    def tested(self, rows: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
        log_probs = torch.log_softmax(self.logits(rows), dim=1)
        return {
            "predicted": log_probs.argmax(dim=1).numpy(),
            "gold": np.asarray(y),
            "log_probs": log_probs.numpy(),
        }

    def fit(self, rows: np.ndarray, y: np.ndarray, validation: tuple | None = None) -> float:
        """Train with Adam, keep the epoch best on the validation rows; returns its accuracy."""
        from sklearn.model_selection import train_test_split  # here: classifiers.py's docstring says why

        y = np.asarray(y)
        if validation is None:
            kept, held = train_test_split(
                np.arange(len(rows)), test_size=HELD_OUT, stratify=y, random_state=self.protocol.seed
            )
            kept, held = np.sort(kept), np.sort(held)
            validation, rows, y = (rows[held], y[held]), rows[kept], y[kept]
        optimizer = without_dynamo(torch.optim.Adam)(self.model.parameters(), lr=LEARNING_RATE)
        targets = torch.from_numpy(y)
        best, best_state, patience = -1.0, None, self.protocol.tenacity
        for _ in range(MAX_EPOCHS):
            self.model.train()
            order = self.random.permutation(len(rows))
            for start in range(0, len(order), BATCH):
                chosen = order[start : start + BATCH]
                loss = torch.nn.functional.cross_entropy(
                    self.model([c.batch(rows[chosen]) for c in self.columns]), targets[chosen]
                )
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            accuracy = self.score(*validation)
            if accuracy > best:
                best, best_state, patience = (
                    accuracy,
                    copy.deepcopy(self.model.state_dict()),
                    self.protocol.tenacity,
                )
            else:
                patience -= 1
                if patience == 0:
                    break
        self.model.load_state_dict(best_state)
        return best


class AttentionFamily(ClassifierFamily):
    """Attention trained per task: no penalty to choose (one fit, early-stopped), folds as the
    protocol's (10, or 5 with mode=fast), fitted one after another in this process."""

    def __init__(self, columns: list[States], classes: int, da: int, r: int, protocol: Protocol):
        self.columns, self.classes, self.da, self.r, self.protocol = columns, classes, da, r, protocol
        self.penalties = self.train_test_penalties = (0.0,)
        self.folds, self.seed = protocol.folds, protocol.seed

    def make(self, penalty: float, x, y) -> AttentionFit:
        return AttentionFit(self.columns, self.classes, self.da, self.r, self.protocol)

    def choose_penalty(self, x, y, penalties) -> tuple[float, None]:
        return penalties[0], None


class StatesOfSplits(TaskFeatures):
    """A task's splits as row numbers into one States per sentence position, every split's
    sentences side by side: what the attention family's classifiers read."""

    def __init__(self, task, states_of):
        splits = list(task.splits)
        per_split = {s: states_of(s) for s in splits}
        self.columns = [
            States([row for s in splits for row in per_split[s][c].rows])
            for c in range(len(per_split[splits[0]]))
        ]
        bounds = np.cumsum([0] + [len(task.splits[s]) for s in splits])
        self.rows = {s: np.arange(bounds[i], bounds[i + 1]) for i, s in enumerate(splits)}
        self.task = task

    def features(self, split: str) -> np.ndarray:
        return self.rows[split]

    inputs = features


def evaluate(task, states_of, protocol: Protocol, da: int, r: int) -> dict[str, float]:
    """One transfer task with attention trained for it, scored by the task's own protocol;
    `states_of(split)`: its columns' States."""

    data = StatesOfSplits(task, states_of)
    classes = int(max(max(split.labels) for split in task.splits.values())) + 1
    return protocol_of(task).score(data, AttentionFamily(data.columns, classes, da, r, protocol))
