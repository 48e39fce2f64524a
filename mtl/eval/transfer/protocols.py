"""How each kind of transfer task is scored: one protocol object per name a task registers with
(`register_transfer_task(name, protocol=...)`), which knows the splits it reads, the sample
counts SentEval reports for it, the split its per-item outputs come from, and how it fits and
scores its features (scikit-learn's protocols, or SentEval's classifier under `mode=senteval*`).

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
from mtl.eval.transfer import senteval_classifier
from mtl.eval.transfer.classifiers import Protocol, relatedness_features
from mtl.eval.transfer.registry import TRANSFER_PROTOCOLS, register_transfer_protocol
from mtl.eval.transfer.senteval_classifier import SentEvalParams
from mtl.eval.transfer.skipthought_features import pair_statistics
from mtl.eval.transfer.tasks import TransferTask
from mtl.text.tokenizer import make_tokenizer


@dataclass
class TaskFeatures:
    """A task's splits as what a classifier reads: the rows of `embedded` its sentences map to
    (`row`), combined into one feature matrix per split as the task and the protocol ask."""

    task: TransferTask
    embedded: np.ndarray
    row: dict[str, int]
    protocol: Protocol

    def columns(self, split: str) -> list[np.ndarray]:
        return [self.embedded[[self.row[t] for t in column]] for column in self.task.splits[split].sentences]

    def features(self, split: str) -> np.ndarray:
        # SentEval's code feeds SICK-E and MRPC [|u-v|, u*v] (sick.py, mrpc.py), though its paper
        # writes <u, v, |u-v|, u*v> for inference tasks: mtl follows the code, which made its numbers.
        parts = self.columns(split)
        if len(parts) == 1:
            return parts[0]
        if self.task.nli_features:  # SentEval's SNLI: [u, v, u*v, |u-v|]
            u, v = parts
            return np.concatenate([u, v, u * v, np.abs(u - v)], axis=1)
        if self.protocol.features == "skipthought-mrpc":  # Skip-Thought 3.3: [|u-v|, u*v, feats]
            tokenizer = make_tokenizer("spacy", lowercase=False)
            a, b = (tokenizer.tokenize(column) for column in self.task.splits[split].sentences)
            return np.concatenate([relatedness_features(*parts), pair_statistics(a, b)], axis=1)
        return relatedness_features(*parts)

    def texts(self, *splits: str) -> list[list[str]] | None:
        """Each split's sentences, for NB features (features=nb-bigram); None otherwise."""
        if self.protocol.features != "nb-bigram":
            return None
        if any(len(self.task.splits[s].sentences) != 1 for s in splits):
            raise UserError(f"features=nb-bigram reads one sentence per example: {self.task.name} has pairs")
        return [self.task.splits[s].sentences[0] for s in splits]

    def labels(self, split: str) -> np.ndarray:
        return np.asarray(self.task.splits[split].labels)


class TransferProtocol:
    """A way to score a transfer task. Subclasses set `name` (what tasks register with), override
    `score`, and say which split tests (`tested`: its per-item outputs) and what SentEval counts."""

    name: ClassVar[str]
    tested: ClassVar[str] = "test"
    fitted: ClassVar[bool] = True  # False: nothing is fitted, so SentEval's sorting changes nothing
    graded: ClassVar[bool] = False  # True: the labels are scores on a scale (relatedness), not classes

    def sizes(self, splits: dict[str, int]) -> dict[str, int]:
        """SentEval's sample counts: `ndev` (what tuned the classifier), `ntest`."""
        return {"ndev": splits["dev"], "ntest": splits["test"]}

    def score(self, data: TaskFeatures, senteval: SentEvalParams | None) -> dict:
        raise NotImplementedError


@register_transfer_protocol
class CrossValidated(TransferProtocol):
    """MR, CR, SUBJ, MPQA: k-fold cross-validation on one split (`all`), the penalty chosen by
    inner folds of each training fold."""

    name = "cv"
    tested = "all"

    def sizes(self, splits: dict[str, int]) -> dict[str, int]:
        return {"ndev": splits["all"], "ntest": splits["all"]}

    def score(self, data: TaskFeatures, senteval: SentEvalParams | None) -> dict:
        if senteval:
            return senteval_classifier.inner_kfold(data.features("all"), data.labels("all"), senteval)
        texts = data.texts("all")
        return fits.cross_validated_accuracy(
            data.features("all"), data.labels("all"), data.protocol, texts=texts and texts[0]
        )


@register_transfer_protocol
class TrainTest(TransferProtocol):
    """TREC, MRPC: the penalty by k folds of train, then trained on train and tested on test."""

    name = "trec"

    def sizes(self, splits: dict[str, int]) -> dict[str, int]:
        return {"ndev": splits["train"], "ntest": splits["test"]}

    def score(self, data: TaskFeatures, senteval: SentEvalParams | None) -> dict:
        train_test = senteval_classifier.kfold_train_test if senteval else fits.train_test_accuracy
        return train_test(
            data.features("train"),
            data.labels("train"),
            data.features("test"),
            data.labels("test"),
            senteval or data.protocol,
        )


@register_transfer_protocol
class DevTuned(TransferProtocol):
    """SST2, SST5, SICK-E, SNLI: the penalty tuned on dev, tested on test."""

    name = "dev"

    def score(self, data: TaskFeatures, senteval: SentEvalParams | None) -> dict:
        split_data = [part for s in ("train", "dev", "test") for part in (data.features(s), data.labels(s))]
        if senteval:
            return senteval_classifier.split(*split_data, senteval)
        return fits.dev_tuned_accuracy(*split_data, data.protocol, texts=data.texts("train", "dev", "test"))


@register_transfer_protocol
class Relatedness(TransferProtocol):
    """SICK-R, STS-B: a softmax over the integer scores on [|u-v|, u*v], early-stopped on dev."""

    name = "relatedness"
    graded = True

    def score(self, data: TaskFeatures, senteval: SentEvalParams | None) -> dict:
        x = {s: relatedness_features(*data.columns(s)) for s in ("train", "dev", "test")}
        return fits.relatedness(
            x["train"],
            data.labels("train"),
            x["dev"],
            data.labels("dev"),
            x["test"],
            data.labels("test"),
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

    def score(self, data: TaskFeatures, senteval: SentEvalParams | None) -> dict:
        return fits.sts_scores({s: (*data.columns(s), data.labels(s)) for s in data.task.splits})


def protocol_of(task: TransferTask) -> TransferProtocol:
    return TRANSFER_PROTOCOLS[task.kind]()


def scored(task: TransferTask, embedded: np.ndarray, row: dict[str, int], protocol: Protocol) -> dict:
    """The task's classifier (or correlation) fitted and scored on `embedded` sentences (`row`:
    a sentence's row of it), under `protocol` (SentEval's classifier where it names one)."""
    senteval = protocol.senteval
    if task.linear_only and senteval:
        senteval = dataclasses.replace(senteval, nhid=0)
    if task.no_penalty:  # SentEval's noreg: one penalty, next to none (1e-9 for its classifier, C=1e9)
        protocol = dataclasses.replace(protocol, penalties=(1e9,))
        senteval = senteval and dataclasses.replace(senteval, penalties=(1e-9,))
    return protocol_of(task).score(TaskFeatures(task, embedded, row, protocol), senteval)
