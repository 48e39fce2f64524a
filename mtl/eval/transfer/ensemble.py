"""`just transfer run=a,b ensemble=mean`: an ensemble of encoders (Quick-Thoughts 4.4.2).

Each encoder's own transfer classifier is fitted as if it were evaluated alone; then, per test
item, their predicted log-probabilities are averaged, weighted by each classifier's validation
accuracy (`dev_acc`: the inner cross-validation's, or the dev set's) normalised to sum to one,
as the paper's "weighted average of the predicted log-probabilities of individual models, the
weights being normalized validation set performance scores". `ensemble=concat` (the default)
instead concatenates the embeddings and fits one classifier (`mtl.eval.combined`).

Cross-validated tasks (MR, CR, SUBJ, MPQA) use the same folds for every member (they depend
on the labels and the seed only), so each item's log-probabilities all come from classifiers
that did not train on it. The ensemble's accuracy is over all test items (for those tasks,
not the mean of the folds' accuracies, which can differ by a few hundredths of a point).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mtl.errors import UserError
from mtl.eval.encoder import SentenceEncoder
from mtl.text.coverage import Coverage


class Ensemble:
    """Several encoders scored each on its own, quacking like one where the suite reports it."""

    def __init__(self, members: Sequence[SentenceEncoder]):
        if len(members) < 2:
            raise UserError("ensemble=mean combines several encoders: give run=runs/a,runs/b")
        self.members = list(members)
        self.names = unique_names([member.name for member in self.members])
        self.name = "ensemble-" + "+".join(self.names)
        self.vectors = self.members[0].vectors

    @property
    def dim(self) -> int:  # what the members' classifiers read, in all
        return sum(member.dim for member in self.members)

    @property
    def coverage(self) -> Coverage | None:
        return self.members[0].coverage


def unique_names(names: list[str]) -> list[str]:
    """`names`, a repeated one numbered (run, run-2) so that each member has its own entry."""
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return unique


def evaluate(ensemble: Ensemble, score: Callable[[SentenceEncoder], dict]) -> dict:
    """The ensemble's result on one task; `score(member)` is the member's result alone (with its
    per-item `items`, log-probabilities included)."""
    results = [score(member) for member in ensemble.members]
    return combined(results, ensemble.names)


def combined(results: list[dict], names: list[str]) -> dict:
    """The members' `results` (each with `dev_acc` and `items`) combined into the ensemble's."""
    from sklearn.metrics import f1_score  # here: classifiers.py's docstring says why

    if any("log_probs" not in result.get("items", {}) for result in results):
        raise UserError("ensemble=mean averages classifiers' log-probabilities: this task fits no classifier")
    gold = results[0]["items"]["gold"]
    dev = np.array([result["dev_acc"] for result in results], dtype=np.float64)
    weights = dev / dev.sum() if dev.sum() > 0 else np.full(len(dev), 1 / len(dev))
    log_probs = sum(
        w * result["items"]["log_probs"].astype(np.float64)
        for w, result in zip(weights, results, strict=True)
    )
    predicted = log_probs.argmax(axis=1).astype(gold.dtype)  # labels are the classes' indices 0..C-1
    binary = log_probs.shape[1] == 2 and "f1" in results[0]  # MRPC's F1 of class 1
    if gold.max() >= log_probs.shape[1]:
        raise ValueError(f"labels up to {gold.max()} for {log_probs.shape[1]} classes: labels must be 0..C-1")
    members = {}  # flat numbers, as every result's: each member's accuracy alone and its weight
    for name, result, weight in zip(names, results, weights, strict=True):
        members[f"acc:{name}"], members[f"weight:{name}"] = result["acc"], round(float(weight), 6)
    sizes = {key: results[0][key] for key in ("ndev", "ntest") if key in results[0]}
    return {
        "acc": float((predicted == gold).mean()),
        **({"f1": float(f1_score(gold, predicted, average="binary"))} if binary else {}),
        "dev_acc": float(weights @ dev),
        **members,
        **sizes,
        "embed_seconds": round(sum(result.get("embed_seconds", 0.0) for result in results), 1),
        "items": {"predicted": predicted, "gold": gold, "log_probs": log_probs.astype(np.float32)},
    }
