"""Per test item outputs of a cross-validated task: each item's from the fold it was tested in."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def across_folds(
    y: np.ndarray, tests: Sequence[np.ndarray], folds: Sequence[dict[str, np.ndarray]]
) -> tuple[dict[str, np.ndarray], float]:
    """Every item's prediction and log-probabilities (`folds[i]` holds those of the items
    `tests[i]`), and the mean of the folds' accuracies (SentEval's k-fold score)."""
    y = np.asarray(y)
    items = {
        "predicted": np.empty_like(y),
        "gold": y,
        "log_probs": np.empty((len(y), folds[0]["log_probs"].shape[1]), dtype=np.float32),
    }
    for test, fold in zip(tests, folds, strict=True):
        items["predicted"][test], items["log_probs"][test] = fold["predicted"], fold["log_probs"]
    accuracy = np.mean(
        [(fold["predicted"] == y[test]).mean() for test, fold in zip(tests, folds, strict=True)]
    )
    return items, float(accuracy)
