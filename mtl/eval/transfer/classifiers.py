"""SentEval's evaluation protocols (Conneau & Kiela 2018) over fixed sentence embeddings.

Classification: logistic regression (scikit-learn) with the L2 penalty C chosen from a
grid, by inner cross-validation on each training fold (k-fold tasks, TREC, MRPC) or on the
dev set (SST, SICK-E); or SentEval's own PyTorch classifier (senteval_classifier.py).
Relatedness (SICK-R, STS-B): a softmax over the integer scores fitted to the Tai et al.
(2015) target distribution, early-stopped on dev Pearson; MSE as Skip-Thought reports it.
STS: cosine similarity against the gold scores.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from joblib import Parallel, delayed
from scipy.stats import pearsonr, spearmanr
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from sklearn.model_selection import StratifiedKFold
from threadpoolctl import threadpool_limits

from mtl.eval.transfer.items import across_folds
from mtl.eval.transfer.progress import stage
from mtl.eval.transfer.senteval_classifier import SentEvalParams
from mtl.eval.transfer.skipthought_features import with_nb


@dataclass(frozen=True)
class Protocol:
    folds: int = 10
    inner_folds: int = 10
    penalties: tuple[float, ...] = tuple(2.0**t for t in range(-2, 4))  # SentEval's LogReg grid
    # TREC and MRPC (cross-validation on train, then test): SentEval's KFoldClassifier grid, 2^-1 ... 2^5
    train_test_penalties: tuple[float, ...] = tuple(2.0**t for t in range(-1, 6))
    max_iter: int = 500
    relatedness_epochs: int = 100
    tenacity: int = 5
    seed: int = 1111
    jobs: int = 2  # outer folds fitted in parallel processes
    senteval: SentEvalParams | None = None  # classification by SentEval's PyTorch classifier instead
    train_fraction: float = 1.0  # share of each training set the classifier sees (a learning curve)
    features: str = "senteval"  # or Skip-Thought's: skipthought-mrpc, nb-bigram (skipthought_features.py)

    @classmethod
    def named(cls, mode: str, senteval: SentEvalParams | None = None) -> Protocol:
        """standard, fast, or SentEval's classifier under its default or prototyping settings (`senteval`)."""
        if mode == "fast":
            return cls.fast()
        if mode == "senteval-prototyping":
            return dataclasses.replace(cls.fast(), senteval=senteval or SentEvalParams.prototyping())
        return cls(senteval=senteval or SentEvalParams.default()) if mode == "senteval" else cls()

    @classmethod
    def fast(cls) -> Protocol:
        """SentEval's prototyping settings: 5 folds, fewer penalties and epochs."""
        return cls(
            folds=5,
            inner_folds=3,
            penalties=(0.5, 2.0, 8.0),
            train_test_penalties=(0.5, 2.0, 8.0),
            max_iter=200,
            relatedness_epochs=20,
            tenacity=3,
        )


def one_blas_thread():
    """scikit-learn's fits on one BLAS thread, as the k-fold worker processes already run them: on
    the small matrices of a transfer task, OpenBLAS's threads cost far more than they give (TREC's
    fit: 6-15 s on 2 threads, 0.3 s on one, RESULTS.md), and one thread makes the solver's path,
    and so an unconverged fit's result, the same on every machine."""
    return threadpool_limits(limits=1, user_api="blas")


def _fit(x: np.ndarray, y: np.ndarray, penalty: float, protocol: Protocol) -> LogisticRegression:
    model = LogisticRegression(C=penalty, max_iter=protocol.max_iter, random_state=protocol.seed)
    with warnings.catch_warnings(), one_blas_thread():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(x, y)


def fold_inputs(x: np.ndarray, y: np.ndarray, texts: np.ndarray | None, train: np.ndarray, test: np.ndarray):
    """A fit's training and test inputs: the embeddings' rows, with NB features (counted on the
    training rows) appended when `texts` are given (features=nb-bigram)."""
    if texts is None:
        return x[train], x[test]
    x_train, (x_test,) = with_nb(x[train], texts[train], y[train], [(x[test], texts[test])])
    return x_train, x_test


def best_penalty_by_cv(
    x: np.ndarray, y: np.ndarray, protocol: Protocol, texts: np.ndarray | None = None
) -> tuple[float, float]:
    """The C of the grid with the best mean accuracy over inner folds (first of the best on ties),
    and that accuracy (SentEval's `devacc`); `texts`: the sentences, for NB features."""
    folds = StratifiedKFold(protocol.inner_folds, shuffle=True, random_state=protocol.seed)
    scores = dict.fromkeys(protocol.penalties, 0.0)
    for fold, (train, test) in enumerate(folds.split(x, y), start=1):
        stage(f"choosing C: fold {fold}/{protocol.inner_folds}")  # silent in the k-fold workers
        x_train, x_test = fold_inputs(x, y, texts, train, test)
        # Along the grid in increasing C, each fit starts from the previous solution: same optimum, fewer steps.
        model = LogisticRegression(max_iter=protocol.max_iter, random_state=protocol.seed, warm_start=True)
        for penalty in sorted(protocol.penalties):
            with warnings.catch_warnings(), one_blas_thread():
                warnings.simplefilter("ignore", ConvergenceWarning)
                model.set_params(C=penalty).fit(x_train, y[train])
            scores[penalty] += model.score(x_test, y[test]) / protocol.inner_folds
    # As SentEval's validation.py: compared in %, rounded to 2 decimals; near-ties go to the first C.
    best = max(protocol.penalties, key=lambda c: round(100 * scores[c], 2))
    return best, scores[best]


