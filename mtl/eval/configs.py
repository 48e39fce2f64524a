"""The evaluation commands' configs (transfer, probing, export, push, MTEB, mining), apart from
their code: `--help` reads them without importing torch, and the code is imported when the
command runs."""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Annotated, Literal

from mtl.config import AtLeast0, AtLeast1, Range, comma_list
from mtl.errors import UserError
from mtl.models.card import DEFAULT_LICENSE
from mtl.transfer_tasks.probing_tasks import GENERATED
from mtl.transfer_tasks.registry import CLASSIFIED, default_tasks, spec


@dataclass
class ProbingConfig:
    run: str | None = None  # the run folder (or checkpoint) to probe
    baseline: Literal["glove-bow", "glove-bow-idf", "glove-positional", "sif", "random-bilstm"] | None = (
        None  # instead of run=: a reference encoder
    )
    data: str | None = None  # a folder of SentEval's probing files (sentence_length.txt, ...)
    generate: str = (
        ""  # comma-separated: sentence_length, word_content, bigram_shift (generated, not SentEval's)
    )
    corpus: str | None = (
        None  # generate=: a sentence a line; None: the shared SNLI sentences and SQuAD questions
    )
    max_sentences: AtLeast1 = 100000  # generate=: at most this many corpus sentences (the first ones)
    seed: int = 1111  # generate=: the split and the bigram inversions
    mode: Literal["senteval", "senteval-prototyping", "fast", "standard"] = (
        "senteval-prototyping"  # SentEval's classifier and folds (prototyping: its quicker settings), or mtl's fast/standard
    )
    classifier: Literal["logreg", "mlp"] = (
        "mlp"  # senteval modes: SentEval's MLP (nhid=) or its logistic regression
    )
    nhid: AtLeast1 = 50  # classifier=mlp: hidden units
    out: str | None = None  # where the reports go; None: the run folder
    device: str = "auto"  # auto: cuda when available
    wandb: Literal["auto", "online", "offline", "disabled"] = (
        "auto"  # auto: offline without an API key, online with one
    )

    def check(self) -> None:
        if (self.run is None) == (self.baseline is None):
            raise UserError(
                "give exactly one of run=runs/<run> and baseline=glove-bow|glove-bow-idf|glove-positional|sif|random-bilstm"
            )
        if bool(self.data) == bool(self.generate):
            raise UserError(
                "give data=<SentEval's probing folder> or generate=sentence_length,word_content,bigram_shift"
            )
        if bad := [g for g in self.generated if g not in GENERATED]:
            raise UserError(f"generate={self.generate}: {bad[0]!r} is not one of {', '.join(GENERATED)}")

    @property
    def generated(self) -> list[str]:
        return comma_list(self.generate)


@dataclass
class MineConfig:
    encoder: str = (
        ""  # the miner: an mtl run folder or encoder file, or a Hugging Face model folder or Hub id
    )
    out: str = ""  # the task file to write (mined.toml); the triples go beside it (mined.tsv)
    pairs: str = ""  # anchor<TAB>positive lines; empty: SNLI's entailed pairs (source=, split=)
    source: str | None = None  # SNLI folder or Hub id; None: $MTL_DATA_DIR/snli, else stanfordnlp/snli
    split: str = "train"  # SNLI split to mine for (train_small: the shared slice)
    range_min: AtLeast0 = 10  # skip this many nearest candidates (likely unlabelled positives)
    range_max: AtLeast1 = 50  # consider candidates up to this rank
    margin: float = 0.1  # a negative's cosine must be at least this below the positive's
    num_negatives: AtLeast1 = 1  # negatives per anchor: a triple for each
    sampling: Literal["top", "random"] = "top"  # the nearest qualifying, or at random among them
    seed: AtLeast0 = 12  # sampling=random
    max_seq_length: AtLeast1 = 128  # an hf miner's subword tokens per sentence
    batch_size: AtLeast1 = 128  # sentences per encoding batch
    device: str = "auto"  # auto: cuda when available
    overwrite: bool = False  # replace an existing out=

    def __post_init__(self) -> None:
        if self.range_max <= self.range_min:
            raise UserError(
                f"range_max={self.range_max} must exceed range_min={self.range_min}: negatives come from the ranks between"
            )


