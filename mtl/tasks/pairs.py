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
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from mtl.data.texts import LabelledTexts
from mtl.errors import UserError
from mtl.models.heads import HeadRecipe
from mtl.tasks.base import Task
from mtl.tasks.configs import PairsConfig, STSConfig
from mtl.tasks.inputs import SPLIT_ALIASES, PairsInputs, parquet_files
from mtl.tasks.kinds import register
from mtl.tasks.nli import pair_recipe
from mtl.text.unicode import decode_utf8, invalid_unicode, text_lines


@register
class Pairs(PairsInputs, Task):
    config_class = PairsConfig
    config: PairsConfig

    def __init__(self, name: str, config: PairsConfig):
        super().__init__(name, config)
        classes = len(self.config.class_names)
        self.recipe = pair_recipe(classes) if self.config.second else single_recipe(classes)

    def load(self, split: str) -> LabelledTexts | None:
        config = self.config
        name = {"train": config.train_file, "dev": config.dev, "test": config.test}[split]
        if not name:
            return None
        columns = tuple(c for c in (config.first, config.second, config.label) if c)
        rows = read_rows(
            self.name, config.source, name, config.format, config.header, columns, config.subset,
            streamed_rows(config, split), split,
            # a saved dataset's ClassLabel column gives its names, unless labels= are its numbers
            label_names=not all(n.isdigit() for n in config.class_names),
        )  # fmt: skip
        classes = {name: index for index, name in enumerate(config.class_names)}
        first, second, labels = [], [], []
        for row in rows:
            label = classes.get(str(row.values[config.label]).strip())
            if label is None:
                continue  # unlabelled (SNLI's '-') or a class this task does not train
            first.append(str(row.values[config.first]))
            second.append(str(row.values[config.second]) if config.second else "")
            labels.append(label)
        if not labels:
            raise UserError(
                f"{config.source}/{name} holds no row labelled one of {config.labels}: set {self.name}.labels= "
                f"to the values of its {config.label!r} column"
            )
        return LabelledTexts([first, second] if config.second else [first], labels)


def single_recipe(classes: int) -> HeadRecipe:
    """One sentence per example: the classifier reads its embedding u."""
    return HeadRecipe(sentences=1, outputs=classes, features=alone, width=1, pairs=(), calls=((0,),))


def alone(u: torch.Tensor) -> torch.Tensor:
    return u


