"""How each kind of transfer task is scored: one protocol object per name a task registers with
(`register_transfer_task(name, protocol=...)`), which knows the splits it reads, the sample
counts SentEval reports for it, the split its per-item outputs come from, and how it fits and
scores its features with the run's classifier (fitting.py: scikit-learn's, SentEval's under
`mode=senteval*`, or the self-attention classifier of `pooling=selfattn`).

A plugin task with a protocol of its own is one file: a `TransferProtocol` subclass registered
with `mtl.registry.register_transfer_protocol`, and its task registered with that name.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from mtl.errors import UserError
from mtl.eval.transfer import classifiers as fits
from mtl.eval.transfer import fitting
from mtl.eval.transfer.classifiers import LogisticRegressionFamily, Protocol, WithTexts
from mtl.eval.transfer.features import FEATURE_RECIPES, recipe_name
from mtl.eval.transfer.fitting import ClassifierFamily
from mtl.eval.transfer.senteval_classifier import SentEvalFamily
from mtl.eval.transfer.threads import one_thread_scoring
from mtl.transfer_tasks.registry import TRANSFER_PROTOCOLS, headline_metrics, register_transfer_protocol
from mtl.transfer_tasks.tasks import TransferTask


@dataclass
class TaskFeatures:
    """A task's splits as what a classifier reads: the rows of `embedded` its sentences map to
    (`row`), combined into one feature matrix per split by the task's feature recipe."""

    task: TransferTask
    embedded: np.ndarray
    row: dict[str, int]
    protocol: Protocol

    def columns(self, split: str) -> list[np.ndarray]:
        return [self.embedded[[self.row[t] for t in column]] for column in self.task.splits[split].sentences]

    def recipe(self) -> str:
        columns = len(next(iter(self.task.splits.values())).sentences)
        return recipe_name(self.task.quirks.features, columns, self.protocol.features)

    def features(self, split: str) -> np.ndarray:
        if (name := self.recipe()) not in FEATURE_RECIPES:
            raise UserError(
                f"transfer task {self.task.name}: its entry names the feature recipe {name!r}, which is not one of "
                f"{', '.join(FEATURE_RECIPES)}: load the plugin that registers it with plugins="
            )
        return FEATURE_RECIPES[name](self.columns(split), self.task.splits[split].sentences)

    def inputs(self, split: str):
        """What the classifier reads of a split: its features, with its sentences where the NB
        features are counted inside each fit (features=nb-bigram)."""
        if self.protocol.features != "nb-bigram":
            return self.features(split)
        if len(self.task.splits[split].sentences) != 1:
            raise UserError(f"features=nb-bigram reads one sentence per example: {self.task.name} has pairs")
        return WithTexts(self.features(split), np.asarray(self.task.splits[split].sentences[0], dtype=object))

    def labels(self, split: str) -> np.ndarray:
        return np.asarray(self.task.splits[split].labels)


class TransferProtocol:
    """A way to score a transfer task. Subclasses set `name` (what tasks register with), override
    `score(data, classifier)` (`classifier`: the `fitting.ClassifierFamily` of the run: scikit-
    learn's, SentEval's or the attention's), and say which split tests (`tested`: its per-item
    outputs) and what SentEval counts."""

    name: ClassVar[str]
    tested: ClassVar[str] = "test"
    fitted: ClassVar[bool] = True  # False: nothing is fitted, so SentEval's sorting changes nothing
    graded: ClassVar[bool] = False  # True: the labels are scores on a scale (relatedness), not classes
    # the range of the task's headline metrics as `score` returns them: fractions (accuracy 0..1,
    # correlations -1..1), which reports show x100; a value outside is refused, never printed
    score_range: ClassVar[tuple[float, float]] = (-1.0, 1.0)

    def sizes(self, splits: dict[str, int]) -> dict[str, int]:
        """SentEval's sample counts: `ndev` (what tuned the classifier), `ntest`."""
        return {"ndev": splits["dev"], "ntest": splits["test"]}

    def score(self, data: TaskFeatures, classifier: ClassifierFamily) -> dict:
        raise NotImplementedError