@dataclass
class ExportConfig:
    run: str = ""  # a run folder, its encoder.json, or a checkpoint (best.pt)
    out: str = ""  # the folder to write: encoder.json, encoder.safetensors, encoder/ (sentence-transformers)
    vocabulary: Literal["public", "trained"] = "public"  # public: only words of the vectors file
    vectors: str | None = None  # the public vectors file; None: the one the encoder was trained with
    overwrite: bool = False  # replace an existing export in out=
    vocab_expansion: bool = False  # embeddings=trainable|both: new words enter through Skip-Thought's map
    # (the folder then equals encode() on any word the file has; it grows by words x dim x 4 bytes:
    # 80 MB for GloVe 6B 50d, 2.6 GB for 840B 300d)
    st_vocabulary: Literal["kept", "vectors"] = (
        "kept"  # the sentence-transformers folder's words: encoder.json's, or every word of the vectors file too
    )


@dataclass
class MergeConfig:
    out: str = ""  # the folder to write: encoder.json and encoder.safetensors
    method: Literal["average", "task_arithmetic", "ties"] = (
        "average"  # weight averaging; base + lam * summed task vectors; TIES (trim, elect sign, disjoint mean)
    )
    lam: str = "auto"  # average of two: the second's share; task_arithmetic, ties: the task vectors' scale; several (0.3,0.5) or auto (the method's grid): chosen on select='s dev splits
    weights: str = (
        ""  # average: one weight per encoder in the order given (normalised); empty: equal, or lam= for two
    )
    density: Annotated[float, Range(0, 1, low_open=True)] = (
        0.2  # ties: the share of each task vector's trained entries kept, the largest (the authors' k = 20%)
    )
    base: str = "init"  # task_arithmetic, ties: what task vectors are taken from; init: the parents' start rebuilt from their seed; or a run/encoder
    select: str = (
        "STS-B,SICK-R"  # transfer tasks whose dev pairs (cosine Spearman) choose lam; never their test
    )
    data: str | None = (
        None  # SentEval's downstream folder for select=; None: $MTL_DATA_DIR/senteval/downstream
    )
    overwrite: bool = False  # replace a merged encoder already in out=
    different_seeds: bool = (
        False  # average: true merges encoders trained from different seeds (no soup: said)
    )
    # Wortsman et al. (2022)'s greedy soup: the encoders in order of their own dev score, each added
    # to the soup only where the average with it scores no lower on select='s dev pairs
    greedy: bool = (
        False  # average: a greedy soup (each encoder kept only where it does not lower the dev score)
    )


@dataclass
class LedgerConfig:
    run: str = ""  # a finished run folder: its contamination ledger computed again into its summary.json
    data: str | None = (
        None  # SentEval's downstream folder to compare with; None: $MTL_DATA_DIR/senteval/downstream
    )


@dataclass
class MTEBConfig:
    run: str = ""  # a run folder (or an encoder file)
    tasks: str = ""  # MTEB task names, comma-separated (e.g. STSBenchmark,Banking77Classification)
    data: str = "hub"  # hub: MTEB's copies (the Hub or HF_HOME's cache); local: STS12-16, STSBenchmark, SICK-R from SentEval's copies in $MTL_DATA_DIR; or PATH: SentEval's downstream folder
    batch_size: AtLeast1 = 128  # sentences per encode() call
    device: str = "auto"  # cpu, cuda, cuda:N; auto: CUDA when there is one
    out: str | None = None  # folder of the report; None: the run folder
    wandb: str = "auto"  # online, offline, disabled; auto: offline without an API key
    wandb_project: str = "mtl"  # W&B project


@dataclass
class PushConfig:
    run: str = ""  # the run folder whose encoder/ goes up
    repo: str = ""  # the Hub repository, ORG/NAME (made when it does not exist)
    private: bool = False  # a new repository is private
    license: str = DEFAULT_LICENSE  # the card's license (the default: that of SNLI and SQuAD)
    endpoint: str | None = None  # another Hub (a private mirror); None: huggingface.co or HF_ENDPOINT
    message: str = ""  # the commit message; empty: "mtl run <run>"
    base_model: str = ""  # the Hub id of the model a local hf_model= folder copied (the card's base_model)


