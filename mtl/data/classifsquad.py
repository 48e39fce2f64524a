"""ClassifSQuAD triples from the builder's output folder."""

from __future__ import annotations

from pathlib import Path

from mtl.data.texts import LabelledTexts
from mtl.errors import UserError


def load_classifsquad(folder: str | Path, split: str) -> LabelledTexts:
    import datasets

    folder = Path(folder).expanduser()
    if not (folder / "dataset_dict.json").is_file():
        raise UserError(
            f"{folder} is not a ClassifSQuAD folder: run `just build-classifsquad out={folder}` first"
        )
    dataset = datasets.load_from_disk(str(folder))
    if split not in dataset:
        raise UserError(f"ClassifSQuAD in {folder} has no split {split!r}: it has {', '.join(dataset)}")
    columns = dataset[split].select_columns(["question", "answer1", "answer2", "label"]).to_dict()
    return LabelledTexts([columns["question"], columns["answer1"], columns["answer2"]], columns["label"])
