"""ClassifSQuAD triples from the builder's output folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mtl.errors import UserError


@dataclass
class Triples:
    questions: list[str]
    answers1: list[str]
    answers2: list[str]
    labels: list[int]

    def __len__(self) -> int:
        return len(self.labels)

    def head(self, count: int | None) -> Triples:
        if count is None:
            return self
        return Triples(
            self.questions[:count], self.answers1[:count], self.answers2[:count], self.labels[:count]
        )


def load_classifsquad(folder: str | Path, split: str) -> Triples:
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
    return Triples(columns["question"], columns["answer1"], columns["answer2"], columns["label"])
