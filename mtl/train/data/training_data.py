"""Everything training reads, tokenized once: sentences, vocabulary, embeddings, examples."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from mtl.data.batches import SentenceTable, TaskExamples
from mtl.data.texts import LabelledTexts
from mtl.errors import UserError
from mtl.models.encoders import traits
from mtl.tasks import build_task
from mtl.tasks.base import Task
from mtl.text.coverage import Coverage
from mtl.text.subwords import SubwordTokenizer
from mtl.text.tokenizer import make_tokenizer
from mtl.text.vectors import load_vectors, resolve_vectors_path
from mtl.text.vocab import Vocabulary, embedding_matrix
from mtl.train.config.train_config import TrainConfig
from mtl.train.data.teacher import teacher_embeddings


@dataclass
class TrainingData:
    """The word-vector encoders' inputs (vocabulary, embeddings, vectors_path), or for encoder=hf
    the model's own tokenizer (`subwords`)."""

    tasks: dict[str, Task]  # the run's tasks, in their order
    table: SentenceTable
    vocabulary: Vocabulary | None
    embeddings: np.ndarray | None  # (V, E) frozen
    examples: dict[str, dict[str, TaskExamples]]  # task -> split (train, dev, test) -> examples
    vectors_path: Path | None
    fingerprints: dict[str, dict[str, Any]] = field(default_factory=dict)  # input -> source, sha256
    coverage: Coverage | None = None
    subwords: SubwordTokenizer | None = None
    public: np.ndarray | None = None  # (V,) whether each vocabulary word has a vector in the vectors file
    # "task/split" (dev, test) -> examples, of (the split's size) and sampled: what a score was measured on
    scored_on: dict[str, dict[str, Any]] = field(default_factory=dict)

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

    def training_sentences(self) -> list[str]:
        """The distinct sentences the run's trained tasks train on, as their data holds them (a
        task's `prompt=` taken off)."""
        texts = []
        for name, task in self.tasks.items():
            if task.config.train and "train" in self.examples[name]:
                rows = np.unique(self.examples[name]["train"].sentences)
                texts += [self.table.texts[row].removeprefix(task.config.prompt) for row in rows]
        return list(dict.fromkeys(texts))

    def input_titles(self) -> dict[str, str]:
        """Each task's input fingerprint key -> how a message names it."""
        titles = {task.input_name: f"the {task.title} data" for task in self.tasks.values()}
        for task in self.tasks.values():
            titles[teacher_input(task)] = f"the {task.title} teacher's embeddings"
        return titles

    def bucket_keys(self, task: str, split: str) -> np.ndarray:
        """(N,) the key length bucketing sorts the task's examples by (`Task.bucket_key`)."""
        rows = self.examples[task][split].sentences
        return self.tasks[task].bucket_key(self.table.lengths[rows])


def teacher_input(task: Task) -> str:
    """The key of a task's teacher embeddings (distill) among a run's input fingerprints."""
    return f"{task.input_name}:teacher"


def prepare(config: TrainConfig, progress: bool = True) -> TrainingData:
    """Load, tokenize and index every task's data (never builds any: a missing build is an error)."""
    tasks = {name: build_task(name, task) for name, task in config.tasks.items()}
    with tqdm(total=len(tasks) + 2, desc="prepare data", disable=not progress) as steps:
        splits, fingerprints, scored_on = _load_texts(config, tasks, steps)
        if traits(config.model.encoder).subwords:
            prepared = _with_subwords(config, tasks, splits, fingerprints, steps)
        else:
            prepared = _with_vectors(config, tasks, splits, fingerprints, steps)
        prepared.scored_on = scored_on
    for name, task in tasks.items():
        task.bind(prepared.table, prepared.examples[name])
        if (wanted := task.teacher()) is not None:
            source, max_seq_length, texts = wanted
            embeddings = teacher_embeddings(source, max_seq_length, texts, config.run.device, progress)
            task.take_teacher(embeddings)
            # Recorded as an input: resuming against another teacher's targets is refused.
            digest = hashlib.sha256(np.ascontiguousarray(embeddings).tobytes()).hexdigest()
            prepared.fingerprints[teacher_input(task)] = {"source": source, "sha256": digest}
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
            f"{config.model.options.hf_model}: {prepared.subwords.truncated:,} of {sentences:,} sentences cut to "
            f"max_seq_length={config.model.options.max_seq_length} subword tokens"
        )
    return prepared