def training_share(labels: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Sorted positions of `fraction` of `labels`, drawn per class (at least 2 of each, so every
    class is there to fit and to cross-validate), the same for the same seed."""
    if fraction >= 1:
        return np.arange(len(labels))
    rng = np.random.default_rng(seed)
    chosen = []
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        count = min(len(members), max(2, int(np.ceil(fraction * len(members)))))
        chosen.append(rng.choice(members, count, replace=False))
    return np.sort(np.concatenate(chosen))


def tested(model, x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """Per test item: the prediction, the gold label and the classes' log-probabilities (what an
    ensemble averages, Quick-Thoughts 4.4.2)."""
    log_probs = model.predict_log_proba(x).astype(np.float32)
    return {
        "predicted": model.classes_[log_probs.argmax(axis=1)],
        "gold": np.asarray(y),
        "log_probs": log_probs,
    }


def _outer_fold(
    x: np.ndarray,
    y: np.ndarray,
    train: np.ndarray,
    test: np.ndarray,
    protocol: Protocol,
    texts: np.ndarray | None = None,
) -> tuple[dict[str, np.ndarray], float]:
    """The fold's test items (`tested`), and its inner cross-validation accuracy."""
    train = train[training_share(y[train], protocol.train_fraction, protocol.seed)]
    penalty, inner = best_penalty_by_cv(x[train], y[train], protocol, None if texts is None else texts[train])
    x_train, x_test = fold_inputs(x, y, texts, train, test)
    return tested(_fit(x_train, y[train], penalty, protocol), x_test, y[test]), inner


def cross_validated_accuracy(
    x: np.ndarray, y: np.ndarray, protocol: Protocol, texts: Sequence[str] | None = None
) -> dict:
    """Mean test accuracy over `folds` outer folds, C tuned inside each training fold; `items`:
    every item's prediction, from the fold it was a test item of (for paired significance tests);
    `texts`: the sentences, for NB features counted inside every fold."""
    folds = list(StratifiedKFold(protocol.folds, shuffle=True, random_state=protocol.seed).split(x, y))
    texts = None if texts is None else np.asarray(texts, dtype=object)
    stage(f"fold 0/{len(folds)}")
    predictions = []
    # As a generator: each fold's result comes back (in fold order) as it is done, so the bar moves.
    for fold in Parallel(n_jobs=protocol.jobs, return_as="generator")(
        delayed(_outer_fold)(x, y, train, test, protocol, texts) for train, test in folds
    ):
        predictions.append(fold)
        stage(f"fold {len(predictions)}/{len(folds)}")
    items, accuracy = across_folds(y, [test for _, test in folds], [fold for fold, _ in predictions])
    return {
        "acc": accuracy,
        "dev_acc": float(np.mean([inner for _, inner in predictions])),
        "items": items,
    }


def train_test_accuracy(x_train, y_train, x_test, y_test, protocol: Protocol) -> dict[str, float]:
    """C by cross-validation on train, then accuracy (and F1 of class 1) on test."""
    grid = dataclasses.replace(protocol, penalties=protocol.train_test_penalties)
    penalty, inner = best_penalty_by_cv(x_train, y_train, grid)
    stage(f"final fit (C={penalty:g})")
    items = tested(_fit(x_train, y_train, penalty, protocol), x_test, y_test)
    predicted = items["predicted"]
    binary = len(np.unique(y_train)) == 2  # F1 of class 1: MRPC's; TREC's six classes have none
    return {
        "acc": float((predicted == y_test).mean()),
        **({"f1": float(f1_score(y_test, predicted, average="binary"))} if binary else {}),
        "dev_acc": float(inner),
        "items": items,
    }


