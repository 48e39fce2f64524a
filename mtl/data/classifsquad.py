"""ClassifSQuAD triples from the builder's output folder, and how to recognize such a folder."""

from __future__ import annotations

import json
from pathlib import Path

from mtl.data.texts import LabelledTexts
from mtl.errors import UserError

BUILD_FILES = ("dataset_dict.json", "stats.json", "README.md")  # besides one folder per split
COLUMNS = ("question", "answer1", "answer2", "label")


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


def load_classifsquad(folder: str | Path, split: str) -> LabelledTexts:
    import datasets

    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise UserError(
            f"ClassifSQuAD folder {folder} does not exist: build it with "
            f"`just build-classifsquad out={folder}` or point classifsquad= at a build"
        )
    if not (folder / "dataset_dict.json").is_file():
        raise UserError(
            f"{folder} is not a ClassifSQuAD build ({describe_folder(folder)}): point classifsquad= at the "
            "output of `just build-classifsquad` (default data/classifsquad), not at SQuAD itself"
        )
    try:
        dataset = datasets.load_from_disk(str(folder))
        if split not in dataset:
            raise UserError(f"ClassifSQuAD in {folder} has no split {split!r}: it has {', '.join(dataset)}")
        columns = dataset[split].select_columns(list(COLUMNS)).to_dict()
    except UserError:
        raise
    except Exception as error:  # datasets and pyarrow raise many types for a damaged folder
        reason = str(error).splitlines()[0][:160] if str(error) else type(error).__name__
        raise UserError(
            f"ClassifSQuAD folder {folder} is damaged ({reason}): rebuild it with "
            f"`just build-classifsquad out={folder} overwrite=true`"
        ) from None
    return LabelledTexts([columns["question"], columns["answer1"], columns["answer2"]], columns["label"])