def _load_texts(
    config: TrainConfig, tasks: dict[str, Task], steps: tqdm
) -> tuple[dict[str, dict[str, LabelledTexts]], dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Each task's splits as texts and labels, their fingerprints, and what each dev and test
    score will be measured on (`TrainingData.scored_on`)."""
    splits: dict[str, dict[str, LabelledTexts]] = {}
    fingerprints: dict[str, dict[str, Any]] = {}
    scored_on: dict[str, dict[str, Any]] = {}
    unprompted: dict[str, dict[str, LabelledTexts]] = {}  # what a borrowing task reads
    for name, task in sorted(tasks.items(), key=lambda item: item[1].borrows is not None):
        if task.borrows is None:
            splits[name] = task.splits(config.run.seed, config.data.max_eval)
            test = splits[name].get("test")
            if test is not None and test.whole is not None and not config.data.sample_test:
                # max_eval= quickens the evaluations that pick the checkpoint; the test score,
                # measured once, is the whole split's unless sample_test=true asks otherwise
                splits[name]["test"] = test.whole
        else:
            splits[name] = task.splits_from(unprompted[task.borrows])
        scored_on.update(
            {
                f"{name}/{split}": {
                    "examples": len(part),
                    "of": part.drawn_from if part.part else len(part),  # None: a part of a corpus
                    "sampled": part.part,
                }
                for split, part in splits[name].items()
                if split != "train"
            }
        )
        if task.config.shuffle_labels:
            splits[name] = shuffled_labels(name, splits[name], config.run.seed)
        unprompted[name] = splits[name]
        if task.config.subsample < 1:  # after what a borrowing task reads: each task draws its own
            splits[name] = subsampled(name, splits[name], task.config.subsample, task.config.subsample_seed)
        fingerprints[task.input_name] = {
            "source": task.source,
            "sha256": texts_digest(splits[name]),
            "sizes": {
                split: len(part) for split, part in splits[name].items()
            },  # `just reproduce` reads them
        }
        # Scores (not whole numbers) hashed otherwise before: what older runs recorded. Classes
        # hash alike both ways, and hashing a million texts twice is a second of every start.
        if not all(_whole_numbers(np.asarray(part.labels)) for part in splits[name].values()):
            fingerprints[task.input_name]["legacy_sha256"] = texts_digest(splits[name], legacy=True)
        if task.config.prompt:
            splits[name] = prompted(config, name, task.config.prompt, splits[name])
        steps.update()
    return splits, fingerprints, scored_on


SHUFFLE_SEED = 104_729  # the label permutation's draw, apart from every other generator of the run


def shuffled_labels(task: str, splits: dict[str, LabelledTexts], seed: int) -> dict[str, LabelledTexts]:
    """`<task>.shuffle_labels=true`: the training split's labels permuted (seeded by the run's seed
    and the task's name), so the task carries no signal while its sentences and label counts stay."""
    train = splits.get("train")
    if train is None or len(set(np.asarray(train.labels).ravel().tolist())) < 2:
        raise UserError(
            f"{task}.shuffle_labels=true: {task} has no training labels to shuffle (its examples are "
            "scored against each other); plant noise in a classification task"
        )
    rng = np.random.default_rng([seed, SHUFFLE_SEED, *task.encode()])
    order = rng.permutation(len(train))
    labels = [train.labels[i] for i in order]
    return {**splits, "train": LabelledTexts(train.columns, labels)}


SUBSAMPLE_SEED = (
    15_485_863  # the subsample's draw: apart from the held batches' (7,919), the labels' and the run's
)


def subsampled(
    task: str, splits: dict[str, LabelledTexts], share: float, seed: int
) -> dict[str, LabelledTexts]:
    """`<task>.subsample=` (bagging): a seeded draw without replacement of that share of the
    training examples, at least one, in their order; the same for the same seed and task, and
    independent of the run's seed (a bag's runs share their initialisation, not their data)."""
    train = splits["train"]
    count = max(1, round(share * len(train)))
    rng = np.random.default_rng([seed, SUBSAMPLE_SEED, *task.encode()])
    chosen = np.sort(rng.choice(len(train), size=count, replace=False))
    kept = LabelledTexts(
        [[column[i] for i in chosen] for column in train.columns], [train.labels[i] for i in chosen]
    )
    return {**splits, "train": kept}


def prompted(
    config: TrainConfig, task: str, prompt: str, splits: dict[str, LabelledTexts]
) -> dict[str, LabelledTexts]:
    """The task's sentences with its prompt before each: as texts of their own, the same sentence
    of another task (another prompt, or none) is a sentence of its own in the table."""
    if not traits(config.model.encoder).subwords:
        raise UserError(
            f"{task}.prompt={prompt!r} is for encoder=hf (a model trained with instructions reads them as "
            f"text); encoder={config.model.encoder} would read the prompt as words: leave {task}.prompt empty"
        )
    return {
        split: LabelledTexts([[prompt + text for text in column] for column in part.columns], part.labels)
        for split, part in splits.items()
    }


def _all_texts(splits: dict[str, dict[str, LabelledTexts]]) -> list[str]:
    return [t for by_split in splits.values() for part in by_split.values() for c in part.columns for t in c]


def _examples(
    table: SentenceTable, tasks: dict[str, Task], splits: dict[str, dict[str, LabelledTexts]]
) -> dict[str, dict[str, TaskExamples]]:
    return {
        task: {
            split: TaskExamples(
                np.stack([table.rows(c) for c in part.columns], axis=1),
                np.asarray(part.labels, dtype=tasks[task].label_dtype),
            )
            for split, part in by_split.items()
        }
        for task, by_split in splits.items()
    }


def _with_subwords(
    config: TrainConfig,
    tasks: dict[str, Task],
    splits: dict[str, dict[str, LabelledTexts]],
    fingerprints: dict[str, dict[str, Any]],
    steps: tqdm,
) -> TrainingData:
    """encoder=hf: the model's tokenizer gives the ids; no vocabulary or vectors."""
    subwords = SubwordTokenizer(config.model.options.hf_model, config.model.options.max_seq_length)
    table = SentenceTable(_all_texts(splits))
    table.set_ids(subwords.ids(table.texts))
    fingerprints["tokenizer"] = {"source": str(config.model.options.hf_model), "sha256": subwords.digest()}
    steps.update(2)
    return TrainingData(
        tasks, table, None, None, _examples(table, tasks, splits), None, fingerprints, subwords=subwords
    )


def _with_vectors(
    config: TrainConfig,
    tasks: dict[str, Task],
    splits: dict[str, dict[str, LabelledTexts]],
    fingerprints: dict[str, dict[str, Any]],
    steps: tqdm,
) -> TrainingData:
    """Word-vector encoders: words, a vocabulary from the training data, frozen GloVe rows."""
    data = config.data
    vectors_path = resolve_vectors_path(data.vectors)
    table = SentenceTable(_all_texts(splits), make_tokenizer(data.tokenizer, data.lowercase), data.max_tokens)
    examples = _examples(table, tasks, splits)
    train_rows = np.unique(
        np.concatenate([by_split["train"].sentences.ravel() for by_split in examples.values()])
    )
    vectors = load_vectors(vectors_path, {w for tokens in table.tokens for w in tokens})
    fingerprints["vectors"] = {"source": str(vectors_path), "sha256": vectors.digest(), **vectors.identity()}
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
        tasks,
        table,
        vocabulary,
        embedding_matrix(vocabulary, vectors, config.run.seed),
        examples,
        vectors_path,
        fingerprints,
        coverage,
        public=np.fromiter((word in vectors for word in vocabulary.words), dtype=bool, count=len(vocabulary)),
    )