def read_rows(
    task: str,
    source: str,
    name: str,
    format: str,
    header: bool = True,
    columns: tuple[str, ...] = (),
    subset: str = "",
    stream: int | None = None,
    split: str = "train",
    label_names: bool = False,
) -> list[Row]:
    """The rows of file `name` in folder `source` (or split `name` of Hub dataset `source`), each
    with its line number; without a `header` line, a tsv or csv file's columns are named 0, 1, 2, ...

    Every row is checked as it is read: an object (JSON Lines), holding each of `columns` with a
    text or a number, so a bad row is an error naming the file and line, never a traceback or a
    sentence read as "None". `split` (train, dev, test) is the role of the rows asked for.
    `label_names`: a saved dataset's ClassLabel columns as their class names, not their numbers."""
    folder = Path(source)
    if not folder.is_dir():
        import datasets  # a second to import: only for a Hub dataset

        try:
            if stream is None:
                rows = list(datasets.load_dataset(source, subset or None, split=name))
            else:  # only the rows wanted cross the network
                streamed = datasets.load_dataset(source, subset or None, split=name, streaming=True)
                rows = list(itertools.islice(streamed, stream))
        except Exception as error:  # the Hub and datasets raise many types
            where = f"{source} ({subset})" if subset else source
            raise UserError(f"{task}: cannot load {where} split {name!r} ({error})") from None
        return _numbered(rows, f"{source} split {name}", task, columns)
    if saved_dataset(folder):
        rows = _saved_split(task, folder, name, split, label_names)
        return _numbered(rows, f"{folder} split {name}", task, columns)
    path = folder / name
    not_a_table = format == "parquet" and path.suffix not in (".parquet", ".arrow")  # the default train.jsonl
    if (not path.is_file() or not_a_table) and (tables := parquet_files(folder, Path(name).stem)):
        # a folder of Parquet files as the Hub exports datasets (train-00000-of-00001.parquet,
        # data/validation-....parquet): the split's files, read in order, found without keys
        rows = [row for table in tables for row in _table_rows(task, table, label_names)]
        return _numbered(rows, f"{folder} ({', '.join(t.name for t in tables)})", task, columns)
    if not path.is_file():
        raise UserError(f"{task}: {path} does not exist: fix {task}.train_file/dev/test= or source=")
    if path.suffix in (".parquet", ".arrow"):
        return _numbered(_table_rows(task, path, label_names), str(path), task, columns)
    lines = text_lines(decode_utf8(path.read_bytes(), f"{task} file", path))
    if format == "jsonl":
        return _checked(list(_json_rows(lines, path, task)), str(path), task, columns)
    delimiter = "\t" if format == "tsv" else ","
    quoting = csv.QUOTE_NONE if format == "tsv" else csv.QUOTE_MINIMAL
    reader = csv.reader(lines, delimiter=delimiter, quoting=quoting)
    records = []  # (line number, fields) of each row that is not empty
    try:
        for row in reader:
            if row:
                records.append((reader.line_num, row))
    except csv.Error as error:
        raise UserError(f"{path} is not {format} ({error}): fix it or set {task}.format=") from None
    if header:
        if not records:
            return []
        names, records = records[0][1], records[1:]
    else:
        names = [str(i) for i in range(max((len(row) for _, row in records), default=0))]
    rows = []
    for number, row in records:
        if len(row) != len(names):
            raise UserError(
                f"{path} line {number} has {len(row)} {format} columns where "
                f"{'its header names' if header else 'the longest row has'} {len(names)}: fix the line"
            )
        rows.append(Row(number, dict(zip(names, row, strict=True))))
    return _checked(rows, str(path), task, columns)


def streamed_rows(config: PairsConfig | STSConfig, split: str) -> int | None:
    """How many rows of a Hub split to stream: the training split's max_train when the task
    streams (None: read the split whole)."""
    return config.max_train if config.streaming and split == "train" and config.max_train else None


