"""One entry per transfer task: how its data is read, which protocol scores it, the metrics its
headline shows (with their direction, from `mtl.metrics`) and whether pooling=selfattn can train
attention for it. The suite, the report file, `just report`, `just compare`, `just decompose` and
W&B's tables all take their task lists and columns from here, so a task registered by a plugin
appears in each of them.

Imports nothing of the suite: the read side (`mtl.analysis`) uses it without loading a protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtl.errors import UserError

# How a task is scored (protocols.py, one class each): k-fold cross-validation on one split;
# TREC's cross-validation on train then its test set; train/dev/test; SICK-R-style relatedness;
# unsupervised STS (cosine against gold scores on every subset). Named here so that tasks register
# without loading the protocols' code (the read side never does).
BUILT_IN_PROTOCOLS = ("cv", "trec", "dev", "relatedness", "sts")
CLASSIFIED = ("cv", "trec", "dev")  # the protocols that fit a classifier (ensemble=mean averages them)

# name -> protocol class (a protocols.TransferProtocol): the built-in ones when the suite loads
# protocols.py, a plugin's when it registers one
TRANSFER_PROTOCOLS: dict[str, type] = {}


def register_transfer_protocol(cls: type) -> type:
    """Register a `TransferProtocol` subclass under its `name` (a class decorator): transfer tasks
    registered with `protocol=<name>` are scored by it."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"transfer protocol {cls.__name__}: give it a class attribute name = '...'")
    TRANSFER_PROTOCOLS[name] = cls
    return cls


def protocol_names() -> tuple[str, ...]:
    return tuple(dict.fromkeys((*BUILT_IN_PROTOCOLS, *TRANSFER_PROTOCOLS)))


@dataclass(frozen=True)
class SentEvalQuirks:
    """Where SentEval's code treats a task unlike the rest of its protocol, as the task's entry
    says: SNLI's classifier reads [u, v, u*v, |u-v|] (`features="nli"`, a recipe of
    features.py; other pairs read [|u-v|, u*v]), is fitted without a penalty (`no_penalty`: C=1e9,
    its own classifier's 1e-9) and sorts its pairs by the second sentence first (`sort_columns`);
    the probing task WordContent stays linear under classifier=mlp (`linear_only`)."""

    features: str | None = None  # a feature recipe's name; None: by the task's sentence positions
    no_penalty: bool = False
    sort_columns: tuple[int, ...] | None = None  # the columns' order in SentEval's sort; None: as they are
    linear_only: bool = False


@dataclass(frozen=True)
class TransferTaskSpec:
    name: str
    read: Callable[[Path], Any]  # SentEval's downstream folder -> a `tasks.TransferTask`
    protocol: str  # a protocol's name (protocol_names())
    metrics: tuple[str, ...]  # the headline's values, the ranking one first (acc; acc, f1; pearson)
    attention: bool = False  # a classification task pooling=selfattn can train attention for
    in_all: bool = True  # part of tasks=all
    quirks: SentEvalQuirks = SentEvalQuirks()


TRANSFER_TASKS: dict[str, TransferTaskSpec] = {}


def register_transfer_task(
    name: str,
    protocol: str,
    metrics: tuple[str, ...] = ("acc",),
    attention: bool = False,
    in_all: bool = True,
    quirks: SentEvalQuirks = SentEvalQuirks(),
) -> Callable[[Callable[[Path], Any]], Callable[[Path], Any]]:
    """Register a transfer task's reader under `name` (a decorator): `tasks=NAME` evaluates it,
    and every report shows its headline after the tasks registered before it."""
    if protocol not in protocol_names():
        raise ValueError(
            f"transfer task {name}: protocol {protocol!r} is not one of {', '.join(protocol_names())} "
            "(register a new one with register_transfer_protocol first)"
        )

    def add(reader: Callable[[Path], Any]) -> Callable[[Path], Any]:
        TRANSFER_TASKS[name] = TransferTaskSpec(
            name, reader, protocol, tuple(metrics), attention, in_all, quirks
        )
        return reader

    return add


def spec(name: str) -> TransferTaskSpec:
    if name not in TRANSFER_TASKS:
        raise UserError(
            f"unknown transfer task {name!r}: choose from {', '.join(TRANSFER_TASKS)} "
            "(a plugin's own: load it with plugins=)"
        )
    return TRANSFER_TASKS[name]


def default_tasks(attention: bool = False) -> list[str]:
    """What tasks=all evaluates (with pooling=selfattn: the tasks that can train attention)."""
    return [n for n, s in TRANSFER_TASKS.items() if s.in_all and (s.attention or not attention)]


def ordered(names: Any) -> list[str]:
    """`names` in the order of the registry (Table 2's columns first), then any unknown by name:
    a report written with a plugin that is not loaded now still shows its tasks."""
    names = set(names)
    return [n for n in TRANSFER_TASKS if n in names] + sorted(names - set(TRANSFER_TASKS))


def headline_metrics(name: str, result: dict[str, Any]) -> tuple[str, ...]:
    """The metrics of a task's headline: MTEB's main score for a result of `just mteb` (whose
    STS12-16 share their names with SentEval's tasks), else the task's registered ones, or for a
    task unknown here the first of acc, pearson, all/pearson+spearman that its result holds."""
    if "main_score" in result:  # an MTEB task (`just mteb`), even one named as a SentEval task
        return ("main_score",)
    if name in TRANSFER_TASKS:
        return TRANSFER_TASKS[name].metrics
    if "all/pearson" in result:
        return ("all/pearson", "all/spearman")
    return ("pearson",) if "pearson" in result else ("acc",)
