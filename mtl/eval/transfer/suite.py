"""`just transfer`: every SentEval task on one encoder, reported in the layout of Table 2."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from mtl.config import apply_overrides, comma_list
from mtl.console import progress_stream, say
from mtl.errors import UserError
from mtl.eval import decontaminate
from mtl.eval.combined import CombinedEncoder
from mtl.eval.configs import BASELINES, SentEvalParams

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from mtl.eval.configs import TransferConfig as TransferConfig
from mtl.eval.encoder import SentenceEncoder, pretrained_encoder
from mtl.eval.loading import baseline_encoder, encoder_file, encoder_files, load_encoder
from mtl.eval.transfer import ensemble, fitting, selfattn
from mtl.eval.transfer.classifiers import Protocol
from mtl.eval.transfer.progress import reporting, stage
from mtl.eval.transfer.protocols import protocol_of, scored
from mtl.eval.transfer.provenance import evaluated, weights_digest
from mtl.eval.transfer.threads import one_thread_scoring
from mtl.eval.weighted_bow import SIF_A, WEIGHTED_BASELINES, WeightedBagOfWords
from mtl.files.atomic import check_output_dir
from mtl.files.locks import FolderLock
from mtl.files.paths import data_dir
from mtl.formats import transfer_report
from mtl.formats.senteval_format import micro_macro
from mtl.models.encoders.base import EncoderConfig
from mtl.models.encoders.config import HFOptions
from mtl.runs import beside, encoder_artifact, run_folder_of, wandb_group
from mtl.text.tokenizer import make_tokenizer
from mtl.text.vectors import resolve_vectors_path
from mtl.tracking.tracker import Tracker
from mtl.transfer_tasks.tasks import Split, TransferTask, read_task


def baseline_name(config: TransferConfig) -> str:
    """`glove-bow`, `random-bilstm`, or `hf-<model folder or id>` (e.g. hf-all-MiniLM-L6-v2)."""
    if config.baseline == "hf":
        return "hf-" + Path(str(config.hf_model).rstrip("/")).name
    name = str(config.baseline)
    # settings that change the embeddings name their own folder: results of two never merge
    if config.baseline == "sif" and config.sif_a != SIF_A:
        name += f"-a{config.sif_a:g}"
    if config.word_frequencies != "task":
        name += "-" + Path(config.word_frequencies).stem
    return name + ("" if config.tokenizer == "spacy" else f"-{config.tokenizer}")


def data_root(config: TransferConfig) -> Path:
    if config.data:
        return Path(config.data).expanduser()
    if data_dir() is None:
        raise UserError(
            "no transfer data: pass data=PATH to SentEval's downstream folder or set MTL_DATA_DIR"
        )
    return data_dir() / "senteval" / "downstream"


def make_encoder(config: TransferConfig) -> SentenceEncoder | WeightedBagOfWords:
    if config.tokenizer != "spacy" and config.baseline in (None, "hf"):
        raise UserError(
            f"tokenizer={config.tokenizer} is for the word-vector baselines (glove-bow, sif, ...): a run reads "
            "text with the tokenizer it was trained with, an hf model with its own"
        )
    if config.baseline == "hf":
        options = HFOptions(hf_model=config.hf_model, max_seq_length=config.max_seq_length)
        model = EncoderConfig(encoder="hf", options=options)
        return pretrained_encoder(model, config.device, baseline_name(config))
    if config.baseline in WEIGHTED_BASELINES:
        return WeightedBagOfWords(
            config.baseline,
            str(resolve_vectors_path(config.vectors)),
            make_tokenizer(config.tokenizer, lowercase=True),
            config.sif_a,
            config.word_frequencies,
        )
    if config.baseline:
        encoder = baseline_encoder(
            config.baseline,
            str(resolve_vectors_path(config.vectors)),
            config.random_hidden,
            device=config.device,
            tokenizer=config.tokenizer,
        )
        encoder.name = baseline_name(config)  # glove-bow-whitespace: its own row and folder
        return encoder
    encoders = [load_encoder(run, device=config.device) for run in run_paths(config)]
    for encoder in encoders:
        if config.vectors:
            encoder.vectors = str(resolve_vectors_path(config.vectors))
        if config.vocab_expansion and encoder.expansion is None:  # an export may bring its own map
            encoder.fit_vocab_expansion()
    if len(encoders) == 1:
        return encoders[0]
    return ensemble.Ensemble(encoders) if config.ensemble == "mean" else CombinedEncoder(encoders)


def run_paths(config: TransferConfig) -> list[str]:
    """The runs of `run=`: one, or several whose embeddings are concatenated (`run=runs/a,runs/b`)."""
    return comma_list(config.run)


def evaluate_task(
    task: TransferTask,
    encoder: SentenceEncoder,
    protocol: Protocol,
    batch_size: int,
    pooling: str | None,
    attention: tuple[int, int] = (128, 3),
    truncate_dim: int | None = None,
) -> dict:
    """The task's results, with SentEval's sample counts: `ndev` (what tuned the classifier: the
    training data under cross-validation) and `ntest`."""
    sizes = protocol_of(task).sizes({name: len(split.labels) for name, split in task.splits.items()})
    return {**_evaluated(task, encoder, protocol, batch_size, pooling, attention, truncate_dim), **sizes}


def _evaluated(
    task: TransferTask,
    encoder: SentenceEncoder,
    protocol: Protocol,
    batch_size: int,
    pooling: str | None,
    attention: tuple[int, int] = (128, 3),  # pooling=selfattn: (d_a, r)
    truncate_dim: int | None = None,  # the embeddings' first dimensions only (Matryoshka)
) -> dict[str, float]:
    texts = list(
        dict.fromkeys(t for split in task.splits.values() for column in split.sentences for t in column)
    )
    row = {text: i for i, text in enumerate(texts)}
    if pooling == "selfattn":
        states = encoder.token_states(texts, batch_size=batch_size)
        with one_thread_scoring():  # the attention's fits, as every other task's (threads.py)
            return selfattn.evaluate(
                task,
                lambda split: [
                    selfattn.States([states[row[t]] for t in column])
                    for column in task.splits[split].sentences
                ],
                protocol,
                *attention,
            )
    stage(f"embedding {len(texts):,} sentences")
    started = time.perf_counter()
    embedded = encoder.encode(
        texts, batch_size=batch_size, pooling=pooling, progress=False, truncate_dim=truncate_dim
    )
    embedding_seconds = round(time.perf_counter() - started, 1)  # the rest of a task's time: fitting
    stage("fitting")
    return {**_scored(task, embedded, row, protocol), "embed_seconds": embedding_seconds}


def _scored(task: TransferTask, embedded: np.ndarray, row: dict[str, int], protocol: Protocol) -> dict:
    """The task scored on its `embedded` sentences, in SentEval's order (see below)."""

    task = training_part(task, protocol.train_fraction, protocol.seed)  # a learning curve: train= fraction
    scoring = protocol_of(task)
    if not scoring.fitted:  # STS: a cosine per pair, the order is irrelevant
        return scored(task, embedded, row, protocol)
    # SentEval sorts every split by sentence length, then label, before it embeds and fits ("to
    # reduce padding"); its folds, held-out shares and batches are drawn in that order. The same
    # order here gives the same folds; the per-item outputs go back to the files' order.
    orders = {name: senteval_order(split, task.quirks.sort_columns) for name, split in task.splits.items()}
    in_order = {name: reordered(split, orders[name]) for name, split in task.splits.items()}
    result = scored(dataclasses.replace(task, splits=in_order), embedded, row, protocol)
    if "items" in result:
        tested = orders[scoring.tested]
        result["items"] = {key: in_file_order(values, tested) for key, values in result["items"].items()}
    return result


