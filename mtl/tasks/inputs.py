"""A task's input side: the checks of its keys, the keys it takes from the run's other tasks and
its data sources found, without torch.

`TaskInputs` is what a run needs of a task before it trains; `Task` (base.py) adds the model side
(its head, loss and metrics, which import torch). A process that only submits runs (a SLURM
submission, a study checking its members) refuses a bad task with these alone: importing the task
kinds' modules for it cost 1.0 s of torch, half of a SLURM run's extra start (issue 105).
Each built-in kind's class here is the base of its `Task` class, so the checks are written once.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

from mtl.console import say
from mtl.data.classifsquad import check_build
from mtl.data.corpus import resolve_corpus
from mtl.data.snli import resolve_snli_source, training_split
from mtl.errors import UserError
from mtl.files.paths import resolved
from mtl.tasks.configs import (
    CorpusConfig,
    DistillConfig,
    NLIConfig,
    PairsConfig,
    QTConfig,
    RankingConfig,
    SquadConfig,
    SquadRankingConfig,
    STSConfig,
    TaskConfig,
)


def asks_widths(config: TaskConfig) -> bool:
    """Whether the task's config sets matryoshka= or its weights (either alone is checked later)."""
    return bool(config.matryoshka.strip() or config.matryoshka_weights.strip())


class TaskInputs:
    """One task of a run as named in `tasks=`, before any model: its keys checked (a bad one is
    refused when the task is made), `inherit` and `resolve_inputs`."""

    kind: ClassVar[str]  # the name it is registered under
    # How a `train=false` task is scored: "probe" (a linear probe on frozen features: a
    # classification head means nothing untrained), "direct" (its metric needs no trained head:
    # a cosine, in-batch recall), "never" (its head is a trained model of its own).
    untrained: ClassVar[str] = "probe"
    # The task's loss can be taken at several widths of the embeddings (matryoshka=).
    trains_widths: ClassVar[bool] = True

    def __init__(self, name: str, config: TaskConfig):
        self.name, self.config = name, config
        if not config.train and self.untrained == "never":
            raise UserError(
                f"{name}.train=false: a {self.kind} task's head is a model trained with it, so it cannot "
                "watch a run untrained; train it, or watch a task scored without one (sts, mnrl, a classification)"
            )
        if asks_widths(config) and not self.trains_widths:
            raise UserError(
                f"{name}.matryoshka={config.matryoshka}: a {self.kind} task does not train at several widths "
                "(mnrl, qt, sts and the classification tasks do)"
            )

    def inherit(self, tasks: dict[str, TaskConfig]) -> TaskConfig:
        """This task's config with the keys it left unset taken from the run's other tasks (`tasks`,
        by name); called once, before `resolve_inputs`. Most tasks take nothing."""
        return self.config

    def resolve_inputs(self) -> TaskConfig:
        """This task's config with its data sources made absolute (a run records them)."""
        return self.config


class NLIInputs(TaskInputs):
    kind = "nli"
    config: NLIConfig

    def resolve_inputs(self) -> NLIConfig:
        source = resolve_snli_source(self.config.source, self.name)
        return replace(
            self.config, source=source, train_split=training_split(source, self.config.train_split, self.name)
        )


class SquadInputs(TaskInputs):
    kind = "squad"
    config: SquadConfig

    def resolve_inputs(self) -> SquadConfig:
        source = resolved(self.config.source, "classifsquad")
        check_build(source)  # now, not when the first batch is read (or on a cluster's node)
        return replace(self.config, source=str(source))


class FolderInputs(TaskInputs):
    """A task read from the files of a folder (or a Hub dataset): a task file's pairs or scores."""

    config: PairsConfig | STSConfig

    def resolve_inputs(self) -> PairsConfig | STSConfig:
        config = replace(self.config, source=resolve_folder(self.name, self.config.source))
        say_unscored_test(self.name, config.source, config.test)
        return config