def texts_digest(splits: dict[str, LabelledTexts], legacy: bool = False) -> str:
    """SHA-256 of every text and label of a task's splits: what the run trains and evaluates on.
    `legacy`: labels as int64 whatever they are, as runs recorded before scores hashed exactly."""
    hasher = hashlib.sha256()
    for split, part in sorted(splits.items()):
        hasher.update(f"{split}\0{len(part)}\0".encode())
        for column in part.columns:
            hasher.update("\x1e".join(column).encode("utf-8", "surrogatepass") + b"\0")
        labels = np.asarray(part.labels)
        hasher.update(labels.astype(np.int64).tobytes() if legacy else _label_bytes(labels))
    return hasher.hexdigest()


def _label_bytes(labels: Any) -> bytes:
    """The labels' exact values. Whole-number labels (classes) hash as int64, as every run before
    non-integer labels did, so their recorded fingerprints still match; others (STS scores) as
    float64 behind a marker: as int64, every score in [0, 1) would hash as 0, and a changed score
    file would pass for the one a run started with."""
    values = np.asarray(labels)
    if _whole_numbers(values):
        return values.astype(np.int64).tobytes()
    return b"float64\0" + values.astype(np.float64).tobytes()


def _whole_numbers(values: np.ndarray) -> bool:
    """Labels that hash as int64: integers, or floats that are all whole numbers."""
    if values.dtype.kind in "biu":
        return True
    return (
        values.dtype.kind == "f"
        and bool(np.isfinite(values).all())
        and np.array_equal(values, np.round(values))
    )


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def changed_inputs(
    recorded: dict[str, dict[str, Any]], current: dict[str, dict[str, Any]], titles: dict[str, str]
) -> list[str]:
    """The inputs whose fingerprint differs between a run's start and now, as phrases for a message;
    `titles`: input -> its phrase (`the SNLI data`)."""
    names = {"vectors": "the word vectors", "tokenizer": "the tokenizer", **titles}
    changed = []
    for key, then in recorded.items():
        now = current.get(key)
        if now is not None and then.get("sha256") not in (now.get("sha256"), now.get("legacy_sha256", "")):
            where = f" ({then['source']})" if "source" in then else ""
            changed.append(f"{names.get(key, f'the data of {key}')}{where}")
    return changed