@register_transfer_protocol
class CrossValidated(TransferProtocol):
    """MR, CR, SUBJ, MPQA: k-fold cross-validation on one split (`all`), the penalty chosen by
    inner folds of each training fold."""

    name = "cv"
    tested = "all"

    def sizes(self, splits: dict[str, int]) -> dict[str, int]:
        return {"ndev": splits["all"], "ntest": splits["all"]}

    def score(self, data: TaskFeatures, classifier: ClassifierFamily) -> dict:
        return fitting.cross_validated(classifier, data.inputs("all"), data.labels("all"))


@register_transfer_protocol
class TrainTest(TransferProtocol):
    """TREC, MRPC: the penalty by k folds of train, then trained on train and tested on test."""

    name = "trec"

    def sizes(self, splits: dict[str, int]) -> dict[str, int]:
        return {"ndev": splits["train"], "ntest": splits["test"]}

    def score(self, data: TaskFeatures, classifier: ClassifierFamily) -> dict:
        splits = ("train", "test")
        return fitting.train_test(
            classifier, *(part for s in splits for part in (data.inputs(s), data.labels(s)))
        )


@register_transfer_protocol
class DevTuned(TransferProtocol):
    """SST2, SST5, SICK-E, SNLI: the penalty tuned on dev, tested on test."""

    name = "dev"

    def score(self, data: TaskFeatures, classifier: ClassifierFamily) -> dict:
        splits = ("train", "dev", "test")
        return fitting.dev_tuned(
            classifier, *(part for s in splits for part in (data.inputs(s), data.labels(s)))
        )


@register_transfer_protocol
class Relatedness(TransferProtocol):
    """SICK-R, STS-B: a softmax over the integer scores on [|u-v|, u*v], early-stopped on dev."""

    name = "relatedness"
    graded = True

    def score(self, data: TaskFeatures, classifier: ClassifierFamily) -> dict:
        splits = ("train", "dev", "test")
        return fits.relatedness(
            *(part for s in splits for part in (data.features(s), data.labels(s))),
            data.task.score_range,
            data.protocol,
        )


@register_transfer_protocol
class CosineSTS(TransferProtocol):
    """STS12-16: the cosine of each pair against its gold score, on every subset (all test)."""

    name = "sts"
    fitted = False
    graded = True

    def sizes(self, splits: dict[str, int]) -> dict[str, int]:
        return {"ntest": sum(splits.values())}

    def score(self, data: TaskFeatures, classifier: ClassifierFamily) -> dict:
        return fits.sts_scores({s: (*data.columns(s), data.labels(s)) for s in data.task.splits})


def protocol_of(task: TransferTask) -> TransferProtocol:
    return TRANSFER_PROTOCOLS[task.kind]()


def classifier_family(task: TransferTask, protocol: Protocol) -> ClassifierFamily:
    """The classifier `protocol` names (SentEval's under mode=senteval*, else scikit-learn's),
    with the task's quirks: no penalty (SentEval's noreg: 1e-9 for its classifier, C=1e9), or
    linear under classifier=mlp."""
    quirks = task.quirks
    if senteval := protocol.senteval:
        if quirks.linear_only:
            senteval = dataclasses.replace(senteval, nhid=0)
        if quirks.no_penalty:
            senteval = dataclasses.replace(senteval, penalties=(1e-9,))
        return SentEvalFamily(senteval)
    if quirks.no_penalty:
        protocol = dataclasses.replace(protocol, penalties=(1e9,))
    return LogisticRegressionFamily(protocol)


def scored(task: TransferTask, embedded: np.ndarray, row: dict[str, int], protocol: Protocol) -> dict:
    """The task's classifier (or correlation) fitted and scored on `embedded` sentences (`row`:
    a sentence's row of it), under `protocol` (SentEval's classifier where it names one)."""
    scoring = protocol_of(task)
    with one_thread_scoring():  # every fit and score of the task, this process's and its workers'
        result = scoring.score(TaskFeatures(task, embedded, row, protocol), classifier_family(task, protocol))
    low, high = scoring.score_range
    for metric in headline_metrics(task.name, result):
        value = result.get(metric)
        if isinstance(value, (int, float)) and np.isfinite(value) and not low <= value <= high:
            raise UserError(
                f"transfer task {task.name}: protocol {scoring.name!r} returned {metric}={value:g}, outside "
                f"its score_range [{low:g}, {high:g}]: return fractions (0.568 for 56.8%), which reports "
                "show x100, or declare the protocol's score_range"
            )
    return result
