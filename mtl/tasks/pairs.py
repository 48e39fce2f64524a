"""`pairs`: sentence-pair (or single-sentence) classification from files with named columns,
defined without code.

The kind of MultiNLI, Quora Question Pairs or SICK-E: a folder of jsonl, tsv or csv files
(or a Hugging Face Hub dataset id), one sentence column each for the pair, a label column
whose values `labels` lists in class order. A task file (`tasks=./my-task.toml`) sets these
keys; the task is named by the file's stem. The head is NLI's: [u, v, |u-v|, u*v]. With no
`second` column it classifies one sentence from u alone (SST: InferSent's encoder trained on
another supervised task, Conneau et al. 2017, Table 4).
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import torch

from mtl.data.texts import LabelledTexts
from mtl.errors import UserError
from mtl.models.heads import HeadRecipe
from mtl.tasks.base import Task, TaskConfig, register
from mtl.tasks.nli import pair_recipe
from mtl.text.unicode import decode_utf8


@dataclass
class PairsConfig(TaskConfig):
    kind: str = "pairs"
    source: str = ""  # a folder holding the split files ($VARS and ~ expanded), or a Hub dataset id
    format: Literal["jsonl", "tsv", "csv"] = "jsonl"  # of the split files (a Hub dataset has its own)
    header: bool = True  # tsv/csv: the first line names the columns; false: they are named 0, 1, 2, ...
    train: str = "train.jsonl"  # training file in source (a Hub id: the split's name)
    dev: str = "dev.jsonl"  # file that picks the best checkpoint
    test: str = ""  # file scored once at the end; empty: none
    first: str = "sentence1"  # column of the first sentence
    second: str = "sentence2"  # column of the second sentence; empty: one sentence per example (SST)
    label: str = "label"  # column of the class
    labels: str = (
        ""  # the label column's values in class order, comma-separated; rows with others are skipped
    )
    display: str = ""  # the dataset's name in reports (the task's name when empty)

    @property
    def class_names(self) -> list[str]:
        return [name.strip() for name in self.labels.split(",") if name.strip()]


@register
class Pairs(Task):
    kind = "pairs"
    config_class = PairsConfig
    config: PairsConfig

    def __init__(self, name: str, config: TaskConfig):
        super().__init__(name, config)
        if len(self.config.class_names) < 2:
            raise UserError(
                f"{name}.labels={self.config.labels!r}: a pair task needs the values of its label column, "
                "at least two, comma-separated in class order (e.g. labels=entailment,neutral,contradiction)"
            )
        classes = len(self.config.class_names)
        self.recipe = pair_recipe(classes) if self.config.second else single_recipe(classes)

    def resolve_inputs(self) -> PairsConfig:
        return replace(self.config, source=resolve_folder(self.name, self.config.source))

    def load(self, split: str) -> LabelledTexts | None:
        name = {"train": self.config.train, "dev": self.config.dev, "test": self.config.test}[split]
        if not name:
            return None
        rows = read_rows(self.name, self.config.source, name, self.config.format, self.config.header)
        return self._labelled(rows, f"{self.config.source}/{name}")

    def _labelled(self, rows: list[dict], where: str) -> LabelledTexts:
        config = self.config
        columns = [c for c in (config.first, config.second, config.label) if c]
        if rows and (missing := [c for c in columns if c not in rows[0]]):
            raise UserError(
                f"{where} has no column {missing[0]!r} (it has {', '.join(map(str, rows[0]))}): "
                f"set {self.name}.first=, second= and label= to its columns"
            )
        classes = {name: index for index, name in enumerate(config.class_names)}
        first, second, labels = [], [], []
        for row in rows:
            label = classes.get(str(row[config.label]).strip())
            if label is None:
                continue  # unlabelled (SNLI's '-') or a class this task does not train
            first.append(str(row[config.first]))
            second.append(str(row[config.second]) if config.second else "")
            labels.append(label)
        if not labels:
            raise UserError(
                f"{where} holds no row labelled one of {config.labels}: set {self.name}.labels= to the "
                f"values of its {config.label!r} column"
            )
        return LabelledTexts([first, second] if config.second else [first], labels)


def single_recipe(classes: int) -> HeadRecipe:
    """One sentence per example: the classifier reads its embedding u."""
    return HeadRecipe(sentences=1, outputs=classes, features=alone, width=1, pairs=(), calls=((0,),))


def alone(u: torch.Tensor) -> torch.Tensor:
    return u


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


def read_rows(task: str, source: str, name: str, format: str, header: bool = True) -> list[dict]:
    """The rows of file `name` in folder `source` (or split `name` of Hub dataset `source`) as
    dicts by column; without a `header` line, a tsv or csv file's columns are named 0, 1, 2, ..."""
    folder = Path(source)
    if not folder.is_dir():
        import datasets

        try:
            return list(datasets.load_dataset(source, split=name))
        except Exception as error:  # the Hub and datasets raise many types
            raise UserError(f"{task}: cannot load {source} split {name!r} ({error})") from None
    path = folder / name
    if not path.is_file():
        raise UserError(f"{task}: {path} does not exist: fix {task}.train/dev/test= or source=")
    text = decode_utf8(path.read_bytes(), f"{task} file", path)
    if format == "jsonl":
        try:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as error:
            raise UserError(f"{path} is not JSON lines ({error}): fix it or set {task}.format=") from None
    delimiter = "\t" if format == "tsv" else ","
    quoting = csv.QUOTE_NONE if format == "tsv" else csv.QUOTE_MINIMAL
    lines = text.splitlines()
    if header:
        return list(csv.DictReader(lines, delimiter=delimiter, quoting=quoting))
    return [
        {str(i): value for i, value in enumerate(row)}
        for row in csv.reader(lines, delimiter=delimiter, quoting=quoting)
        if row
    ]
