"""Everything training reads, tokenized once: sentences, vocabulary, embeddings, examples."""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from mtl.data.batches import SentenceTable, TaskExamples
from mtl.data.classifsquad import describe_folder, load_classifsquad
from mtl.data.snli import load_snli, resolve_snli_source
from mtl.data.texts import LabelledTexts
from mtl.errors import UserError
from mtl.hf import resolve_model_source
from mtl.models.heads import TASKS
from mtl.paths import resolved
from mtl.text import load_vectors, resolve_vectors_path
from mtl.text.coverage import Coverage
from mtl.text.subwords import SubwordTokenizer
from mtl.text.tokenizer import make_tokenizer
from mtl.text.vocab import Vocabulary, embedding_matrix
from mtl.train.config import TrainConfig

SQUAD_SPLITS = {"train": "train", "dev": "validation"}


@dataclass
class TrainingData:
    """The word-vector encoders' inputs (vocabulary, embeddings, vectors_path), or for encoder=hf
    the model's own tokenizer (`subwords`)."""

    table: SentenceTable
    vocabulary: Vocabulary | None
    embeddings: np.ndarray | None  # (V, E) frozen
    examples: dict[str, dict[str, TaskExamples]]  # task -> split (train, dev, test) -> examples
    vectors_path: Path | None
    fingerprints: dict[str, dict[str, Any]] = field(default_factory=dict)  # input -> source, sha256
    coverage: Coverage | None = None
    subwords: SubwordTokenizer | None = None

    def statistics(self) -> dict[str, Any]:
        """Dataset sizes and vocabulary coverage, for the run's config."""
        stats: dict[str, Any] = {
            f"{task}_{split}_examples": len(examples)
            for task, by_split in self.examples.items()
            for split, examples in by_split.items()
        }
        if self.vocabulary is not None:
            stats["vocabulary_words"] = len(self.vocabulary)
        stats["truncated_sentences"] = self.subwords.truncated if self.subwords else self.table.truncated
        if self.coverage is not None:
            stats["vectors_token_coverage"] = self.coverage.token_share
        return stats

    def bucket_keys(self, task: str, split: str) -> np.ndarray:
        """(N,) the key length bucketing sorts the task's examples by (`Task.bucket_key`)."""
        rows = self.examples[task][split].sentences
        return TASKS[task].bucket_key(self.table.lengths[rows])


def resolve_inputs(config: TrainConfig) -> TrainConfig:
    """A copy of `config` whose data sources are absolute paths (or a Hub id), found once at the start.

    The run records these, so resuming reads the same files whatever MTL_DATA_DIR or
    MTL_VECTORS say then.
    """
    config = copy.deepcopy(config)
    data = config.data
    if "nli" in config.tasks:
        data.snli = resolve_snli_source(data.snli)
    data.classifsquad = str(resolved(data.classifsquad, "classifsquad"))
    if config.model.encoder == "hf":
        config.model.hf_model = resolve_model_source(config.model.hf_model)
    else:
        data.vectors = str(resolved(resolve_vectors_path(data.vectors), "vectors"))
    return config


def prepare(config: TrainConfig, progress: bool = True, build_missing: bool = True) -> TrainingData:
    """Load, tokenize and index every input; `build_missing` builds ClassifSQuAD when it is absent."""
    with tqdm(total=len(config.tasks) + 2, desc="prepare data", disable=not progress) as steps:
        splits, fingerprints = _load_texts(config, steps, build_missing)
        if config.model.encoder == "hf":
            prepared = _with_subwords(config, splits, fingerprints, steps)
        else:
            prepared = _with_vectors(config, splits, fingerprints, steps)
    if prepared.coverage is not None:
        prepared.coverage.report()
    if prepared.table.truncated and progress:
        print(
            f"{prepared.table.truncated:,} of {len(prepared.table.texts):,} sentences cut to "
            f"max_tokens={config.data.max_tokens} words"
        )
    if prepared.subwords is not None and progress:
        sentences = len(prepared.table.texts)
        print(
            f"{config.model.hf_model}: {prepared.subwords.truncated:,} of {sentences:,} sentences cut to "
            f"max_seq_length={config.model.max_seq_length} subword tokens"
        )
    return prepared


def _load_texts(
    config: TrainConfig, steps: tqdm, build_missing: bool
) -> tuple[dict[str, dict[str, LabelledTexts]], dict[str, dict[str, Any]]]:
    """Each task's splits as texts and labels, and their fingerprints."""
    data = config.data
    splits: dict[str, dict[str, LabelledTexts]] = {}
    fingerprints: dict[str, dict[str, Any]] = {}
    if "nli" in config.tasks:
        names = {"train": data.nli_train_split, "dev": data.nli_dev_split, "test": data.nli_test_split}
        splits["nli"] = {
            split: _subset(load_snli(data.snli, name), split, data.max_nli_train, data.max_eval, config)
            for split, name in names.items()
        }
        fingerprints["snli"] = {"source": str(data.snli), "sha256": texts_digest(splits["nli"])}
        steps.update()
    if "squad" in config.tasks:
        folder = ensure_classifsquad(config, build_missing)
        splits["squad"] = {
            split: _subset(
                load_classifsquad(folder, name), split, data.max_squad_train, data.max_eval, config
            )
            for split, name in SQUAD_SPLITS.items()
        }
        fingerprints["classifsquad"] = {"source": str(folder), "sha256": texts_digest(splits["squad"])}
        steps.update()
    return splits, fingerprints


