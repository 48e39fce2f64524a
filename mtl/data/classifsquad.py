"""The ClassifSQuAD folder format, written by `dataset_builders.classifsquad` and read for training.

A `datasets.DatasetDict` saved to disk (one folder per split, `dataset_dict.json`), plus the
build's `stats.json` and dataset card `README.md`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from mtl.data.texts import LabelledTexts
from mtl.errors import UserError

if TYPE_CHECKING:
    import datasets
    import pyarrow as pa

# pyarrow is imported where a build is written or read: it starts a thread (jemalloc's), and a
# process that only checks a build (a run's inputs, imported by every trainer) must stay free to
# fork (a study's fork server, mtl/member_server.py).

BUILD_FILES = ("dataset_dict.json", "stats.json", "README.md")  # besides one folder per split
SENTENCES = ("question", "answer1", "answer2")  # an example's sentence positions, in order
COLUMNS = (*SENTENCES, "label", "title", "question_id")
LABEL_NAMES = ["answer2", "answer1"]  # label 1: answer1 is the correct answer
SPLIT_NAMES = {"train": "train", "dev": "validation"}  # a run's split -> the build's (SQuAD's) name


def to_dataset_dict(splits: dict[str, dict[str, list]]) -> datasets.DatasetDict:
    """The build's splits (`{split: {column: values}}`, every column of COLUMNS) as saved to disk."""
    import datasets  # here, not above: its import takes about a second, and --help needs none of it
    import pyarrow as pa

    features = datasets.Features(
        {
            name: datasets.ClassLabel(names=LABEL_NAMES) if name == "label" else datasets.Value("string")
            for name in COLUMNS
        }
    )
    # Building the Arrow table directly skips `from_dict`'s per-example encoding (labels are ints).
    tables = {
        split: pa.Table.from_pydict(columns, schema=features.arrow_schema)
        for split, columns in splits.items()
    }
    return datasets.DatasetDict(
        {
            split: datasets.Dataset(
                table, info=datasets.DatasetInfo(features=features), fingerprint=content_fingerprint(table)
            )
            for split, table in tables.items()
        }
    )


def content_fingerprint(table: pa.Table) -> str:
    """A digest of the table's schema and Arrow buffers: what `datasets` would otherwise derive by
    pickling the whole table (0.7 s for a build's million rows), from the same content."""
    digest = hashlib.sha256(table.schema.to_string().encode())
    for column in table.columns:
        for chunk in column.chunks:
            for buffer in chunk.buffers():
                digest.update(b"" if buffer is None else buffer)
    return digest.hexdigest()[:16]


def saved_columns(split_folder: Path, names: list[str], first: int | None = None) -> dict[str, list]:
    """Columns `names` of one split `datasets`' save_to_disk wrote: the Arrow stream files its
    state.json lists, in order, read with pyarrow as `datasets.load_from_disk` reads them. Not
    through `datasets`: its import is a second of every training process's start (each sweep
    member, resume and torchrun rank), and training needs none of the rest of it.

    `first`: only the split's first rows, read until there are that many (`squad.max_train=2000`
    read all 985,236 training triples of a build to keep 2,000: 0.53 s of a run's start-up)."""
    import pyarrow as pa  # here: the module's comment says why

    state = json.loads((split_folder / "state.json").read_text(encoding="utf-8"))
    columns: dict[str, list] = {name: [] for name in names}
    held = 0
    for entry in state["_data_files"]:
        with pa.memory_map(str(split_folder / entry["filename"])) as source:  # read while it is mapped
            for batch in pa.ipc.open_stream(source):
                if first is not None:
                    batch = batch.slice(0, first - held)
                for name in names:
                    columns[name] += batch.column(name).to_pylist()
                held += batch.num_rows
                if first is not None and held >= first:
                    return columns
    return columns


def is_build(folder: Path) -> bool:
    """True when `folder` holds a ClassifSQuAD build and nothing else: only such a folder is replaced."""
    folder = Path(folder)
    try:
        splits = json.loads((folder / "dataset_dict.json").read_text(encoding="utf-8"))["splits"]
        entries = {entry.name for entry in folder.iterdir()}
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return False
    return "stats.json" in entries and entries <= {*BUILD_FILES, *map(str, splits)}


def describe_folder(folder: Path) -> str:
    """`it holds a, b, c` for error messages about a folder that is not what was expected."""
    if not Path(folder).is_dir():
        return "it is a file"
    names = sorted(entry.name for entry in Path(folder).iterdir())
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    return f"it holds {shown}" if names else "it is empty"


def check_build(folder: Path, key: str = "squad.source") -> None:
    """A one-line error unless `folder` holds a ClassifSQuAD build (its dataset_dict.json), naming
    the `key` that gave it."""
    if not folder.is_dir():
        raise UserError(
            f"ClassifSQuAD folder {folder} does not exist: build it with "
            f"`just build-classifsquad out={folder}` or point {key}= at a build"
        )
    if not (folder / "dataset_dict.json").is_file():
        raise UserError(
            f"{folder} is not a ClassifSQuAD build ({describe_folder(folder)}): point {key}= at the "
            "output of `just build-classifsquad` (default data/classifsquad), not at SQuAD itself"
        )


def load_classifsquad(folder: str | Path, split: str, first: int | None = None) -> LabelledTexts:
    """`split` of the build in `folder`; its first `first` examples only, where given."""
    folder = Path(folder).expanduser()
    check_build(folder)
    try:
        splits = json.loads((folder / "dataset_dict.json").read_text(encoding="utf-8"))["splits"]
        if split not in splits:
            raise UserError(f"ClassifSQuAD in {folder} has no split {split!r}: it has {', '.join(splits)}")
        columns = saved_columns(folder / split, [*SENTENCES, "label"], first)
    except UserError:
        raise
    except Exception as error:  # json, pyarrow and the OS raise many types for a damaged folder
        reason = str(error).splitlines()[0][:160] if str(error) else type(error).__name__
        raise UserError(
            f"ClassifSQuAD folder {folder} is damaged ({reason}): rebuild it with "
            f"`just build-classifsquad out={folder} overwrite=true`"
        ) from None
    return LabelledTexts([columns[name] for name in SENTENCES], columns["label"])
