"""Everything training reads, tokenized once: sentences, vocabulary, embeddings, examples."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from mtl.data.batches import SentenceTable, TaskExamples
from mtl.data.classifsquad import load_classifsquad
from mtl.data.snli import load_snli
from mtl.data.texts import LabelledTexts
from mtl.text import Tokenizer, load_vectors, resolve_vectors_path
from mtl.text.vocab import Vocabulary, embedding_matrix
from mtl.train.config import TrainConfig

SQUAD_SPLITS = {"train": "train", "dev": "validation"}


@dataclass
class TrainingData:
    table: SentenceTable
    vocabulary: Vocabulary
    embeddings: np.ndarray  # (V, E) frozen
    examples: dict[str, dict[str, TaskExamples]]  # task -> split (train, dev, test) -> examples
    vectors_path: Path

    def example_lengths(self, task: str, split: str) -> np.ndarray:
        rows = self.examples[task][split].sentences
        return self.table.lengths[rows].sum(axis=1)


def prepare(config: TrainConfig, progress: bool = True) -> TrainingData:
    data = config.data
    vectors_path = resolve_vectors_path(data.vectors)
    with tqdm(total=len(config.tasks) + 2, desc="prepare data", disable=not progress) as steps:
        return _prepare(config, vectors_path, steps)


def _prepare(config: TrainConfig, vectors_path: Path, steps: tqdm) -> TrainingData:
    data = config.data
    splits: dict[str, dict[str, LabelledTexts]] = {}
    if "nli" in config.tasks:
        names = {"train": data.nli_train_split, "dev": data.nli_dev_split, "test": data.nli_test_split}
        splits["nli"] = {
            split: load_snli(data.snli, name).head(data.max_nli_train if split == "train" else data.max_eval)
            for split, name in names.items()
        }
        steps.update()
    if "squad" in config.tasks:
        folder = ensure_classifsquad(config)
        splits["squad"] = {
            split: load_classifsquad(folder, name).head(
                data.max_squad_train if split == "train" else data.max_eval
            )
            for split, name in SQUAD_SPLITS.items()
        }
        steps.update()

    texts = [
        text for by_split in splits.values() for part in by_split.values() for c in part.columns for text in c
    ]
    table = SentenceTable(texts, Tokenizer(lowercase=data.lowercase))
    examples = {
        task: {
            split: TaskExamples(
                np.stack([table.rows(c) for c in part.columns], axis=1),
                np.asarray(part.labels, dtype=np.int64),
            )
            for split, part in by_split.items()
        }
        for task, by_split in splits.items()
    }
    train_rows = np.unique(
        np.concatenate([by_split["train"].sentences.ravel() for by_split in examples.values()])
    )
    vectors = load_vectors(vectors_path, {w for tokens in table.tokens for w in tokens})
    steps.update()
    in_training = np.zeros(len(table.texts), dtype=bool)
    in_training[train_rows] = True
    vocabulary = Vocabulary.build(
        (table.tokens[row] for row in train_rows),
        (tokens for row, tokens in enumerate(table.tokens) if not in_training[row]),
        vectors,
    )
    table.index_with(vocabulary)
    steps.update()
    return TrainingData(
        table, vocabulary, embedding_matrix(vocabulary, vectors, config.run.seed), examples, vectors_path
    )


def ensure_classifsquad(config: TrainConfig) -> Path:
    """The ClassifSQuAD folder, built with the builder's defaults when it does not exist yet."""
    folder = Path(config.data.classifsquad).expanduser()
    if not folder.exists():
        from dataset_builders.classifsquad import BuildConfig, build

        print(f"ClassifSQuAD not found at {folder}: building it first")
        build(
            BuildConfig(
                out=str(folder),
                vectors=config.data.vectors,
                wandb=config.run.wandb,
                wandb_project=config.run.wandb_project,
            )
        )
    return folder
