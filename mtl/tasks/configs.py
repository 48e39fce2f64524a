"""The keys of each built-in task kind, set as `<task>.<key>=`, apart from the tasks' code.

As transformers keeps a model's configuration apart from its modelling code: reading and
checking a configuration (`--help`, `--print-config`, a recorded run's config) needs no torch,
no spaCy and no datasets. Each task kind's module (`nli.py`, `squad.py`, ...) takes its config
class from here; a plugin's task keeps both in its own file.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

from mtl.config import BOOLEAN_WORDS, AtLeast0, AtLeast1, NonNegativeFloat, PositiveFloat, Range, comma_list

SPLITS = ("train", "dev", "test")  # dev picks the best checkpoint; test is scored once, at the end


@dataclass
class TaskConfig:
    """The keys every task has, set as `<task>.<key>=`; a task kind adds its own."""

    # Keys of the single-purpose config before tasks were plugins (`steps_nli`,
    # `schedule.steps_nli`): the old dotted path -> this task's key. They stay valid aliases.
    legacy_keys: ClassVar[dict[str, str]] = {}

    kind: str = ""  # the registered task code that reads this task's data
    steps: AtLeast1 = 100  # steps per block of schedule=blocks (leave a task out with tasks=)
    batch: AtLeast1 = 64  # examples per step
    max_train: AtLeast1 | None = None  # first N training examples only (quick runs)
    # Bagging (Breiman 1996; BOOM's bagged merges): each bag trains on its own seeded draw of the
    # training set, drawn after max_train=; a bag's models are merged afterwards (versus-single merge=bagging).
    subsample: Annotated[float, Range(0, 1, low_open=True)] = (
        1.0  # a seeded random share of the training examples (1: all)
    )
    subsample_seed: AtLeast0 = (
        0  # subsample=: the draw (each bag its own), apart from the run's seed= (its init)
    )
    train: bool = (
        True  # false: evaluated at every evaluation, never trained (a probe scores a classification task)
    )
    probe_train: AtLeast1 = 2000  # train=false: training examples a linear probe is fitted on
    # A planted noise task (calibrating verdicts, mixture search, affinity): the training labels
    # permuted by a draw seeded by the run's seed; dev and test keep theirs, so the task scores chance.
    shuffle_labels: bool = False  # true: training labels permuted (a planted noise task); dev/test kept
    weight: PositiveFloat = 1.0  # scales the task's loss (in its own steps, and in schedule=mixed's sum)
    lr: str = ""  # this task's lr: a value (0.05) or a multiple of lr= (x0.5); empty: lr= (see encoder_lr=)
    prob: NonNegativeFloat | None = (
        None  # schedule=proportional/temperature: this share of steps instead of by size (0: never drawn)
    )
    # encoder=hf: text put before each of the task's sentences ("query: ", as E5 and BGE train);
    # the export records it under the task's name, so encode(prompt_name=<task>) embeds as trained.
    prompt: str = ""  # encoder=hf: text put before each sentence ("query: "); encode(prompt_name=<task>)
    # Matryoshka training (Kusupati et al. 2022): the task's loss at each width of the embeddings,
    # so truncated embeddings keep quality (a classifier per width for a classification task).
    matryoshka: str = ""  # widths (768,512,256,128,64): the loss is the sum over them of the loss on the first that many dims
    matryoshka_weights: str = ""  # a weight per width of matryoshka= (1,1,0.5,...); empty: 1 each


def task_key(config_class: type[TaskConfig], key: str, value: str) -> str:
    """The key `<task>.key=value` sets: `train=` says whether a task trains, but a task kind whose
    training file is a key (`train_file`: pairs, sts) had that file under `train` before, and a
    value that is not true or false still means the file."""
    fields = {f.name for f in dataclasses.fields(config_class)}
    if key == "train" and "train_file" in fields and value.strip().lower() not in BOOLEAN_WORDS:
        return "train_file"
    return key


@dataclass
class NLIConfig(TaskConfig):
    legacy_keys: ClassVar[dict[str, str]] = {
        "schedule.steps_nli": "steps",
        "schedule.batch_nli": "batch",
        "data.max_nli_train": "max_train",
        "data.snli": "source",
        "data.nli_train_split": "train_split",
        "data.nli_dev_split": "dev_split",
        "data.nli_test_split": "test_split",
    }

    kind: str = "nli"
    steps: AtLeast1 = 1000  # NLI steps per block
    batch: AtLeast1 = 64  # NLI pairs per step
    source: str | None = None  # SNLI folder or Hub id; None: $MTL_DATA_DIR/snli, else stanfordnlp/snli
    train_split: str = "train"  # SNLI split to train on (train_small: the shared slice)
    dev_split: str = "dev"  # SNLI split that picks the best checkpoint
    test_split: str = (
        "test"  # SNLI split tested once, at the end; empty: none (MultiNLI's test is unlabelled)
    )
    display: str = ""  # the dataset's name in reports (a task file's: MultiNLI); empty: SNLI for nli


@dataclass
class SquadConfig(TaskConfig):
    legacy_keys: ClassVar[dict[str, str]] = {
        "schedule.steps_squad": "steps",
        "schedule.batch_squad": "batch",
        "data.max_squad_train": "max_train",
        "data.classifsquad": "source",
    }

    kind: str = "squad"
    steps: AtLeast1 = 500  # ClassifSQuAD steps per block
    batch: AtLeast1 = 128  # ClassifSQuAD triples per step
    source: str = "data/classifsquad"  # the output of `just build-classifsquad`


@dataclass
class PairsConfig(TaskConfig):
    kind: str = "pairs"
    # A folder of split files ($VARS and ~ expanded; .parquet and .arrow files read as tables), a
    # folder `datasets`' save_to_disk wrote (its splits by name), or a Hub dataset id.
    source: str = ""
    subset: str = ""  # a Hub dataset's configuration (GLUE's qqp, mrpc, ...); empty: its default
    # A Hub dataset read as a stream: with max_train=N only the first N training rows are fetched
    # (a dataset too large to download whole); dev and test are read whole.
    streaming: bool = False
    format: Literal["jsonl", "tsv", "csv", "parquet"] = (
        "jsonl"  # of the split files (parquet: train*.parquet, dev or validation*.parquet are found)
    )
    header: bool = True  # tsv/csv: the first line names the columns; false: they are named 0, 1, 2, ...
    train_file: str = "train.jsonl"  # training file in source (a Hub id: the split's name); was train=
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
        return comma_list(self.labels)


@dataclass
class STSConfig(TaskConfig):
    kind: str = "sts"
    source: str = ""  # as pairs.source: a folder of files, a save_to_disk folder, or a Hub dataset id
    subset: str = ""  # as pairs.subset: a Hub dataset's configuration
    streaming: bool = False  # as pairs.streaming: with max_train=N, only N training rows fetched
    format: Literal["jsonl", "tsv", "csv", "parquet"] = (
        "tsv"  # of the split files (parquet: train*.parquet, dev or validation*.parquet are found)
    )
    header: bool = True  # a tsv/csv file's first line names its columns; false: columns are 0, 1, 2, ...
    train_file: str = "train.tsv"  # was train=
    dev: str = "dev.tsv"
    test: str = ""  # empty: none
    first: str = "sentence1"
    second: str = "sentence2"
    score: str = "score"  # column of the gold similarity
    low: float = 0.0  # the gold scale's lowest score (STS-B 0, SICK 1)
    high: float = 5.0  # and highest (both 5)
    display: str = ""


@dataclass
class RankingConfig(TaskConfig):
    kind: str = "mnrl"
    steps: AtLeast1 = 1000
    batch: AtLeast1 = 64  # anchors per step: each one's candidates are the batch's positives (and negatives)
    # Unset (None): as the run's nli task sets them (nli.train_split=train_small holds for both), else
    # SNLI's own: $MTL_DATA_DIR/snli or stanfordnlp/snli; train, dev, test.
    source: str | None = None  # SNLI folder or Hub id
    train_split: str | None = None  # SNLI split to train on (train_small: the shared slice)
    dev_split: str | None = None
    test_split: str | None = None  # unset or empty: as nli's (nli.test_split= empty: no test for either)
    hard_negatives: bool = True  # the premise's contradicted hypothesis as a further candidate
    # false: each anchor ranks its positive above its own provided negative(s) only, none of the
    # batch's other sentences (no in-batch negatives, so no false ones among them: a ranking loss
    # on the triples alone); dev and test still rank among the batch, so the metric compares
    in_batch_negatives: bool = True  # false: an anchor's candidates are its own positive and negative(s) only
    # A file of training triples, anchor<TAB>positive<TAB>negative a line (`just mine-negatives`
    # writes one), in place of SNLI's train split; dev and test stay SNLI's.
    triples: str = ""
    provenance: str = ""  # who made triples= (the miner and its settings): recorded with the run
    scale: float = 20.0  # cosine similarities are multiplied by this (sentence-transformers' default)
    mini_batch: AtLeast1 | None = (
        None  # GradCache: embed the batch this many examples at a time; the same loss and gradients, less memory
    )


@dataclass
class SquadRankingConfig(TaskConfig):
    kind: str = "squad_ranking"
    steps: AtLeast1 = 500
    batch: AtLeast1 = 64  # questions per step: each ranks its answer among the batch's answers
    source: str = "data/classifsquad"  # the output of `just build-classifsquad` (as squad reads it)
    hard_negatives: bool = True  # a wrong answer from the question's article as a further candidate
    in_batch_negatives: bool = True  # false: a question's candidates are its own answers only (as mnrl)
    scale: float = 20.0  # cosine similarities are multiplied by this (as mnrl)
    mini_batch: AtLeast1 | None = None  # GradCache's chunk (as mnrl)


@dataclass
class DistillConfig(TaskConfig):
    kind: str = "distill"
    steps: AtLeast1 = 1000
    batch: AtLeast1 = 64
    # The teacher: an mtl run folder or encoder file, or a Hugging Face model folder or Hub id (mean
    # pooling, as encoder=hf). Its embeddings of the task's sentences are computed once and cached.
    teacher: str = ""
    # mse: the student's embedding (through a linear map when the widths differ) against the teacher's
    # (Reimers & Gurevych 2020); margin_mse: cos(q, p) - cos(q, n) against the teacher's (Hofstätter
    # et al. 2020); kl: each anchor's softmax over the batch's candidates against the teacher's.
    loss: Literal["mse", "margin_mse", "kl"] = "mse"
    # A text file, an example a line, its sentences tab-separated (margin_mse: query, positive,
    # negative; kl: an anchor, then its candidates; mse: any). Empty: SNLI, as mnrl reads it.
    corpus: str = ""
    dev_size: AtLeast1 = 1000  # corpus=: lines held out (seeded) for dev; the rest train
    # Another task of the run (squad, qt, a task file's name): its examples' sentences, split as that
    # task splits them, in place of SNLI or corpus= (loss=mse: they come without candidates).
    sentences_of: str = ""
    source: str | None = None  # as mnrl: SNLI's folder or Hub id; unset: as the run's nli task
    train_split: str | None = None
    dev_split: str | None = None
    test_split: str | None = None  # unset or empty: as nli's (nli.test_split= empty: no test for either)
    scale: float = 20.0  # kl: cosine similarities times this before each softmax (mnrl's scale)
    teacher_max_seq_length: AtLeast1 = 128  # an hf teacher's subword tokens per sentence


@dataclass
class CorpusConfig(TaskConfig):
    corpus: str = "squad"  # squad (SQuAD v1.1's passages), a text file (a sentence per line), or a Hub id
    dev: str = ""  # a text file for dev; empty: squad's dev passages, else the corpus's last 1% documents
    text_column: str = "text"  # a Hub corpus's column of text


@dataclass
class QTConfig(CorpusConfig):
    kind: str = "qt"
    steps: AtLeast1 = 1000
    batch: AtLeast1 = 400  # contiguous sentences per step: each one's candidates (the paper: 400)
    context: AtLeast1 = 3  # sentences in the window, the sentence included (3: the previous and the next)
    mini_batch: AtLeast1 | None = (
        None  # GradCache: embed the batch this many examples at a time; the same loss and gradients, less memory
    )


@dataclass
class SkipThoughtConfig(CorpusConfig):
    kind: str = "skipthought"
    steps: AtLeast1 = 1000
    batch: AtLeast1 = 128  # sentences per step, each with its neighbours (the paper: 128)
    vocab: AtLeast1 = 20000  # words the decoders predict (the most frequent in training); the rest: unknown
    decoder_hidden: AtLeast1 | None = None  # each decoder's GRU width; None: the encoder's output width