def senteval_order(split: Split, columns: tuple[int, ...] | None = None) -> np.ndarray:
    """SentEval's order of a split's examples: by the whitespace tokens of each sentence (of the
    `columns`, in that order; SNLI's second first), then by label (a stable sort: ties keep the
    file's order), as its task classes sort them."""
    sentences = split.sentences if columns is None else [split.sentences[c] for c in columns]
    return np.array(
        sorted(
            range(len(split)),
            key=lambda i: (*(len(column[i].split()) for column in sentences), split.labels[i]),
        ),
        dtype=np.int64,
    )


def reordered(split: Split, order: np.ndarray) -> Split:
    return Split([[column[i] for i in order] for column in split.sentences], [split.labels[i] for i in order])


def in_file_order(values: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Per-item `values` of a split taken in `order`, put back in the split's own order."""
    restored = np.empty_like(values)
    restored[order] = values
    return restored


def training_part(task: TransferTask, fraction: float, seed: int) -> TransferTask:
    """`task` with `fraction` of its train split (classes drawn alike; relatedness scores at random).
    Cross-validated tasks have no train split: their folds are subsampled (`Protocol.train_fraction`)."""
    if fraction >= 1 or "train" not in task.splits:
        return task
    split = task.splits["train"]
    if protocol_of(task).graded:  # scores, not classes: drawn at random
        count = max(2, int(np.ceil(fraction * len(split))))
        share = np.sort(np.random.default_rng(seed).choice(len(split), count, replace=False))
    else:
        share = fitting.training_share(np.asarray(split.labels), fraction, seed)
    part = Split([[column[i] for i in share] for column in split.sentences], [split.labels[i] for i in share])
    return dataclasses.replace(task, splits={**task.splits, "train": part})


def output_folder(config: TransferConfig) -> Path:
    """The run folder of `run=` (also when it names a checkpoint inside it), or runs/baseline-<name>."""
    if config.out:
        return Path(config.out).expanduser()
    if config.baseline:
        return Path(f"runs/baseline-{baseline_name(config)}")
    if len(runs := run_paths(config)) > 1:
        kind = "ensemble-" if config.ensemble == "mean" else "combined-"
        return beside(runs) / (kind + "+".join(Path(run).expanduser().name for run in runs))
    source = Path(config.run).expanduser()
    if source.is_dir():
        return source
    return run_folder_of(source) or source.parent


def senteval_params(config: TransferConfig) -> SentEvalParams | None:
    """SentEval's classifier settings: the mode's, then the keys given."""
    if not config.mode.startswith("senteval"):
        return None
    given = {
        "nhid": config.nhid if config.classifier == "mlp" else 0,
        "dropout": config.dropout,
        "max_epoch": config.max_epoch,
        "seed": config.seed,
        **{
            name: value
            for name, value in (
                ("optim", config.optim),
                ("batch_size", config.classifier_batch),
                ("tenacity", config.tenacity),
                ("epoch_size", config.epoch_size),
                ("kfold", config.kfold),
            )
            if value is not None
        },
    }
    if config.mode == "senteval":
        return SentEvalParams.default(**given)
    return SentEvalParams.prototyping(**given)


def report_name(config: TransferConfig) -> str:
    return transfer_report.report_name(
        config.mode,
        config.classifier,
        config.pooling,
        config.train_fraction,
        config.truncate_dim,
        config.features,
        config.vocab_expansion,
    )


def run(config: TransferConfig) -> tuple[Path, dict]:
    if (config.run is None) == (config.baseline is None):
        raise UserError(f"give exactly one of run=runs/<run> and baseline={'|'.join(BASELINES)}")
    if config.baseline == "hf" and not config.hf_model:
        raise UserError("baseline=hf needs hf_model=: a Hub id or a local model folder")
    out = check_output_dir(output_folder(config), "out")
    tasks = {name: read_task(name, data_root(config)) for name in config.task_names}  # before any work
    encoder, provenance = _loaded_as_recorded(config)
    return out, _reports(config, out, tasks, encoder, provenance)


def evaluate_with(config: TransferConfig, encoder: Any, source: str) -> dict:
    """The suite on an encoder made elsewhere (`mtl.transfer.evaluate`: any function of
    sentences), its reports written into `config.out` as `just transfer` writes a run's."""
    out = check_output_dir(output_folder(config), "out")
    tasks = {name: read_task(name, data_root(config)) for name in config.task_names}
    return _reports(config, out, tasks, encoder, None, source)


def _reports(
    config: TransferConfig,
    out: Path,
    tasks: dict,
    encoder: Any,
    provenance: list[dict] | None,
    source: str | None = None,
) -> dict:
    protocol = dataclasses.replace(
        Protocol.named(config.mode, senteval_params(config)),
        train_fraction=config.train_fraction,
        features=config.features,
    )
    name = report_name(config)
    # One writer per report: a second transfer of the same encoder and protocol would merge
    # its results into the same files.
    with FolderLock(out / name, "transfer report", "out"):
        return _evaluate_all(config, out, name, tasks, encoder, protocol, provenance, source)


def _loaded_as_recorded(config: TransferConfig) -> tuple[SentenceEncoder, list[dict] | None]:
    """The encoder, and what it was loaded from (`provenance.evaluated`) for a run. A run still
    training may replace its best checkpoint while it is read: then it is read again."""
    if not config.run:
        return make_encoder(config), None
    for _ in range(3):
        before = [weights_digest(encoder_file(run)) for run in run_paths(config)]
        encoder = make_encoder(config)
        after = [evaluated(run) for run in run_paths(config)]
        if before == [entry["weights_sha256"] for entry in after]:
            return encoder, after
    raise UserError(f"{config.run} kept changing while it was read: wait for its run to write its checkpoint")


def pooled_dim(encoder: SentenceEncoder, pooling: str | None, attention_views: int) -> int:
    """The width of the embeddings scored under `pooling=` (the encoder's own when None); selfattn
    concatenates `attention_views` weighted sums of the word states (Liu et al.: 3 x 2,048)."""
    if pooling is None:
        return encoder.dim
    if pooling == "selfattn":
        return encoder.token_states(["the"])[0].shape[1] * attention_views
    return encoder.encode(["the"], pooling=pooling, progress=False).shape[1]


def scored_dim(encoder: SentenceEncoder, config: TransferConfig) -> int:
    """The width the classifiers see: the pooled embeddings', or their first `truncate_dim=`; an
    ensemble's: its members' widths, summed."""
    if isinstance(encoder, ensemble.Ensemble):
        return sum(scored_dim(member, config) for member in encoder.members)
    width = pooled_dim(encoder, config.pooling, config.selfattn_r)
    if config.truncate_dim is None:
        return width
    if config.truncate_dim > width:
        raise UserError(
            f"truncate_dim={config.truncate_dim}: {encoder.name}'s embeddings have {width} dimensions: "
            f"give at most {width}"
        )
    return config.truncate_dim


def _evaluate_all(
    config: TransferConfig,
    out: Path,
    name: str,
    tasks: dict,
    encoder: SentenceEncoder,
    protocol: Protocol,
    provenance: list[dict] | None = None,
    source: str | None = None,
) -> dict:
    """Every task, each result written as soon as it exists; the report."""
    report = {
        "encoder": encoder.name,
        "source": source
        or str(config.run or (config.hf_model if config.baseline == "hf" else config.baseline)),
        "vectors": encoder.vectors,
        "dim": scored_dim(encoder, config),
        "pooling": config.pooling,
        "mode": config.mode,
        **({"classifier": asdict(protocol.senteval)} if protocol.senteval else {}),
        "seconds": 0.0,
        "results": {},
    }
    if provenance is not None:  # what was evaluated: a run still training has only its best checkpoint so far
        report["evaluated"] = provenance
        for entry in provenance:
            if "training" in entry:
                say(
                    f"note: the run of {entry['file']} is still training ({entry['training']}): this "
                    f"evaluates its best checkpoint so far (step {entry['step']}); the report records it, "
                    "and just report and just compare flag it once the run has exported its final encoder"
                )
    report["results"] = transfer_report.earlier_results(out / f"{name}.json", report)
    items = transfer_report.read_items(out / f"{name}{transfer_report.ITEMS_SUFFIX}", report["results"])
    tracker = Tracker.start(
        job_type="transfer-eval",
        config={**asdict(config), "dim": encoder.dim},
        project=config.wandb_project,
        directory=out / "transfer",  # its own wandb/ folder: the training run's stays the training run's
        mode=config.wandb,
        name=f"transfer-{encoder.name}",
        group=wandb_group(out) if config.run else "baselines",
        tags=["transfer", config.mode],
    )
    for run in run_paths(config):  # the exact encoders evaluated, by their content digests
        folder = Path(run).expanduser()
        tracker.use_input(encoder_artifact(folder if folder.is_dir() else out), "encoder", encoder_files(run))
    # the test sentences the run trained on (its contamination ledger): each task scored without them too
    seen, why_not_seen = decontaminate.runs_seen(run_paths(config))
    if seen is None and config.run:
        say(f"note: scores without the test items the run trained on are left out: {why_not_seen}")
    results: dict[str, dict[str, float]] = {}
    started = time.perf_counter()
    bar = tqdm(tasks.items(), desc="transfer", unit=" tasks", file=progress_stream(), dynamic_ncols=True)
    for task_name, task in bar:
        bar.set_postfix_str(task_name)
        task_started = time.perf_counter()
        with reporting(lambda text, name=task_name: bar.set_postfix_str(f"{name}: {text}")):

            def scored(member, task=task) -> dict:
                return evaluate_task(
                    task,
                    member,
                    protocol,
                    config.batch_size,
                    config.pooling,
                    (config.selfattn_da, config.selfattn_r),
                    config.truncate_dim,
                )

            if isinstance(encoder, ensemble.Ensemble):
                result = ensemble.evaluate(encoder, scored)
            else:
                result = scored(encoder)
        items.pop(task_name, None)
        if "items" in result:  # per test item: what `just compare` resamples
            items[task_name] = result.pop("items")
            if seen is not None and task_name in seen:
                items[task_name].update(decontaminate.item_marks(task, seen[task_name]))
        results[task_name] = {**result, "seconds": round(time.perf_counter() - task_started, 1)}
        report["results"][task_name] = results[task_name]
        report["decontaminated"] = decontaminate.summaries(items) or None
        report["seconds"] = round(time.perf_counter() - started, 1)
        transfer_report.write(out, name, report, items)  # each result is kept as soon as it exists
        bar.clear()  # the line goes above the bar (stdout, with the table that follows; the bar is on stderr)
        print(
            f"  {task_name:<7} {transfer_report.headline(task_name, results[task_name]):>10}  "
            f"({results[task_name]['seconds']:.0f} s)",
            flush=True,
        )
        bar.refresh()
    bar.close()
    if encoder.coverage is not None:
        encoder.coverage.report()
    tracker.table(  # one row per task and metric: tasks report different metrics
        "transfer",
        ["task", "headline", "metric", "value"],
        [[t, transfer_report.headline(t, r), k, v] for t, r in results.items() for k, v in r.items()],
    )
    tracker.summary({f"transfer/{t}/{k}": v for t, r in results.items() for k, v in r.items()})
    if aggregate := micro_macro(report["results"]):  # InferSent's Figure 4 plots the micro one against dim
        tracker.summary({"transfer/micro": aggregate["micro"], "transfer/macro": aggregate["macro"]})
    tracker.finish()
    report["aggregate"] = micro_macro(report["results"])
    return report


def command(args: Sequence[str]) -> None:
    """`just transfer key=value ...`: the report's table, and where it was written."""
    config = apply_overrides(TransferConfig(), args)
    out, report = run(config)
    print(transfer_report.markdown(report))
    name = report_name(config)  # transfer-fast, transfer-senteval-mlp, ...: the report's own name
    print(f"written to {out / f'{name}.json'} and {out / f'{name}.md'}")