class PairsInputs(FolderInputs):
    kind = "pairs"
    config: PairsConfig

    def __init__(self, name: str, config: PairsConfig):
        super().__init__(name, config)
        if len(self.config.class_names) < 2:
            raise UserError(
                f"{name}.labels={self.config.labels!r}: a pair task needs the values of its label column, "
                "at least two, comma-separated in class order (e.g. labels=entailment,neutral,contradiction)"
            )


class STSInputs(FolderInputs):
    kind = "sts"
    untrained = "direct"  # with train=false (see TaskInputs.untrained)
    config: STSConfig

    def __init__(self, name: str, config: STSConfig):
        super().__init__(name, config)
        if not config.high > config.low:
            raise UserError(f"{name}.low={config.low} and high={config.high}: high must be above low")


class CorpusInputs(TaskInputs):
    """A task whose examples come from an ordered corpus (documents of sentences)."""

    config: CorpusConfig

    def resolve_inputs(self) -> CorpusConfig:
        dev = str(resolve_corpus(self.config.dev)) if self.config.dev else ""
        return replace(self.config, corpus=resolve_corpus(self.config.corpus), dev=dev)


class QTInputs(CorpusInputs):
    kind = "qt"
    untrained = "never"  # with train=false (see TaskInputs.untrained)
    config: QTConfig

    def __init__(self, name: str, config: QTConfig):
        super().__init__(name, config)
        if config.context < 3 or config.context % 2 == 0:
            raise UserError(
                f"{name}.context={config.context}: the window holds the sentence and as many neighbours "
                "on each side, an odd number from 3 (3: the previous and the next sentence)"
            )


class SkipThoughtInputs(CorpusInputs):
    kind = "skipthought"
    trains_widths = False  # its decoders start from the whole embedding
    untrained = "never"  # with train=false (see TaskInputs.untrained)


class RankingInputs(TaskInputs):
    kind = "mnrl"
    untrained = "direct"  # with train=false (see TaskInputs.untrained)
    config: RankingConfig

    def inherit(self, tasks: dict[str, TaskConfig]) -> RankingConfig:
        return following_nli(self.config, tasks)

    def resolve_inputs(self) -> RankingConfig:
        source = resolve_snli_source(self.config.source, self.name)
        config = replace(self.config, source=source)
        if config.train_split is not None and not config.triples:
            config = replace(config, train_split=training_split(source, config.train_split, self.name))
        if config.triples:
            config = replace(config, triples=str(self._triples_path().resolve()))
        return config

    def _triples_path(self) -> Path:
        path = Path(self.config.triples).expanduser()
        if not path.is_file():
            raise UserError(
                f"{self.name}.triples={self.config.triples}: no such file; give anchor<TAB>positive<TAB>negative "
                "lines (`just mine-negatives` writes them)"
            )
        return path


class SquadRankingInputs(RankingInputs):
    kind = "squad_ranking"
    config: SquadRankingConfig  # type: ignore[assignment]

    def inherit(self, tasks: dict[str, TaskConfig]) -> SquadRankingConfig:  # type: ignore[override]
        return self.config

    def resolve_inputs(self) -> SquadRankingConfig:  # type: ignore[override]
        key = f"{self.name}.source"
        source = resolved(self.config.source, key)
        check_build(source, key)  # now, not at the first batch
        return replace(self.config, source=str(source))


