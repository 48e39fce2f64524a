"""SentEval's evaluation protocols (Conneau & Kiela 2018) over fixed sentence embeddings.

Classification: logistic regression (scikit-learn) with the L2 penalty C chosen from a
grid, by inner cross-validation on each training fold (k-fold tasks, TREC, MRPC) or on the
dev set (SST, SICK-E); or SentEval's own PyTorch classifier (senteval_classifier.py).
Relatedness (SICK-R, STS-B): a softmax over the integer scores fitted to the Tai et al.
(2015) target distribution, early-stopped on dev Pearson; MSE as Skip-Thought reports it.
STS: cosine similarity against the gold scores.

scikit-learn is imported where a classifier is made or folds are drawn: a command that only
scores STS would otherwise pay 0.4 CPU-s to import it, more than the scoring (issue 105).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mtl.correlation import correlation, rank_correlation
from mtl.eval.configs import SentEvalParams
from mtl.eval.transfer.fitting import ClassifierFamily, best_of
from mtl.eval.transfer.progress import stage
from mtl.eval.transfer.skipthought_features import with_nb
from mtl.runtime.no_dynamo import without_dynamo


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


@dataclass(frozen=True)
class WithTexts:
    """Embeddings with each row's sentence (features=nb-bigram): rows are taken of both, and the
    NB features are counted on a fit's own training rows."""

    x: np.ndarray
    texts: np.ndarray  # of str, one per row

    def __getitem__(self, rows: np.ndarray) -> WithTexts:
        return WithTexts(self.x[rows], self.texts[rows])

    def __len__(self) -> int:
        return len(self.x)


class LogisticRegressionClassifier:
    """scikit-learn's logistic regression at one C (L-BFGS; on one thread: threads.py)."""

    def __init__(self, penalty: float, protocol: Protocol):
        from sklearn.linear_model import LogisticRegression

        self.model = LogisticRegression(C=penalty, max_iter=protocol.max_iter, random_state=protocol.seed)

    def fit(self, x, y, validation=None) -> None:  # fitted to convergence: nothing stops it early
        from sklearn.exceptions import ConvergenceWarning

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            self.model.fit(x, y)

    def tested(self, x, y) -> dict[str, np.ndarray]:
        log_probs = self.model.predict_log_proba(x).astype(np.float32)
        return {
            "predicted": self.model.classes_[log_probs.argmax(axis=1)],
            "gold": np.asarray(y),
            "log_probs": log_probs,
        }

    def score(self, x, y) -> float:
        return float(self.model.score(x, y))


class LogisticRegressionFamily(ClassifierFamily):
    """SentEval's scikit-learn path: C from a grid, by inner folds of the training data."""

    def __init__(self, protocol: Protocol):
        self.protocol = protocol
        self.penalties, self.train_test_penalties = protocol.penalties, protocol.train_test_penalties
        self.folds, self.seed, self.jobs = protocol.folds, protocol.seed, protocol.jobs
        self.train_fraction = protocol.train_fraction

    def make(self, penalty: float, x, y) -> LogisticRegressionClassifier:
        return LogisticRegressionClassifier(penalty, self.protocol)

    def prepared(self, x_train, y_train, others):
        if not isinstance(x_train, WithTexts):
            return x_train, list(others)
        return with_nb(x_train.x, x_train.texts, y_train, [(x.x, x.texts) for x in others])

    def choose_penalty(self, x, y, penalties) -> tuple[float, float]:
        """The C of `penalties` with the best mean accuracy over inner folds (first of the best
        on ties), and that accuracy (SentEval's `devacc`)."""
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import StratifiedKFold

        folds = StratifiedKFold(self.protocol.inner_folds, shuffle=True, random_state=self.seed)
        scores = dict.fromkeys(penalties, 0.0)
        for fold, (train, test) in enumerate(folds.split(np.zeros(len(y)), y), start=1):
            stage(f"choosing C: fold {fold}/{self.protocol.inner_folds}")  # silent in the k-fold workers
            x_train, (x_test,) = self.prepared(x[train], y[train], [x[test]])
            # Along the grid in increasing C, each fit starts from the previous solution: same optimum, fewer steps.
            model = LogisticRegression(
                max_iter=self.protocol.max_iter, random_state=self.seed, warm_start=True
            )
            for penalty in sorted(penalties):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    model.set_params(C=penalty).fit(x_train, y[train])
                scores[penalty] += model.score(x_test, y[test]) / self.protocol.inner_folds
        best = penalties[best_of([scores[c] for c in penalties])]
        return best, scores[best]


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
    # torch here alone: the processes that fit scikit-learn's classifiers unpickle this module and
    # would import it for nothing (2.5 s of each process's start)
    import torch

    low, high = score_range
    target = torch.from_numpy(score_distribution(y_train, low, high)).float()
    torch.manual_seed(protocol.seed)
    model = torch.nn.Linear(x_train.shape[1], target.shape[1])
    optimizer = without_dynamo(torch.optim.Adam)(model.parameters(), lr=1e-3)
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
        dev = float(correlation(predict(xs["dev"]), y_dev))
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
        "pearson": float(correlation(predicted, y_test)),
        "spearman": rank_correlation(predicted, y_test),
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
        results[f"{name}/pearson"] = float(correlation(similarity, gold))
        results[f"{name}/spearman"] = rank_correlation(similarity, gold)
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
