"""Per test item outputs: a cross-validated task's, each item's from the fold it was tested in;
a task's score from them, on all its items or on resamples or a part of them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mtl.correlation import correlation

Items = dict[str, np.ndarray]  # a task's arrays per test item: predicted, gold (STS: per subset)


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


def scores(items: Items, indices: dict[str, np.ndarray] | np.ndarray) -> np.ndarray:
    """The task's metric, in points, for each row of resampled item `indices` ((B, n); STS: per subset)."""
    subsets = sorted(key.removesuffix("/predicted") for key in items if key.endswith("/predicted"))
    if subsets:  # STS: each subset resampled apart, their Pearson r averaged, as the report's all/pearson
        return np.mean(
            [pearson(items[f"{s}/predicted"][indices[s]], items[f"{s}/gold"][indices[s]]) for s in subsets],
            axis=0,
        )
    predicted, gold = items["predicted"], items["gold"]
    if np.issubdtype(gold.dtype, np.floating):  # relatedness: a predicted score per pair
        return pearson(predicted[indices], gold[indices])
    return 100 * (predicted == gold)[indices].mean(axis=-1)


def pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r x 100 along the last axis."""
    return 100 * correlation(x, y)


def item_counts(items: Items) -> dict[str, int] | int:
    subsets = [key.removesuffix("/predicted") for key in items if key.endswith("/predicted")]
    if subsets:
        return {s: len(items[f"{s}/gold"]) for s in subsets}
    return len(items["gold"])


def everything(counts: dict[str, int] | int):
    if isinstance(counts, dict):
        return {s: np.arange(n) for s, n in counts.items()}
    return np.arange(counts)


SEEN = (
    "seen"  # per item (STS: per subset, `<subset>/seen`): True where it holds a sentence the run trained on
)
FEWEST_UNSEEN = 10  # items a subset must keep for a score without the seen ones


def subsets_of(items: Items) -> list[str]:
    """The item prefixes of a task: its STS subsets, or "" for one set of items."""
    return sorted(key.removesuffix("/predicted") for key in items if key.endswith("/predicted")) or [""]


def seen_marks(items: Items) -> dict[str, np.ndarray] | None:
    """Per prefix, the items holding a sentence the run trained on; None when the report kept no
    marks (a run without a ledger of its test sentences, a baseline's report, an older report)."""
    marks = {}
    for prefix in subsets_of(items):
        mark = items.get(f"{prefix}/{SEEN}" if prefix else SEEN)
        if mark is None:
            return None
        marks[prefix] = mark.astype(bool)
    return marks


def without(items: Items, dropped: dict[str, np.ndarray]) -> Items | None:
    """`items` without those `dropped` marks (per prefix). An STS subset left with fewer than
    FEWEST_UNSEEN items is left out whole (`short_subsets` names them; the score is then the
    mean over the other subsets); None when nothing is left to score (a correlation or an
    accuracy of a handful of items is no score)."""
    short = set(short_subsets(items, dropped))
    kept: Items = {}
    for key, values in items.items():
        prefix = key.rpartition("/")[0]
        if prefix not in short:
            kept[key] = values[~dropped[prefix]]
    return kept if kept and "" not in short else None


def short_subsets(items: Items, dropped: dict[str, np.ndarray]) -> list[str]:
    """The prefixes `without` leaves out: fewer than FEWEST_UNSEEN items of theirs are unseen."""
    return [prefix for prefix in subsets_of(items) if (~dropped[prefix]).sum() < FEWEST_UNSEEN]