class DistillInputs(TaskInputs):
    kind = "distill"
    trains_widths = False  # mse maps the whole embedding onto the teacher's width
    untrained = "never"  # mse's map onto the teacher's width is trained with the task
    config: DistillConfig

    def __init__(self, name: str, config: DistillConfig):
        super().__init__(name, config)
        if not config.teacher:
            raise UserError(
                f"{name}.teacher= is empty: give the encoder to learn from, an mtl run folder or a Hugging Face "
                "model folder or Hub id (sentence-transformers/all-MiniLM-L6-v2)"
            )
        if config.sentences_of and config.loss != "mse":
            raise UserError(
                f"{name}.sentences_of={config.sentences_of}: another task's sentences come without the "
                f"candidates {name}.loss={config.loss} compares; use {name}.loss=mse, or a corpus= of "
                "tab-separated examples"
            )
        if config.sentences_of and config.corpus:
            raise UserError(
                f"{name}.sentences_of={config.sentences_of} and {name}.corpus={config.corpus} both name the "
                "sentences to distill: give one"
            )

    def inherit(self, tasks: dict[str, TaskConfig]) -> DistillConfig:
        donor = self.config.sentences_of
        if donor:
            others = [name for name in tasks if name != self.name and tasks[name].kind != "distill"]
            if donor not in others:
                raise UserError(
                    f"{self.name}.sentences_of={donor}: the run has no such task to take sentences from"
                    f" (its others: {', '.join(others) or 'none'}); add it to tasks=, with {donor}.train=false"
                    " where it should not train itself"
                )
        return self.config if self.config.corpus or donor else following_nli(self.config, tasks)

    def resolve_inputs(self) -> DistillConfig:
        """Local paths made absolute (a resumed run finds them from anywhere); a Hub id stays one."""
        teacher = Path(self.config.teacher).expanduser()
        config = replace(
            self.config, teacher=str(teacher.resolve()) if teacher.exists() else self.config.teacher
        )
        if config.corpus:
            return replace(config, corpus=str(self._corpus_path().resolve()))
        if config.sentences_of:
            return config
        source = resolve_snli_source(config.source, self.name)
        split = (
            training_split(source, config.train_split, self.name)
            if config.train_split
            else config.train_split
        )
        return replace(config, source=source, train_split=split)

    def _corpus_path(self) -> Path:
        path = Path(self.config.corpus).expanduser()
        if not path.is_file():
            raise UserError(
                f"{self.name}.corpus={self.config.corpus}: no such file; give a text file, an example a line"
            )
        return path


def following_nli(config, tasks: dict[str, TaskConfig]):
    """`config` with SNLI's source and splits it left unset following the run's `nli` task
    (nli.train_split=train_small then holds for both), else SNLI's own."""
    nli = tasks.get("nli")
    follow = nli if isinstance(nli, NLIConfig) and not nli.display else NLIConfig()
    return replace(
        config,
        **{
            key: getattr(follow, key)
            for key in ("source", "train_split", "dev_split", "test_split")
            if getattr(config, key) is None
        },
    )


def resolve_folder(task: str, source: str) -> str:
    """A task file's `source`: an absolute folder ($VARS and ~ expanded), or a Hub dataset id."""
    expanded = os.path.expanduser(os.path.expandvars(source))
    if Path(expanded).is_dir():
        return str(Path(expanded).resolve())
    if "$" in expanded or expanded.count("/") != 1 or expanded.startswith((".", "/", "~")):
        raise UserError(
            f"{task}.source={source}: no such folder ({expanded}); point it at the "
            "folder of the task's files (or set the variable it names), or give a Hub dataset id"
        )
    return expanded


SPLIT_ALIASES = {"dev": ("validation", "valid"), "validation": ("dev",)}


def parquet_files(folder: Path, stem: str) -> list[Path]:
    """The Parquet files of split `stem` (dev also finds validation) in `folder` or its data/."""
    for name in (stem, *SPLIT_ALIASES.get(stem, ())):
        for place in (folder, folder / "data"):
            found = sorted({*place.glob(f"{name}.parquet"), *place.glob(f"{name}-*.parquet")})
            if found:
                return found
    return []


def say_unscored_test(task: str, source: str, test: str) -> None:
    """A note when `source` (a folder) holds a test split that `<task>.test=` leaves unscored:
    a saved DatasetDict's, or Parquet files of one (test= is empty by default, a file name)."""
    folder = Path(source)
    if test or not folder.is_dir():
        return
    splits = []
    if (folder / "dataset_dict.json").is_file():
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            splits = list(json.loads((folder / "dataset_dict.json").read_text(encoding="utf-8"))["splits"])
    if "test" in splits or parquet_files(folder, "test"):
        say(
            f"note: {task}: {source} holds a test split this run does not score: {task}.test=test scores it once, at the end"
        )