# The baselines that weigh word vectors (weighted_bow.py), and SIF's a
WEIGHTED_BASELINES = ("sif", "glove-bow-idf", "glove-positional")
SIF_A = 1e-3  # the authors' weightpara (the paper: a in [1e-4, 1e-3] all work well)


# SentEval's optimizer strings: one of these names, then optional `,key=value` settings
OPTIMIZER_NAMES = ("adam", "rmsprop", "sgd", "adagrad", "adadelta", "adamax")


def valid_optimizer(text: str) -> bool:
    name, *settings = text.split(",")
    try:
        return name in OPTIMIZER_NAMES and all(float(s.split("=", 1)[1]) >= 0 for s in settings)
    except (IndexError, ValueError):
        return False


@dataclass(frozen=True)
class SentEvalParams:
    """SentEval's `params['classifier']` plus its `kfold` and `seed`."""

    nhid: int = 0
    optim: str = "adam"  # "adam", "rmsprop", "sgd,lr=0.1", ... as SentEval's get_optimizer reads it
    batch_size: int = 64
    tenacity: int = 5
    epoch_size: int = 4
    max_epoch: int = 200
    dropout: float = 0.0
    kfold: int = 10
    seed: int = 1111
    jobs: int = 2  # outer folds fitted in parallel processes
    penalties: tuple[float, ...] = tuple(10.0**t for t in range(-5, -1))  # SentEval's l2reg grid

    @classmethod
    def default(cls, **overrides) -> SentEvalParams:
        """SentEval's default configuration (paper, Section 4: "to be comparable to the results
        published in the literature")."""
        return cls(**overrides)

    @classmethod
    def prototyping(cls, **overrides) -> SentEvalParams:
        """SentEval's prototyping configuration: faster, slightly worse."""
        return cls(
            **{"optim": "rmsprop", "batch_size": 128, "tenacity": 3, "epoch_size": 2, "kfold": 5, **overrides}
        )


# The reference encoders `baseline=` names: bags of word vectors, an untrained BiLSTM, a
# transformer as it comes.
Baseline = Literal["glove-bow", "glove-bow-idf", "glove-positional", "sif", "random-bilstm", "hf"]
BASELINES = typing.get_args(Baseline)


# features=nb-bigram: the single-sentence, two-class tasks (Skip-Thought's Table 5 and SST2)
NB_TASKS = ["MR", "CR", "SUBJ", "MPQA", "SST2"]


