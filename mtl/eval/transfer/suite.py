"""`just transfer`: every SentEval task on one encoder, reported in the layout of Table 2."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from mtl.config import AtLeast1
from mtl.errors import UserError
from mtl.eval.encoder import SentenceEncoder, baseline_encoder, load_encoder
from mtl.eval.transfer import classifiers as protocol_fns
from mtl.eval.transfer.classifiers import Protocol, pair_features, relatedness_features
from mtl.eval.transfer.tasks import READERS, TransferTask, read_task
from mtl.paths import data_dir
from mtl.text.vectors import resolve_vectors_path
from mtl.tracking import Tracker

# Table 2 of Liu et al. (2018) first, then the other SentEval tasks.
COLUMNS = [
    "MR",
    "CR",
    "MPQA",
    "SUBJ",
    "SST2",
    "SST5",
    "SICK-E",
    "SICK-R",
    "STS14",
    "TREC",
    "MRPC",
    "STS-B",
    "STS12",
    "STS13",
    "STS15",
    "STS16",
]


@dataclass
class TransferConfig:
    run: str | None = None  # run folder or checkpoint
    baseline: Literal["glove-bow", "random-bilstm"] | None = None  # instead of run=: a reference encoder
    tasks: str = "all"  # comma-separated, e.g. MR,CR,STS14
    mode: Literal["standard", "fast"] = "standard"  # fast: 5 folds, a smaller grid
    pooling: Literal["max", "mean", "max+mean"] | None = None  # None: the encoder's own
    data: str | None = None  # SentEval's downstream folder; None: $MTL_DATA_DIR/senteval/downstream
    vectors: str | None = None  # for baselines and vocabulary expansion; None: the run's, or the usual search
    batch_size: AtLeast1 = 128  # sentences per encoding batch
    random_hidden: AtLeast1 = 2048  # random-bilstm width per direction (000_ Table 4: 4096-d embeddings)
    out: str | None = None  # where the reports go; None: the run folder, or runs/baseline-<name>
    device: str = "auto"  # auto: cuda when available
    wandb: Literal["auto", "online", "offline", "disabled"] = (
        "auto"  # auto: online with an API key, else offline
    )
    wandb_project: str = "mtl"  # W&B project

    def __post_init__(self) -> None:
        for name in self.task_names:
            if name not in READERS:
                raise UserError(f"unknown transfer task {name!r}: choose from {', '.join(READERS)}")

    @property
    def task_names(self) -> list[str]:
        if self.tasks.strip().lower() == "all":
            return [c for c in COLUMNS if c in READERS]
        return [t.strip() for t in self.tasks.split(",") if t.strip()]


def data_root(config: TransferConfig) -> Path:
    if config.data:
        return Path(config.data).expanduser()
    if data_dir() is None:
        raise UserError(
            "no transfer data: pass data=PATH to SentEval's downstream folder or set MTL_DATA_DIR"
        )
    return data_dir() / "senteval" / "downstream"


def make_encoder(config: TransferConfig) -> SentenceEncoder:
    if config.baseline:
        return baseline_encoder(
            config.baseline,
            str(resolve_vectors_path(config.vectors)),
            config.random_hidden,
            device=config.device,
        )
    encoder = load_encoder(config.run, device=config.device)
    if config.vectors:
        encoder.vectors = str(resolve_vectors_path(config.vectors))
    return encoder


def evaluate_task(
    task: TransferTask, encoder: SentenceEncoder, protocol: Protocol, batch_size: int, pooling: str | None
) -> dict[str, float]:
    texts = list(
        dict.fromkeys(t for split in task.splits.values() for column in split.sentences for t in column)
    )
    embedded = encoder.encode(texts, batch_size=batch_size, pooling=pooling, progress=False)
    row = {text: i for i, text in enumerate(texts)}

    def columns(split: str) -> list[np.ndarray]:
        return [embedded[[row[t] for t in column]] for column in task.splits[split].sentences]

    def features(split: str) -> np.ndarray:
        parts = columns(split)
        return parts[0] if len(parts) == 1 else pair_features(*parts)

    def labels(split: str) -> np.ndarray:
        return np.asarray(task.splits[split].labels)

    if task.kind == "cv":
        return {"acc": protocol_fns.cross_validated_accuracy(features("all"), labels("all"), protocol)}
    if task.kind == "trec":
        return protocol_fns.train_test_accuracy(
            features("train"), labels("train"), features("test"), labels("test"), protocol
        )
    if task.kind == "dev":
        return protocol_fns.dev_tuned_accuracy(
            features("train"),
            labels("train"),
            features("dev"),
            labels("dev"),
            features("test"),
            labels("test"),
            protocol,
        )
    if task.kind == "relatedness":
        x = {s: relatedness_features(*columns(s)) for s in ("train", "dev", "test")}
        return protocol_fns.relatedness(
            x["train"],
            labels("train"),
            x["dev"],
            labels("dev"),
            x["test"],
            labels("test"),
            task.score_range,
            protocol,
        )
    return protocol_fns.sts_scores({s: (*columns(s), labels(s)) for s in task.splits})


def run(config: TransferConfig) -> tuple[Path, dict]:
    if (config.run is None) == (config.baseline is None):
        raise UserError("give exactly one of run=runs/<run> and baseline=glove-bow|random-bilstm")
    root = data_root(config)
    encoder = make_encoder(config)
    protocol = Protocol.fast() if config.mode == "fast" else Protocol()
    out = Path(
        config.out
        or (config.run if config.run and Path(config.run).is_dir() else f"runs/baseline-{config.baseline}")
    ).expanduser()
    tracker = Tracker.start(
        job_type="transfer-eval",
        config={**asdict(config), "dim": encoder.dim},
        project=config.wandb_project,
        directory=out,
        mode=config.wandb,
        name=f"transfer-{encoder.name}",
    )
    if config.run:
        tracker.use_artifact(f"{Path(config.run).name}-encoder:latest")
    results: dict[str, dict[str, float]] = {}
    started = time.perf_counter()
    for name in config.task_names:
        task_started = time.perf_counter()
        task = read_task(name, root)
        results[name] = {
            **evaluate_task(task, encoder, protocol, config.batch_size, config.pooling),
            "seconds": round(time.perf_counter() - task_started, 1),
        }
        print(
            f"  {name:<7} {headline(name, results[name]):>10}  ({results[name]['seconds']:.0f} s)", flush=True
        )
    report = {
        "encoder": encoder.name,
        "dim": encoder.dim if config.pooling is None else None,
        "pooling": config.pooling,
        "mode": config.mode,
        "seconds": round(time.perf_counter() - started, 1),
        "results": results,
    }
    _write(out, report)
    tracker.table(
        "transfer",
        ["task", "headline", *sorted({k for r in results.values() for k in r})],
        [
            [t, headline(t, r), *(r.get(k) for k in sorted({k for r in results.values() for k in r}))]
            for t, r in results.items()
        ],
    )
    tracker.summary({f"transfer/{t}/{k}": v for t, r in results.items() for k, v in r.items()})
    tracker.finish()
    return out, report


def headline(task: str, result: dict[str, float]) -> str:
    """The number Table 2 shows: accuracy in %, Pearson for relatedness, Pearson/Spearman for STS."""
    if "all/pearson" in result:
        return f"{result['all/pearson']:.2f}/{result['all/spearman']:.2f}".replace("0.", ".")
    if "pearson" in result:
        return f"{result['pearson']:.4f}"
    if task == "MRPC":
        return f"{100 * result['acc']:.2f}/{100 * result['f1']:.2f}"
    return f"{100 * result['acc']:.2f}"


def markdown(report: dict) -> str:
    tasks = [c for c in COLUMNS if c in report["results"]]
    dim = report["dim"] if report["dim"] is not None else "-"
    return "\n".join(
        [
            f"| model | dim | {' | '.join(tasks)} |",
            f"|---|---:|{'---:|' * len(tasks)}",
            f"| {report['encoder']} | {dim} | {' | '.join(headline(t, report['results'][t]) for t in tasks)} |",
            "",
            f"mode {report['mode']}, pooling {report['pooling'] or 'as trained'}, {report['seconds']:.0f} s. "
            "Accuracy (%) for classification (MRPC: accuracy/F1), Pearson for SICK-R and STS-B, "
            "Pearson/Spearman (mean over subsets) for STS12-16.",
            "",
        ]
    )


def _write(out: Path, report: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, text in (
        ("transfer.json", json.dumps(report, indent=2) + "\n"),
        ("transfer.md", markdown(report)),
    ):
        partial = out / f".{name}.partial"
        partial.write_text(text)
        os.replace(partial, out / name)