def saved_dataset(folder: Path) -> bool:
    """A folder `datasets`' save_to_disk wrote: a DatasetDict (dataset_dict.json) or one Dataset."""
    return (folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file()


# A task file's default file names, and the split names `datasets` uses for them.


def _saved_split(task: str, folder: Path, name: str, split: str, label_names: bool = False) -> list[dict]:
    """Split `name` of a save_to_disk folder: the split itself, or the one its file name's stem
    names (train.jsonl -> train; dev.jsonl -> dev, else validation). One saved Dataset has no
    splits: it is the training rows, and never the dev or test rows too."""
    import datasets  # only for a saved dataset

    try:
        saved = datasets.load_from_disk(str(folder))
    except Exception as error:  # a damaged folder raises many types
        raise UserError(f"{task}: {folder} is not a dataset save_to_disk can read back ({error})") from None
    if isinstance(saved, datasets.Dataset):
        if split != "train":  # its rows as dev or test would score the model on what it trained on
            raise UserError(
                f"{task}: {folder} is one saved Dataset, without splits: it gives the training rows only; "
                f"set {task}.{split}= empty (no {split} set), or save a DatasetDict with train, validation "
                "and test"
            )
        return _named(saved, label_names)
    stem = Path(name).stem
    for candidate in (name, stem, *SPLIT_ALIASES.get(stem, ())):
        if candidate in saved:
            return _named(saved[candidate], label_names)
    raise UserError(
        f"{task}: {folder} (a saved dataset) has no split {name!r}: it has {', '.join(saved)}; "
        f"set {task}.train_file=, dev= or test= to one of them"
    )


def _class_names(rows: list[dict], metadata: dict[bytes, bytes]) -> list[dict]:
    """`rows` with each ClassLabel value the file's `datasets` features name as its class's name
    (-1, no gold label, as "-"); rows as they are without such features."""
    try:
        features = json.loads(metadata[b"huggingface"])["info"]["features"]
        names = {
            column: feature["names"]
            for column, feature in features.items()
            if isinstance(feature, dict)
            and feature.get("_type") == "ClassLabel"
            and isinstance(feature.get("names"), list)
        }
    except (KeyError, TypeError, ValueError, AttributeError):
        return rows
    for row in rows:
        for column, classes in names.items():
            value = row.get(column)
            if isinstance(value, int) and not isinstance(value, bool):
                row[column] = str(classes[value]) if 0 <= value < len(classes) else "-"
    return rows


def _named(dataset, label_names: bool) -> list[dict]:
    """The rows of a saved Dataset; with `label_names`, each ClassLabel value as its class's name
    (SNLI's -1, no gold label, as "-"), so labels= names the classes as the dataset does."""
    import datasets

    rows = dataset.to_list()
    if label_names:
        for column, feature in dataset.features.items():
            if isinstance(feature, datasets.ClassLabel):
                for row in rows:
                    value = row[column]
                    row[column] = feature.int2str(value) if isinstance(value, int) and value >= 0 else "-"
    return rows


def _table_rows(task: str, path: Path, label_names: bool = False) -> list[dict]:
    """The rows of a Parquet file, or of an Arrow file (IPC file or stream, as `datasets` writes);
    with `label_names`, a ClassLabel column of a Parquet file `datasets` wrote (its features in the
    file's metadata, as the Hub's Parquet exports keep them) as its class names."""
    import pyarrow as pa  # datasets' own dependency
    import pyarrow.parquet as pq

    try:
        if path.suffix == ".parquet":
            table = pq.read_table(path)
            return (
                _class_names(table.to_pylist(), table.schema.metadata or {})
                if label_names
                else table.to_pylist()
            )
        try:
            with pa.memory_map(str(path)) as source:
                return pa.ipc.open_file(source).read_all().to_pylist()
        except pa.ArrowInvalid:
            with pa.memory_map(str(path)) as source:
                rows = pa.ipc.open_stream(source).read_all().to_pylist()
    except (pa.ArrowException, OSError) as error:
        raise UserError(f"{task}: {path} is not a readable {path.suffix[1:]} file ({error})") from None
    # A stream cut at a batch boundary reads as fewer rows: only its end-of-stream marker tells.
    with open(path, "rb") as file:
        file.seek(max(0, path.stat().st_size - len(END_OF_STREAM)))
        if file.read() != END_OF_STREAM:
            raise UserError(
                f"{task}: {path} is an Arrow stream cut short (no end-of-stream marker after {len(rows):,} "
                "rows): write it again"
            )
    return rows


END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"  # Arrow IPC: continuation, then a length of 0


def _numbered(rows: list[dict], where: str, task: str, columns: tuple[str, ...]) -> list[Row]:
    """Rows of a table (a Hub split, a saved dataset, a Parquet or Arrow file), numbered from 1."""
    return _checked([Row(number, row) for number, row in enumerate(rows, 1)], where, task, columns)


@dataclass
class Row:
    """A row of a task file: its line number (a Hub split: its position) and its values by column."""

    line: int
    values: dict


def _json_rows(lines: list[str], path: Path, task: str) -> Iterator[Row]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as error:
            reason = "nested too deeply" if isinstance(error, RecursionError) else error
            raise UserError(
                f"{path} line {number} is not JSON ({reason}): fix it or set {task}.format="
            ) from None
        if not isinstance(row, dict):
            raise UserError(
                f"{path} line {number} is a JSON {type(row).__name__}, not an object of columns: fix the line"
            )
        yield Row(number, row)


def _checked(rows: list[Row], where: str, task: str, columns: tuple[str, ...]) -> list[Row]:
    for row in rows:
        for column in columns:
            if column not in row.values:
                raise UserError(
                    f"{where} line {row.line} has no column {column!r} (it has "
                    f"{', '.join(map(str, row.values)) or 'none'}): fix the line, or set {task}'s column keys"
                )
            value = row.values[column]
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise UserError(
                    f"{where} line {row.line}: column {column!r} holds {type(value).__name__} "
                    f"{_shown(value)}, not a text or a number: fix the line"
                )
            if isinstance(value, str) and (bad := invalid_unicode(value)):
                raise UserError(f"{where} line {row.line}: column {column!r} holds a lone surrogate ({bad})")
    return rows


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