def _all_texts(splits: dict[str, dict[str, LabelledTexts]]) -> list[str]:
    return [t for by_split in splits.values() for part in by_split.values() for c in part.columns for t in c]


def _examples(
    table: SentenceTable, splits: dict[str, dict[str, LabelledTexts]]
) -> dict[str, dict[str, TaskExamples]]:
    return {
        task: {
            split: TaskExamples(
                np.stack([table.rows(c) for c in part.columns], axis=1),
                np.asarray(part.labels, dtype=np.int64),
            )
            for split, part in by_split.items()
        }
        for task, by_split in splits.items()
    }


def _with_subwords(
    config: TrainConfig,
    splits: dict[str, dict[str, LabelledTexts]],
    fingerprints: dict[str, dict[str, Any]],
    steps: tqdm,
) -> TrainingData:
    """encoder=hf: the model's tokenizer gives the ids; no vocabulary or vectors."""
    subwords = SubwordTokenizer(config.model.hf_model, config.model.max_seq_length)
    table = SentenceTable(_all_texts(splits))
    table.set_ids(subwords.ids(table.texts))
    fingerprints["tokenizer"] = {"source": str(config.model.hf_model), "sha256": subwords.digest()}
    steps.update(2)
    return TrainingData(table, None, None, _examples(table, splits), None, fingerprints, subwords=subwords)


def _with_vectors(
    config: TrainConfig,
    splits: dict[str, dict[str, LabelledTexts]],
    fingerprints: dict[str, dict[str, Any]],
    steps: tqdm,
) -> TrainingData:
    """Word-vector encoders: words, a vocabulary from the training data, frozen GloVe rows."""
    data = config.data
    vectors_path = resolve_vectors_path(data.vectors)
    table = SentenceTable(_all_texts(splits), make_tokenizer(data.tokenizer, data.lowercase), data.max_tokens)
    examples = _examples(table, splits)
    train_rows = np.unique(
        np.concatenate([by_split["train"].sentences.ravel() for by_split in examples.values()])
    )
    vectors = load_vectors(vectors_path, {w for tokens in table.tokens for w in tokens})
    fingerprints["vectors"] = {"source": str(vectors_path), "sha256": vectors.digest()}
    coverage = Coverage.of(
        table.tokens, vectors.__contains__, "the training and evaluation data", vectors_path.name
    )
    steps.update()
    in_training = np.zeros(len(table.texts), dtype=bool)
    in_training[train_rows] = True
    vocabulary = Vocabulary.build(
        (table.tokens[row] for row in train_rows),
        (tokens for row, tokens in enumerate(table.tokens) if not in_training[row]),
        vectors,
    )
    table.index_with(vocabulary)
    fingerprints["vocabulary"] = {"words": len(vocabulary), "sha256": _digest("\n".join(vocabulary.words))}
    steps.update()
    return TrainingData(
        table,
        vocabulary,
        embedding_matrix(vocabulary, vectors, config.run.seed),
        examples,
        vectors_path,
        fingerprints,
        coverage,
    )


def _subset(
    texts: LabelledTexts, split: str, max_train: int | None, max_eval: int | None, config: TrainConfig
) -> LabelledTexts:
    """The first `max_train` training examples; a seeded random `max_eval` of an evaluation split."""
    if split == "train":
        return texts.head(max_train)
    return texts.sample(max_eval, config.run.seed)


def texts_digest(splits: dict[str, LabelledTexts]) -> str:
    """SHA-256 of every text and label of a task's splits: what the run trains and evaluates on."""
    hasher = hashlib.sha256()
    for split, part in sorted(splits.items()):
        hasher.update(f"{split}\0{len(part)}\0".encode())
        for column in part.columns:
            hasher.update("\x1e".join(column).encode("utf-8", "surrogatepass") + b"\0")
        hasher.update(np.asarray(part.labels, dtype=np.int64).tobytes())
    return hasher.hexdigest()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def changed_inputs(recorded: dict[str, dict[str, Any]], current: dict[str, dict[str, Any]]) -> list[str]:
    """The inputs whose fingerprint differs between a run's start and now, as phrases for a message."""
    names = {
        "snli": "the SNLI data",
        "classifsquad": "ClassifSQuAD",
        "vectors": "the word vectors",
        "tokenizer": "the tokenizer",
    }
    changed = []
    for key, then in recorded.items():
        now = current.get(key)
        if now is not None and now.get("sha256") != then.get("sha256"):
            where = f" ({then['source']})" if "source" in then else ""
            changed.append(f"{names.get(key, key)}{where}")
    return changed


def ensure_classifsquad(config: TrainConfig, build_missing: bool = True) -> Path:
    """The ClassifSQuAD folder, built with the builder's defaults when it does not exist yet.

    A folder that exists and is not a build is refused, never built into.
    """
    folder = Path(config.data.classifsquad).expanduser()
    empty = folder.is_dir() and not any(folder.iterdir())
    if folder.exists() and not empty and not (folder / "dataset_dict.json").is_file():
        raise UserError(
            f"classifsquad={folder} is not a ClassifSQuAD build ({describe_folder(folder)}): point it at the "
            "output of `just build-classifsquad`, or at a folder that does not exist yet to build it there"
        )
    if (empty or not folder.exists()) and build_missing:
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
