"""The one classifier interface of the transfer protocols, and the three ways SentEval's protocols fit it.

A `Classifier` is one model at one penalty: `fit(x, y, validation)` trains it (early-stopped on
`validation` where it stops early, and then returns the validation accuracy it kept),
`tested(x, y)` gives each test item's prediction, gold label and log-probabilities, `score(x,
y)` its accuracy. A `ClassifierFamily` makes them and knows the rest of what a protocol asks of
a classifier: its penalty grids, how it chooses a penalty on training data, how it fits the
final model. Three families are built in: scikit-learn's logistic regression
(`classifiers.LogisticRegressionFamily`), SentEval's PyTorch classifier
(`senteval_classifier.SentEvalFamily`) and the self-attention classifier of `pooling=selfattn`
(`selfattn.AttentionFamily`). The protocols' flows below are written once over any of them:

- `cross_validated` (MR, CR, SUBJ, MPQA): k outer folds; in each, the penalty chosen on the
  training fold, the final model fitted there and tested on the held-out fold.
- `train_test` (TREC, MRPC): the penalty chosen on train, fitted on train, tested on test.
- `dev_tuned` (SST, SICK-E, SNLI, the probing tasks): a model per penalty fitted on train, the
  best on dev kept and tested.

`x` is anything the family's classifiers read that rows can be taken from (`x[rows]`): an
embedding matrix, embeddings with their sentences (NB features), or row numbers into a
family's own token states.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
from joblib import Parallel, delayed

from mtl.eval.transfer.items import across_folds
from mtl.eval.transfer.progress import silenced, stage


class Classifier(Protocol):
    def fit(self, x: Any, y: np.ndarray, validation: tuple[Any, np.ndarray] | None = None) -> float | None:
        """Train; where it stops early on validation data, return the accuracy it kept."""

    def tested(self, x: Any, y: np.ndarray) -> dict[str, np.ndarray]:
        """Per test item: `predicted`, `gold` and `log_probs` (what ensembles average)."""

    def score(self, x: Any, y: np.ndarray) -> float: ...


# What a task's folds cost to fit, in items x dimensions x outer folds x penalties tried (the fits
# scale with each). Below WORKERS_FROM they are fitted in the caller's process, whatever `jobs`
# says, by the families that use `processes` (scikit-learn's; SentEval's classifier, many epochs a
# fit, weighs its own: senteval_classifier.SENTEVAL_WORKERS_FROM): two workers cost ~8 CPU-s to start (each imports torch and scikit-learn)
# and fit 17-45% slower than the caller (issue 105: CR 4.14 against 3.53 CPU-s, SUBJ 8.36 against
# 7.11), so they never save CPU, and save wall time only where the fits take well over their start.
# CR at 4,096 dimensions under mode=fast is 0.23e9 and fits in ~3.5 s; from 1e9 (~15 s in one
# process: MR, SUBJ or MPQA under the standard protocol, SST2 at 4,096 dimensions) two workers
# halve that wall time for their start. Every fit seeds itself, so where it runs changes no result.
WORKERS_FROM = 1_000_000_000


class ClassifierFamily:
    """The classifiers of one kind, and how a protocol tunes and fits them. Subclasses set the
    grids, the folds and the seed, and write `make` and `choose_penalty`; the final fit, the
    inputs, the reported accuracy and the scheduling of the outer folds have defaults."""

    penalties: tuple[float, ...]  # the grid of cross-validated and dev-tuned tasks
    train_test_penalties: tuple[float, ...]  # TREC's and MRPC's grid
    folds: int  # outer folds of a cross-validated task
    seed: int
    jobs: int = 1  # outer folds fitted in parallel processes
    train_fraction: float = 1.0  # the share of each training fold fitted on (a learning curve)

    def make(self, penalty: float, x: Any, y: np.ndarray) -> Classifier:
        raise NotImplementedError

    def choose_penalty(self, x: Any, y: np.ndarray, penalties: Sequence[float]) -> tuple[float, float | None]:
        """The penalty of `penalties` to fit (x, y) with, and the validation accuracy that chose
        it (None where nothing was compared: a grid of one)."""
        raise NotImplementedError

    def final_fit(self, x: Any, y: np.ndarray, penalty: float) -> tuple[Classifier, float | None]:
        """The model fitted on all of (x, y), and the accuracy it stopped on where it held some out."""
        model = self.make(penalty, x, y)
        return model, model.fit(x, y)

    def prepared(self, x_train: Any, y_train: np.ndarray, others: Sequence[Any]) -> tuple[Any, list[Any]]:
        """What a final fit and its tests read: here the inputs as given; features learned from
        the training rows (NB ratios) are added by the family that learns them."""
        return x_train, list(others)

    def reported(self, accuracy: float) -> float:
        """A validation accuracy as the family reports it (SentEval's: in rounded points)."""
        return accuracy

    def fit_cost(self, x: np.ndarray) -> int:
        """What fitting the folds of `x` costs, in WORKERS_FROM's unit."""
        return x.size * self.folds * max(len(self.penalties), 1)

    def processes(self, x: Any) -> int:
        """The processes that fit the folds of `x`: `jobs` where they pay back, else one (`WORKERS_FROM`)."""
        return 1 if isinstance(x, np.ndarray) and self.fit_cost(x) < WORKERS_FROM else self.jobs

    def fitted_folds(self, x: Any, y: np.ndarray, folds: list[tuple[np.ndarray, np.ndarray]]):
        """Each outer fold's tested items and validation accuracy, in fold order, as they finish."""
        if (jobs := self.processes(x)) == 1:
            return (fold_tested(self, x, y, train, test) for train, test in folds)
        return Parallel(n_jobs=jobs, return_as="generator")(
            delayed(fold_tested)(self, x, y, train, test) for train, test in folds
        )


def in_points(accuracy: float) -> float:
    """An accuracy as SentEval compares penalties: in %, rounded to 2 decimals, so near-ties go
    to the first (smallest) penalty as in its validation.py."""
    return round(100 * float(accuracy), 2)


def best_of(scores: Sequence[float]) -> int:
    """The position of the best accuracy, compared in SentEval's rounded points (first on ties)."""
    return int(np.argmax([in_points(score) for score in scores]))


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


def fold_tested(
    family: ClassifierFamily, x: Any, y: np.ndarray, train: np.ndarray, test: np.ndarray
) -> tuple[dict[str, np.ndarray], float | None]:
    """One outer fold: the penalty chosen on its training rows, the final model's test items,
    and the validation accuracy (the penalty search's, else the final fit's)."""
    train = train[training_share(y[train], family.train_fraction, family.seed)]
    x_fold, y_fold = x[train], y[train]
    with silenced():  # the bar counts the outer folds (a worker process has no listener anyway)
        penalty, validation = family.choose_penalty(x_fold, y_fold, family.penalties)
        x_train, (x_test,) = family.prepared(x_fold, y_fold, [x[test]])
        model, held = family.final_fit(x_train, y_fold, penalty)
    return model.tested(x_test, y[test]), validation if validation is not None else held


def cross_validated(family: ClassifierFamily, x: Any, y: np.ndarray) -> dict:
    """Mean test accuracy over the outer folds; `items`: every item's prediction, from the fold
    it was a test item of (for paired significance tests)."""
    from sklearn.model_selection import StratifiedKFold  # here: classifiers.py's docstring says why

    y = np.asarray(y)
    folds = list(
        StratifiedKFold(family.folds, shuffle=True, random_state=family.seed).split(np.zeros(len(y)), y)
    )
    stage(f"fold 0/{len(folds)}")
    results = []
    for fold in family.fitted_folds(x, y, folds):
        results.append(fold)
        stage(f"fold {len(results)}/{len(folds)}")
    items, accuracy = across_folds(y, [test for _, test in folds], [tested for tested, _ in results])
    return {"acc": accuracy, "dev_acc": float(np.mean([held for _, held in results])), "items": items}


def train_test(family: ClassifierFamily, x_train: Any, y_train, x_test: Any, y_test) -> dict:
    """The penalty chosen on train, then accuracy (and the F1 of class 1 for two classes) on test."""
    from sklearn.metrics import f1_score  # here: classifiers.py's docstring says why

    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    penalty, validation = family.choose_penalty(x_train, y_train, family.train_test_penalties)
    stage("final fit" + (f" (C={penalty:g})" if len(family.train_test_penalties) > 1 else ""))
    x_train, (x_test,) = family.prepared(x_train, y_train, [x_test])
    model, held = family.final_fit(x_train, y_train, penalty)
    items = model.tested(x_test, y_test)
    predicted = items["predicted"]
    binary = len(np.unique(y_train)) == 2  # F1 of class 1: MRPC's; TREC's six classes have none
    return {
        "acc": float((predicted == y_test).mean()),
        **({"f1": float(f1_score(y_test, predicted, average="binary"))} if binary else {}),
        "dev_acc": float(validation if validation is not None else held),
        "items": items,
    }


def dev_tuned(
    family: ClassifierFamily, x_train: Any, y_train, x_dev: Any, y_dev, x_test: Any, y_test
) -> dict:
    """A model per penalty fitted on train (stopping early on dev where it does), the one best
    on dev tested. Each fit seeds itself, so the kept model is the one a refit would give."""
    y_train, y_dev, y_test = np.asarray(y_train), np.asarray(y_dev), np.asarray(y_test)
    x_train, (x_dev, x_test) = family.prepared(x_train, y_train, [x_dev, x_test])
    best, best_score = None, None
    for number, penalty in enumerate(family.penalties, start=1):
        stage(f"choosing C: {number}/{len(family.penalties)}")
        model = family.make(penalty, x_train, y_train)
        kept = model.fit(x_train, y_train, validation=(x_dev, y_dev))  # the dev accuracy it stopped on
        score = model.score(x_dev, y_dev) if kept is None else kept
        if best is None or in_points(score) > in_points(best_score):
            best, best_score = model, score
    items = best.tested(x_test, y_test)
    return {
        "acc": float((items["predicted"] == y_test).mean()),
        "dev_acc": float(family.reported(best_score)),
        "items": items,
    }
