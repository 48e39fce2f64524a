"""Transfer curves during training (`monitor=STS14,SICK-R,TREC`): at every dev evaluation each
named transfer task is scored on the encoder as it is, in fast mode (SentEval's prototyping
settings), on a fixed subsample of at most `monitor_examples` examples per split (a seeded draw,
the same at every evaluation), and logged as `monitor/<task>/<metric>` (STS14's all/spearman:
`monitor/STS14/spearman`), which select= may name.

The scoring runs on a copy of the shared encoder refreshed from the live one before each use:
vocabulary expansion (new words of the transfer data take their vectors from the run's
vectors file, as `just transfer` does) grows the copy's embedding, never the model being
trained. Rank 0 scores; every rank gets its values.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch

from mtl import metrics
from mtl.config import comma_list
from mtl.errors import UserError
from mtl.eval.encoder import PretrainedSentenceEncoder, SentenceEncoder
from mtl.eval.transfer.classifiers import Protocol
from mtl.eval.transfer.suite import evaluate_task
from mtl.files.paths import data_dir
from mtl.models.encoders import traits
from mtl.models.encoders.base import build_encoder, frozen_embedding
from mtl.models.heads import MultitaskModel
from mtl.runtime.distributed import Distributed
from mtl.text.tokenizer import make_tokenizer
from mtl.text.vocab import Vocabulary
from mtl.train.callbacks.base import Callback
from mtl.train.config.train_config import TrainConfig
from mtl.train.data.training_data import TrainingData
from mtl.train.run.sharding import whole_state
from mtl.train.run.training_run import TrainingRun
from mtl.transfer_tasks.registry import headline_metrics, spec
from mtl.transfer_tasks.tasks import Split, TransferDataError, TransferTask, read_task

SEED_OFFSET = 15_485_863  # the subsample's draw: apart from the run's other generators


def monitor_names(text: str) -> list[str]:
    return comma_list(text)


def monitor_key(task: str, metric: str) -> str:
    """`monitor/STS14/spearman` for STS14's all/spearman, `monitor/TREC/acc`."""
    return metrics.monitored(task, metric.removeprefix("all/"))


class Monitor(Callback):
    """monitor=: its tasks' scores join every dev evaluation (a callback on every rank: rank 0
    scores, the others receive its values)."""

    every_rank = True

    def __init__(
        self,
        config: TrainConfig,
        data: TrainingData,
        model: MultitaskModel,
        device: torch.device,
        dist: Distributed,
    ):
        self.config, self.data, self.model, self.device, self.dist = config, data, model, device, dist
        self.names = monitor_names(config.run.monitor)
        self.protocol = dataclasses.replace(Protocol.fast(), jobs=1)  # no worker processes inside training
        self.tasks: dict[str, TransferTask] = {}
        self.encoder: SentenceEncoder | None = None
        if dist.is_main:
            folder = monitor_folder(config.run.monitor_data, config.run.monitor)
            for name in self.names:
                try:
                    task = read_task(name, folder)
                except TransferDataError as error:  # said with the key this command takes
                    raise error.naming("monitor_data") from None
                self.tasks[name] = subsample(task, config.run.monitor_examples, config.run.seed)

    def evaluation_keys(self) -> list[str]:
        """Every key `scores` logs (what select= may name)."""
        return [monitor_key(name, metric) for name in self.names for metric in spec(name).metrics]

    def on_evaluate(self, run: TrainingRun) -> dict[str, float]:
        return self.scores()

    def scores(self) -> dict[str, float]:
        """Every monitored task's headline metrics now, as `monitor/<task>/<metric>`, on every rank."""
        results: dict[str, float] = {}
        weights = whole_state(self.model.encoder)  # (strategy=fsdp: each rank gives its shards)
        if self.dist.is_main:
            encoder = self._refreshed(weights)
            was_training = self.model.training
            try:
                for name, task in self.tasks.items():
                    result = evaluate_task(task, encoder, self.protocol, self.config.run.eval_batch, None)
                    for metric in headline_metrics(name, result):
                        results[monitor_key(name, metric)] = float(result[metric])
            finally:
                self.model.train(was_training)
        return self.dist.broadcast(results)

    def _refreshed(self, weights: dict[str, torch.Tensor]) -> SentenceEncoder:
        """The scoring copy of the shared encoder, with the live one's current `weights`."""
        live = self.model.encoder
        if self.encoder is None:
            model_config = self.config.model
            if traits(model_config.encoder).subwords:
                copy = build_encoder(None, model_config)
                self.encoder = PretrainedSentenceEncoder(copy, self.data.subwords, self.device, "monitor")
            else:
                embedding = frozen_embedding(live.embedding.weight.detach().clone())
                copy = build_encoder(embedding, model_config)
                self.encoder = SentenceEncoder(
                    copy,
                    Vocabulary(list(self.data.vocabulary.words)),
                    make_tokenizer(self.config.data.tokenizer, self.config.data.lowercase),
                    str(self.data.vectors_path) if self.data.vectors_path else None,
                    self.device,
                    "monitor",
                    max_tokens=self.config.data.max_tokens,
                )
        # Every weight but the word embedding, which the copy may have grown by words with a
        # vector; trained word vectors (embeddings=trainable|both) are its first rows.
        current = {k: v for k, v in weights.items() if k != "embedding.weight"}
        missing = self.encoder.encoder.load_state_dict(current, strict=False).missing_keys
        assert set(missing) <= {"embedding.weight"}, missing
        if live.embedding is not None and any(p.requires_grad for p in live.embedding.parameters()):
            with torch.no_grad():
                trained = live.embedding.weight
                self.encoder.encoder.embedding.weight[: len(trained)] = trained
        self.encoder.encoder.eval()
        return self.encoder


def monitor_folder(given: str | None, monitor: str) -> Path:
    """SentEval's downstream folder: monitor_data=, else $MTL_DATA_DIR/senteval/downstream."""
    if given:
        return Path(given).expanduser()
    if (root := data_dir()) is None:
        raise UserError(
            f"monitor={monitor} reads SentEval's transfer data: give monitor_data=PATH (its downstream "
            "folder) or set MTL_DATA_DIR"
        )
    return root / "senteval" / "downstream"


def subsample(task: TransferTask, most: int, seed: int) -> TransferTask:
    """`task` with at most `most` examples per split, drawn by (seed, split) in their order."""
    splits = {}
    for index, (name, split) in enumerate(task.splits.items()):
        if len(split) <= most:
            splits[name] = split
            continue
        chosen = np.sort(
            np.random.default_rng([seed, SEED_OFFSET, index]).choice(len(split), most, replace=False)
        )
        splits[name] = Split(
            [[column[i] for i in chosen] for column in split.sentences], [split.labels[i] for i in chosen]
        )
    return dataclasses.replace(task, splits=splits)
