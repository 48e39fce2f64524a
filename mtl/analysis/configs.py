"""The analysis commands' configs, apart from their code: `--help` reads them without importing
torch, and the code is imported when the command runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from mtl.config import AtLeast1, Range


@dataclass
class ReportConfig:
    group: str | None = None  # every run under `runs` whose W&B group is this (e.g. fig2)
    runs: str = "runs"  # where group= looks for run folders
    out: str | None = (
        None  # the HTML file; None: report.html in the sweep folder, else runs/report-<time>.html
    )


@dataclass
class DecomposeConfig:
    run: str = ""  # the run folder whose transfer report to decompose
    report: str = "transfer"  # transfer, transfer-fast, ...
    tasks: str = "all"  # comma-separated transfer tasks; all: every accuracy task the report has
    data: str | None = None  # SentEval's downstream folder; None: $MTL_DATA_DIR/senteval/downstream
    vectors: str | None = None  # the OOV reference; None: the run's own vectors file
    wandb: Literal["auto", "online", "offline", "disabled"] = (
        "auto"  # the tables as a W&B run (job_type decompose)
    )


@dataclass
class MaxPoolConfig:
    run: str = ""  # a run folder whose encoder max-pools (bilstm, lstm, gru)
    pool: str | None = None  # a text file, one sentence per line; None: SNLI dev + test's distinct sentences
    snli: str | None = None  # for the default pool; None: the run's recorded SNLI, else $MTL_DATA_DIR's
    limit: AtLeast1 = 5000  # sentences of the pool used
    examples: str = (
        "a man is playing a guitar on stage .|two dogs are running through the snow ."  # | separated
    )
    min_count: AtLeast1 = 20  # occurrences a word needs to be ranked
    seed: int = 1234  # of the untrained encoder's initialization
    out: str | None = None  # the page; None: <run>/maxpool.html
    wandb: Literal["auto", "online", "offline", "disabled"] = (
        "auto"  # the tables as a W&B run (job_type maxpool)
    )


@dataclass
class NeighboursConfig:
    run: str = ""  # run folder (or several, comma-separated: embeddings concatenated)
    query: str = ""  # the sentence to find neighbours of; several separated by |
    pool: str | None = None  # a text file, one sentence per line; None: SNLI dev + test's distinct sentences
    snli: str | None = None  # for the default pool: SNLI folder or Hub id (None: $MTL_DATA_DIR/snli)
    k: AtLeast1 = 5  # neighbours per query
    analogy: bool = False  # query="a|b|c": nearest to v(b) - v(a) + v(c), the three left out
    batch_size: AtLeast1 = 128  # sentences per encoding batch
    device: str = "auto"  # auto: cuda when available
    wandb: Literal["auto", "online", "offline", "disabled"] = "auto"  # the neighbours as a W&B table


@dataclass
class TsneConfig:
    run: str = ""  # run folder (several, comma-separated: embeddings concatenated)
    task: str = "TREC"  # a transfer task: its test split is drawn (a cross-validated task's only split)
    out: str = ""  # the page (.html); empty: tsne-<task>.html in the run folder
    limit: AtLeast1 = 2000  # points at most, drawn at random (seed=)
    perplexity: Annotated[float, Range(1)] = 30.0  # t-SNE's perplexity (scikit-learn's default)
    seed: int = 1234  # the draw and t-SNE's initialisation
    data: str | None = (
        None  # SentEval's downstream folder; None: the run's recorded one, else $MTL_DATA_DIR's
    )
    vectors: str | None = None  # for vocabulary expansion; None: the run's
    batch_size: AtLeast1 = 128  # sentences per encoding batch
    device: str = "auto"  # auto: cuda when available


@dataclass
class CompareConfig:
    out: str = "runs/sweeps/objectives"  # the sweep's folder
    transfer_tasks: str = "MR,CR,SUBJ,MPQA,TREC,SICK-R"  # SentEval tasks scored for each member
    mode: Literal["standard", "fast"] = "fast"  # the transfer protocol (fast: 5 folds, a smaller grid)
    data: str | None = None  # SentEval's downstream folder; None: $MTL_DATA_DIR/senteval/downstream
    device: str = "auto"  # auto: cuda when available