def dev_tuned_accuracy(
    x_train, y_train, x_dev, y_dev, x_test, y_test, protocol: Protocol, texts: Sequence | None = None
) -> dict[str, float]:
    """C by dev accuracy, then tested; `texts`: the (train, dev, test) sentences, for NB features."""
    if texts is not None:
        x_train, (x_dev, x_test) = with_nb(
            x_train, texts[0], np.asarray(y_train), [(x_dev, texts[1]), (x_test, texts[2])]
        )
    scores = {}
    for number, c in enumerate(protocol.penalties, start=1):
        stage(f"choosing C: {number}/{len(protocol.penalties)}")
        scores[c] = _fit(x_train, y_train, c, protocol).score(x_dev, y_dev)
    penalty = max(protocol.penalties, key=lambda c: round(100 * scores[c], 2))
    stage(f"final fit (C={penalty:g})")
    items = tested(_fit(x_train, y_train, penalty, protocol), x_test, y_test)
    return {
        "acc": float((items["predicted"] == np.asarray(y_test)).mean()),
        "dev_acc": scores[penalty],
        "items": items,
    }


def score_distribution(scores: np.ndarray, low: float, high: float) -> np.ndarray:
    """Tai et al. (2015): y between integers i and i+1 puts mass i+1-y on i and y-i on i+1."""
    classes = int(round(high - low)) + 1
    shifted = np.clip(np.asarray(scores, dtype=np.float64) - low, 0, classes - 1)
    floor = np.minimum(np.floor(shifted).astype(int), classes - 2)
    target = np.zeros((len(shifted), classes))
    target[np.arange(len(shifted)), floor] = floor + 1 - shifted
    target[np.arange(len(shifted)), floor + 1] = shifted - floor
    return target


def relatedness(
    x_train, y_train, x_dev, y_dev, x_test, y_test, score_range: tuple[float, float], protocol: Protocol
) -> dict[str, float]:
    """Pearson and Spearman on test of the expected score, early-stopped on dev Pearson."""
    low, high = score_range
    target = torch.from_numpy(score_distribution(y_train, low, high)).float()
    torch.manual_seed(protocol.seed)
    model = torch.nn.Linear(x_train.shape[1], target.shape[1])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    values = torch.arange(target.shape[1], dtype=torch.float32) + low
    xs = {
        name: torch.from_numpy(np.asarray(x, dtype=np.float32))
        for name, x in (("train", x_train), ("dev", x_dev), ("test", x_test))
    }

    def predict(x: torch.Tensor) -> np.ndarray:
        with torch.no_grad():
            return (model(x).softmax(dim=-1) @ values).numpy()

    generator = torch.Generator().manual_seed(protocol.seed)
    best, best_state, patience = -np.inf, None, protocol.tenacity
    for _ in range(protocol.relatedness_epochs):
        for batch in torch.randperm(len(target), generator=generator).split(64):
            optimizer.zero_grad()
            log_probs = model(xs["train"][batch]).log_softmax(dim=-1)
            torch.nn.functional.kl_div(log_probs, target[batch], reduction="batchmean").backward()
            optimizer.step()
        dev = pearsonr(predict(xs["dev"]), y_dev).statistic
        if dev > best:
            best, best_state, patience = (
                dev,
                {k: v.clone() for k, v in model.state_dict().items()},
                protocol.tenacity,
            )
        else:
            patience -= 1
            if patience == 0:
                break
    model.load_state_dict(best_state)
    predicted = predict(xs["test"])
    return {
        "pearson": float(pearsonr(predicted, y_test).statistic),
        "spearman": float(spearmanr(predicted, y_test).statistic),
        "mse": float(np.mean((predicted - np.asarray(y_test)) ** 2)),
        "dev_pearson": float(best),
        "items": {"predicted": predicted, "gold": np.asarray(y_test, dtype=np.float64)},
    }


def cosine(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1)
    return (u * v).sum(axis=1) / np.maximum(norms, 1e-12)


def sts_scores(subsets: dict[str, tuple[np.ndarray, np.ndarray, Sequence[float]]]) -> dict[str, float]:
    """Per-subset Pearson/Spearman of cosine vs gold, their mean and their size-weighted mean."""
    results, sizes, items = {}, {}, {}
    for name, (u, v, gold) in subsets.items():
        similarity = cosine(u, v)
        results[f"{name}/pearson"] = float(pearsonr(similarity, gold).statistic)
        results[f"{name}/spearman"] = float(spearmanr(similarity, gold).statistic)
        sizes[name] = len(gold)
        items[f"{name}/predicted"], items[f"{name}/gold"] = similarity, np.asarray(gold, dtype=np.float64)
    total = sum(sizes.values())
    for metric in ("pearson", "spearman"):
        values = [results[f"{name}/{metric}"] for name in subsets]
        results[f"all/{metric}"] = float(np.mean(values))
        results[f"all/{metric}_weighted"] = float(
            sum(results[f"{n}/{metric}"] * sizes[n] for n in subsets) / total
        )
    return {**results, "items": items}


def pair_features(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """[u, v, |u-v|, u*v], the inference-task features of SentEval (paper Section 4)."""
    return np.concatenate([u, v, np.abs(u - v), u * v], axis=1)


def relatedness_features(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """[|u-v|, u*v], what SentEval's relatedness evaluation feeds its classifier."""
    return np.concatenate([np.abs(u - v), u * v], axis=1)
