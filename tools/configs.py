"""The benchmark commands' configs (and fuzz's), apart from their code: `--help` reads them
without importing torch, and the code is imported when the command runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from mtl.config import AtLeast0, AtLeast1, Range
from mtl.errors import UserError
from mtl.tasks import DEFAULT_TASKS


@dataclass
class BenchTrainConfig:
    steps: Annotated[int, Range(3)] = 5  # timed steps per contender, task, setting and batching mode
    warmup: AtLeast0 = 1  # untimed steps first
    only: str = ""  # comma-separated label prefixes, e.g. "bilstm 512"
    tasks: str = ",".join(DEFAULT_TASKS)  # which tasks' steps to time
    precisions: str = "fp32,bf16"  # mtl's precisions to time (bf16 only where the CPU has it)
    nli_train_split: str = "train_small"  # SNLI split the batches come from
    classifsquad: str = "data/classifsquad"  # ClassifSQuAD build the batches come from
    vectors: str | None = None  # GloVe file; None: the usual search (random 300-d when it is not 300-d)
    threads: AtLeast0 = 1  # torch threads; 0 keeps torch's default
    device: str = "auto"  # auto: cuda when present (every contender there, cuDNN kernels), else cpu
    objectives: str = (
        ""  # also time these tasks' steps alone (qt,skipthought,mnrl,sts); only=objectives: just them
    )
    objective_hidden: AtLeast0 = 256  # the BiGRU's width per direction for objectives=
    schedule: str = (
        ""  # mixed: time a schedule=mixed step against the single-task steps it holds (bench/mixed.py)
    )
    preset: str = "paper-multitask-blstm2048"  # schedule=mixed: the configuration whose step is timed
    ops: bool = False  # count each encoder's host work per step instead of timing (bench/ops.py)
    profile: bool = False  # where a step's time goes: GPU busy/idle, kernels (bench/step_profile.py)
    gradcache: Literal["", "mnrl", "qt"] = (
        ""  # GradCache's memory and time against the plain step (bench/gradcache.py)
    )
    gradcache_batches: str = "64,256,1024"  # gradcache=: the batch sizes
    mini_batch: AtLeast1 = 32  # gradcache=: the cached contender's <task>.mini_batch=


@dataclass
class BenchEncodeConfig:
    snli: str | None = None  # SNLI folder or Hub id; None: $MTL_DATA_DIR/snli, else stanfordnlp/snli
    splits: str = "dev,test"  # the SNLI splits whose distinct sentences are encoded
    limit: AtLeast0 = 0  # the first N distinct sentences only; 0: all
    hidden: AtLeast1 = 512  # BiLSTM width per direction (the paper's 2048 on a GPU)
    batch: AtLeast1 = 64  # the reference's sentences per batch (InferSent's default)
    encode_batch: AtLeast1 = 128  # mtl's encode(batch_size=)
    batch_tokens: AtLeast0 = 8192  # the `mtl tokens` contender's encode(batch_tokens=); 0: leave it out
    runs: AtLeast1 = 3  # timed runs per contender (the median is reported)
    device: str = "auto"  # auto: cuda when present
    threads: AtLeast0 = 1  # torch threads on the CPU; 0 keeps torch's default


@dataclass
class BenchLoopConfig:
    encoder: str = "bilstm"  # the shared encoder
    hidden: AtLeast1 = 64  # its width (the paper's 2048 on a GPU; small on a CPU, where the host shows)
    steps: AtLeast1 = 200  # NLI steps per block: one block warms up, the next is measured
    batch: AtLeast1 = 64  # NLI pairs per step
    runs: AtLeast1 = 3  # whole runs, each followed by the same steps alone; medians reported
    wandb: str = "offline"  # the run's W&B mode (offline: what a user without an API key gets)
    wandb_every: AtLeast1 | None = None  # the run's steps per W&B row; None: its default (10 on CUDA, else 1)
    prefetch: str = "auto"  # the run's prefetching (auto: on with CUDA)
    checkpoint_every: AtLeast1 | None = (
        None  # the run's steps per checkpoint; None: its default (5000 on CUDA, else 500)
    )
    snli: str | None = None  # SNLI folder or Hub id; None: $MTL_DATA_DIR/snli, else stanfordnlp/snli
    nli_train_split: str = "train_small"  # SNLI split the batches come from
    vectors: str | None = None  # GloVe file; None: the usual search (random 300-d when it is not 300-d)
    threads: int = 1  # torch threads on the CPU; 0 keeps torch's default
    device: str = "auto"  # auto: cuda when present


@dataclass
class BenchVerdictsConfig:
    preset: str = "cpu-small-nli"  # the configuration whose seeds are compared (experiments/<preset>.toml)
    keys: str = "hidden=256 max_steps=300 wandb=disabled"  # more train-multitask keys, space-separated
    seeds: AtLeast1 = 12  # runs of the configuration (seeds 1..N)
    planted: AtLeast1 = 3  # runs trained on shuffled labels (seeds 1..N)
    group: AtLeast1 = 3  # seeds per encoder in a comparison
    trials: AtLeast1 = 200  # draws of two groups
    tasks: str = "MR,CR,SUBJ,TREC,SICK-R,STS14"  # transfer tasks scored (the family Holm corrects over)
    mode: str = "fast"  # the transfer protocol
    data: str | None = None  # SentEval's downstream folder; None: $MTL_DATA_DIR/senteval/downstream
    resamples: AtLeast1 = 2000  # bootstrap replicates per comparison
    out: str = "runs/bench-verdicts"  # the runs and the result (verdicts.json, verdicts.md)
    synthetic_families: AtLeast0 = 400  # A/A families per cell of the synthetic calibration grid (0: none)
    synthetic_only: bool = False  # the synthetic grid alone: no training, no transfer
    gate_searches: AtLeast0 = (
        200  # pure-noise mixture searches at 8 and 16 proxies for the skill gate (0: none)
    )


@dataclass
class BenchHFConfig:
    hf_model: str = "sentence-transformers/all-MiniLM-L6-v2"  # Hub id or local folder
    steps: AtLeast1 = 5  # timed steps per task and precision
    batch_nli: AtLeast1 = 64  # NLI pairs per step (the training default)
    batch_squad: AtLeast1 = 128  # ClassifSQuAD triples per step (the training default)
    classifsquad: str = "data/classifsquad"  # a ClassifSQuAD build (just build-classifsquad)
    max_seq_length: AtLeast1 = 128  # subword tokens per sentence
    threads: AtLeast1 | None = None  # torch threads; None: torch's default
    device: str = "cpu"  # cpu or cuda
    # Instead: the NLI step's time and peak memory with gradient_checkpointing=true, with LoRA
    # adapters of rank lora_r (when > 0) and compiled (compile=true), each next to the plain step,
    # at each batch size of checkpointing_batches (fp32).
    checkpointing: bool = False  # true: the step with gradient checkpointing, beside the plain one
    lora_r: int = 0  # > 0: also the step with LoRA adapters of this rank
    compile: bool = False  # also the step with compile=true (torch.compile; its compilation in the warm-up)
    checkpointing_batches: str = "16,64"  # batch sizes the checkpointing comparison runs at
    warmup: AtLeast1 = 1  # untimed steps before each contender's timed ones (compile=true: 3 or more)


MODES = ("fast", "standard", "senteval", "senteval-prototyping")


ENCODERS = ("glove-bow", "1024")

# The tasks `senteval=` times SentEval itself on (its k-fold, TREC and SICK-E protocols; STS14 its cosine)
SENTEVAL_COMPARED = ("MR", "CR", "SUBJ", "MPQA", "TREC", "SICK-E", "STS14")


@dataclass
class BenchTransferConfig:
    run: str | None = None  # a trained run with 1024-d embeddings; None: random BiLSTM-max 512
    modes: str = "fast,standard"  # protocols to time (also senteval, senteval-prototyping)
    tasks: str = "all"  # as transfer
    vectors: str | None = None  # GloVe file; None: the usual search
    encoders: str = "glove-bow,1024"  # the GloVe baseline, the 1024-d encoder, or both
    tokenizer: str = "spacy"  # the baselines' tokens; whitespace: SentEval's own
    # github.com/facebookresearch/SentEval, cloned: run under the senteval modes, task by task
    senteval: str | None = (
        None  # a SentEval checkout: SentEval itself times the same GloVe bag of words beside mtl
    )
    runs: AtLeast1 = 1  # each suite this many times; the median time is reported
    # each suite then runs as `just transfer`, default threads and OMP_NUM_THREADS=1 in turn, timed
    hog: AtLeast0 = 0  # busy processes beside each suite (a machine shared with other work)
    # tools/as_typed.py: process trees' CPU (a cgroup each) and wall, the two alternated, medians
    as_typed: bool = (
        False  # with senteval=: the command as typed, cold, against SentEval's whole process on one thread
    )

    def chosen_encoders(self) -> list[tuple[str, dict]]:
        """(label, the transfer keys that evaluate it) of each encoder of `encoders=`."""
        baseline_tokens = {} if self.tokenizer == "spacy" else {"tokenizer": self.tokenizer}
        encoders = {
            "glove-bow": (
                "glove-bow" + ("" if self.tokenizer == "spacy" else f" ({self.tokenizer})"),
                {"baseline": "glove-bow", **baseline_tokens},
            ),
            "1024": (
                "1024-d " + ("run" if self.run else "random-bilstm 512"),
                {"run": self.run}
                if self.run
                else {"baseline": "random-bilstm", "random_hidden": 512, **baseline_tokens},
            ),
        }
        return [encoders[name] for name in self.encoders.split(",")]

    def __post_init__(self) -> None:
        if bad := [m for m in self.modes.split(",") if m not in MODES]:
            raise UserError(f"modes={self.modes!r}: {bad[0]!r} is not one of {', '.join(MODES)}")
        if bad := [e for e in self.encoders.split(",") if e not in ENCODERS]:
            raise UserError(f"encoders={self.encoders!r}: {bad[0]!r} is not one of {', '.join(ENCODERS)}")
        if self.tokenizer not in ("spacy", "whitespace"):
            raise UserError(f"tokenizer={self.tokenizer!r}: use spacy or whitespace")
        if self.senteval is not None:
            checkout = Path(self.senteval).expanduser()
            if not (checkout / "senteval" / "engine.py").is_file():
                raise UserError(
                    f"senteval={self.senteval}: no senteval/engine.py there; give the folder of a "
                    "SentEval checkout (git clone https://github.com/facebookresearch/SentEval)"
                )
            if not any(m.startswith("senteval") for m in self.modes.split(",")):
                raise UserError(
                    f"senteval= compares SentEval's own configurations: add modes=senteval-prototyping "
                    f"or modes=senteval (modes={self.modes})"
                )
            if "glove-bow" not in self.encoders.split(","):
                raise UserError("senteval= scores the GloVe bag of words: keep glove-bow in encoders=")
            if self.tasks == "all" or any(t not in SENTEVAL_COMPARED for t in self.tasks.split(",")):
                raise UserError(
                    f"senteval= compares on {', '.join(SENTEVAL_COMPARED)}: give tasks= among them "
                    f"(tasks={self.tasks})"
                )


@dataclass
class FuzzConfig:
    readers: str = "encoder,task,corpus,vectors,snli,run,wandb,caches,items,jobs,senteval,plan"  # which readers, comma-separated
    cases: AtLeast1 = 2000  # damaged copies per reader
    seed: int = 0  # cases of one seed are always the same damage


@dataclass
class BenchAffinityConfig:
    preset: str = "cpu-small"  # the configuration (its tasks replaced by nli, SICK-E and a shuffled SICK-E)
    # CPU-sized: a measurement repeats 3 lookahead steps and 12 losses in float64 on 8 held batches
    # of each task (2.7 minutes at hidden 128, batches of 64, on 2 busy cores)
    keys: str = (
        "hidden=64 max_steps=150 eval_every=150 nli.batch=32 sick.batch=32 sickshuf.batch=32 sick.steps=50 "
        "max_eval=2000 sample_test=true wandb=disabled"
    )  # more train-multitask keys
    seeds: AtLeast1 = 5  # runs (seeds 1..N): the shuffled copy's entries checked on each
    every: AtLeast1 = 50  # affinity_every= of each run
    draws: AtLeast1 = 10  # fresh held-batch draws at the first run's final weights (the coverage)
    out: str = "runs/bench-affinity"  # the runs and the result (affinity-floor.json, .md)


@dataclass
class BenchStudyConfig:
    members: AtLeast1 = 4  # runs in the study (seeds 1..N of the given training keys)
    max_steps: AtLeast1 = 20  # each run's steps
    repeats: AtLeast1 = 3  # studies of each kind, side by side, the order alternating