@dataclass
class TransferConfig:
    run: str | None = None  # run folder or checkpoint; several, comma-separated: combined as ensemble= says
    ensemble: Literal["concat", "mean"] = (
        "concat"  # several runs: concat: embeddings side by side; mean: each one's classifier, log-probs averaged
    )
    baseline: Baseline | None = (
        None  # instead of run=: a reference encoder; hf: hf_model= as it comes, before fine-tuning
    )
    tokenizer: Literal["spacy", "whitespace"] = (
        "spacy"  # word-vector baselines: whitespace gives SentEval's own tokens (its bow example)
    )
    sif_a: Annotated[float, Range(0, 1, low_open=True)] = (
        SIF_A  # baseline=sif: a in a/(a + p(w)) (Arora et al.)
    )
    word_frequencies: str = (
        "task"  # baseline=sif/glove-bow-idf: task (its own sentences), or a counts/corpus file
    )
    hf_model: str | None = None  # baseline=hf: Hub id or local folder of a transformers model
    max_seq_length: AtLeast1 = 128  # baseline=hf: subword tokens per sentence; longer ones are cut
    tasks: str = "all"  # comma-separated, e.g. MR,CR,STS14
    mode: Literal["standard", "fast", "senteval", "senteval-prototyping"] = (
        "standard"  # fast: 5 folds, a smaller grid; senteval(-prototyping): SentEval's classifier and settings
    )
    features: Literal["senteval", "skipthought-mrpc", "nb-bigram"] = (
        "senteval"  # what the classifier reads besides: Skip-Thought's MRPC pair statistics, or NB bigrams
    )
    classifier: Literal["logreg", "mlp"] = "logreg"  # senteval modes: nhid=0, or an MLP of nhid sigmoid units
    nhid: AtLeast1 = 50  # classifier=mlp: hidden units
    dropout: Annotated[float, Range(0, 1, high_open=True)] = 0.0  # classifier=mlp: dropout
    optim: str | None = (
        None  # senteval modes: SentEval's optimizer string (adam, rmsprop, "sgd,lr=0.1"); None: the mode's
    )
    classifier_batch: AtLeast1 | None = (
        None  # senteval modes: the classifier's batch size; None: the mode's (64, 128)
    )
    tenacity: AtLeast0 | None = (
        None  # senteval modes: validation misses before stopping; None: the mode's (5, 3)
    )
    epoch_size: AtLeast1 | None = (
        None  # senteval modes: passes over the data per epoch; None: the mode's (4, 2)
    )
    max_epoch: AtLeast1 = 200  # senteval modes: at most this many passes
    kfold: Annotated[int, Range(2, 100)] | None = None  # senteval modes: folds; None: the mode's (10, 5)
    seed: int = 1111  # senteval modes: SentEval's seed
    pooling: Literal["max", "mean", "max+mean", "sum", "cls", "selfattn"] | None = (
        None  # None: the encoder's own (hf: mean); selfattn: attention trained per task on the token states
    )
    train_fraction: Annotated[float, Range(0, 1, low_open=True)] = (
        1.0  # share of each task's training data the classifier sees (drawn per class): a learning curve
    )
    truncate_dim: AtLeast1 | None = (
        None  # score the embeddings' first N dimensions only (an encoder trained with <task>.matryoshka=)
    )
    selfattn_da: AtLeast1 = 128  # pooling=selfattn: the attention's hidden width (Liu et al.: 128)
    selfattn_r: AtLeast1 = 3  # pooling=selfattn: attention views (Liu et al.: 3)
    data: str | None = None  # SentEval's downstream folder; None: $MTL_DATA_DIR/senteval/downstream
    vectors: str | None = None  # for baselines and vocabulary expansion; None: the run's, or the usual search
    vocab_expansion: bool = (
        False  # a run with embeddings=trainable|both: new words through Skip-Thought's map
    )
    batch_size: AtLeast1 = 128  # sentences per encoding batch
    random_hidden: AtLeast1 = 2048  # random-bilstm width per direction (000_ Table 4: 4096-d embeddings)
    out: str | None = None  # where the reports go; None: the run folder, or runs/baseline-<name>
    device: str = "auto"  # auto: cuda when available
    wandb: Literal["auto", "online", "offline", "disabled"] = (
        "auto"  # auto: online with an API key, else offline
    )
    wandb_project: str = "mtl"  # W&B project

    def __post_init__(self) -> None:
        senteval_keys = {
            "classifier": self.classifier != "logreg",
            "optim": self.optim is not None,
            "classifier_batch": self.classifier_batch is not None,
            "tenacity": self.tenacity is not None,
            "epoch_size": self.epoch_size is not None,
            "kfold": self.kfold is not None,
        }
        if not self.mode.startswith("senteval") and any(senteval_keys.values()):
            given = next(key for key, set_ in senteval_keys.items() if set_)
            raise UserError(
                f"{given}= sets SentEval's classifier: add mode=senteval or mode=senteval-prototyping "
                f"(mode={self.mode} fits scikit-learn's logistic regression)"
            )
        if self.optim is not None:
            self._check_optim()
        if self.train_fraction < 1 and (self.mode.startswith("senteval") or self.pooling == "selfattn"):
            raise UserError(
                f"train_fraction={self.train_fraction} subsamples scikit-learn's training sets: use mode=standard "
                "or fast, without pooling=selfattn"
            )
        if self.vocab_expansion and self.baseline:
            raise UserError(
                f"vocab_expansion=true maps new words into a run's trained word vectors: baseline={self.baseline} "
                "has none; give run="
            )
        if self.baseline in WEIGHTED_BASELINES and self.pooling is not None:
            raise UserError(
                f"pooling={self.pooling}: baseline={self.baseline} weighs word vectors its own way; leave pooling out"
            )
        frequency_keys = self.sif_a != SIF_A or self.word_frequencies != "task"
        if frequency_keys and self.baseline not in ("sif", "glove-bow-idf"):
            given = "sif_a" if self.sif_a != SIF_A else "word_frequencies"
            raise UserError(
                f"{given}= sets a weighted baseline: add baseline=sif (or glove-bow-idf for word_frequencies=)"
            )
        if self.pooling == "selfattn" and self.truncate_dim is not None:
            raise UserError(
                f"truncate_dim={self.truncate_dim} cuts pooled embeddings: pooling=selfattn trains its own; "
                "leave one of them out"
            )
        if self.pooling == "selfattn" and self.mode.startswith("senteval"):
            raise UserError(
                f"pooling=selfattn trains attention and its own classifier per task: use mode=standard or "
                f"fast, not mode={self.mode}"
            )
        attention = default_tasks(attention=True)
        if self.pooling == "selfattn" and (scored := [t for t in self.task_names if not spec(t).attention]):
            raise UserError(
                f"pooling=selfattn trains attention per classification task; {', '.join(scored)} "
                f"take no classifier of that kind: choose among {', '.join(attention)}"
            )
        if not self.task_names:
            raise UserError(f"tasks={self.tasks!r} names no task: give all or a list such as MR,CR,STS14")
        for name in self.task_names:
            spec(name)  # an unknown name: a one-line error with the choices
        if self.ensemble == "mean":
            self._check_ensemble()
        if self.features != "senteval":
            self._check_features()

    def _check_optim(self) -> None:
        if not valid_optimizer(str(self.optim)):
            raise UserError(
                f"optim={self.optim!r} is not SentEval's optimizer string: one of {', '.join(OPTIMIZER_NAMES)}, "
                "then optional settings (e.g. adam, or sgd,lr=0.1)"
            )

    def _check_features(self) -> None:
        """Skip-Thought's features go to scikit-learn's classifier, on the tasks they were made for."""
        if self.mode.startswith("senteval") or self.pooling == "selfattn":
            raise UserError(
                f"features={self.features} feeds scikit-learn's logistic regression: use mode=standard or fast"
                + (", without pooling=selfattn" if self.pooling == "selfattn" else f", not mode={self.mode}")
            )
        allowed = ["MRPC"] if self.features == "skipthought-mrpc" else NB_TASKS
        if others := [t for t in self.task_names if t not in allowed]:
            raise UserError(
                f"features={self.features} is for {', '.join(allowed)} (Skip-Thought "
                f"{'3.3' if allowed == ['MRPC'] else '3.5'}): leave {', '.join(others)} out of tasks="
            )

    def _check_ensemble(self) -> None:
        if self.baseline or len([r for r in (self.run or "").split(",") if r.strip()]) < 2:
            raise UserError("ensemble=mean combines several runs' classifiers: give run=runs/a,runs/b")
        if self.pooling == "selfattn":
            raise UserError(
                "ensemble=mean averages the classifiers of pooled embeddings: leave out pooling=selfattn"
            )
        if unclassified := [t for t in self.task_names if spec(t).protocol not in CLASSIFIED]:
            raise UserError(
                f"ensemble=mean averages classifiers' log-probabilities: {', '.join(unclassified)} fit no "
                "classifier (leave them out of tasks=, or use ensemble=concat)"
            )

    @property
    def task_names(self) -> list[str]:
        if self.tasks.strip().lower() == "all" and self.features != "senteval":  # the tasks they apply to
            return ["MRPC"] if self.features == "skipthought-mrpc" else NB_TASKS
        if self.tasks.strip().lower() == "all":
            names = default_tasks(attention=self.pooling == "selfattn")
            if self.ensemble == "mean":  # the classification tasks: the others fit no classifier
                names = [name for name in names if spec(name).protocol in CLASSIFIED]
            return names
        return comma_list(self.tasks)
