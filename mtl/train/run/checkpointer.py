"""A run's checkpoints: `latest.pt` to resume from, `best.pt` by dev accuracy, the exported encoder.

Only rank 0 reads and writes the files; the other ranks get what it read, so a run on
several machines needs its folder on rank 0's machine only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch import nn

from mtl import metrics, plugins
from mtl.config import to_dict
from mtl.errors import UserError
from mtl.files import atomic
from mtl.formats import checkpoint, encoder_file
from mtl.formats.encoder_file import pruned_state
from mtl.models.card import CardFacts, facts_of
from mtl.models.encoders import traits
from mtl.models.encoders.embedding import part_state
from mtl.models.encoders.hf import save_sentence_transformer
from mtl.models.sentence_transformers import unsupported, write_sentence_transformer
from mtl.runs import RunFolder
from mtl.runtime.distributed import Distributed
from mtl.tracking.tracker import Tracker
from mtl.train.config.train_config import TrainConfig
from mtl.train.data.shared_words import trained_rows
from mtl.train.data.training_data import TrainingData


class Checkpointer:
    def __init__(self, run_dir: Path, metadata: dict[str, Any], dist: Distributed, to_wandb: str = "best"):
        """`metadata`: what every checkpoint carries so it can be used alone (config, vocabulary).

        `to_wandb`: which checkpoints become versions of the run's `model` artifact: `none`,
        `best` (each new best, alias `best`), or `all` (every checkpoint too).
        """
        self.run_dir, self.metadata, self.dist, self.to_wandb = Path(run_dir), metadata, dist, to_wandb
        self.files = RunFolder(self.run_dir)
        self.tracker = Tracker(None)
        self.artifact_base = self.run_dir.name  # `attach` makes it the run's own
        self.artifact_metadata: dict[str, Any] = {}
        self.latest_step: int | None = None  # global step of latest.pt, once there is one

    def attach(self, tracker: Tracker, wandb_id: str, parameter_counts: dict[str, int]) -> None:
        """Log versions to `tracker`'s run. Artifact names carry the W&B run id: run folders of one
        name (every sweep's `steps_nli250` member) must not write into one collection."""
        self.tracker, self.artifact_base = tracker, f"{self.run_dir.name}-{wandb_id}"
        self.artifact_metadata = {"config": self.metadata["config"], **parameter_counts}

    def save_latest(self, contents: dict[str, Any], step: int) -> None:
        if self.dist.is_main:
            checkpoint.save({**contents, **self.metadata}, self.files.latest, keep_previous=True)
            if self.to_wandb == "all":
                self.tracker.log_artifact(
                    self.model_artifact,
                    "model",
                    self.files.latest,
                    metadata={"global_step": step, **self.artifact_metadata},
                    aliases=[f"step-{step}"],
                )
        self.latest_step = step

    def save_best(self, model_state: dict[str, Any], best: dict[str, float]) -> None:
        if not self.dist.is_main:
            return
        checkpoint.save({"model": model_state, "best": best, **self.metadata}, self.files.best)
        self.log_best(best)

    def save_evaluated(
        self, model_state: dict[str, Any], step: int, dev: dict[str, float], keep: int
    ) -> None:
        """checkpoints/evaluated-step-<step>.pt (keep_evaluated=), and of those up to `step` only the
        last `keep`; later ones (a resumed run's, written before its kill) are written again as it
        comes to them, the same."""
        if not self.dist.is_main:
            return
        checkpoint.save(
            {"model": model_state, "step": step, "dev": dev, **self.metadata}, self.files.evaluated(step)
        )
        reached = [p for p in self.files.evaluated_checkpoints() if int(p.stem.rpartition("-")[2]) <= step]
        for old in reached[:-keep]:
            old.unlink(missing_ok=True)

    def log_best(self, best: dict[str, float]) -> None:
        """best.pt as a version of the model artifact (aliases `best`, `step-N`). Logged again after
        a resume, as a kill may have lost the upload: W&B keeps one version per content digest."""
        if self.to_wandb != "none" and self.dist.is_main and self.files.best.is_file():
            self.tracker.log_artifact(
                self.model_artifact,
                "model",
                self.files.best,
                metadata={"global_step": best["step"], **best, **self.artifact_metadata},
                aliases=["best", f"step-{best['step']}"],
            )

    @property
    def model_artifact(self) -> str:
        return f"{self.artifact_base}-model"

    @property
    def encoder_artifact(self) -> str:
        return f"{self.artifact_base}-encoder"

    def load_latest(self) -> dict[str, Any]:
        """latest.pt (or the one before it, when it is damaged), checked against this run's vocabulary."""
        saved = self.dist.main_first(
            lambda: checkpoint.load_with_fallback(self.files.latest)[0], others_too=False
        )
        if saved["vocabulary"] != self.metadata["vocabulary"]:
            raise UserError(
                f"the vocabulary built from the inputs of {self.run_dir} differs from the one it was "
                "trained with: resume needs the same task data and vectors; start a new run instead"
            )
        self.latest_step = saved["state"]["global_step"]
        return saved

    @property
    def artifact_names(self) -> dict[str, str]:
        """The W&B artifacts of the run's model checkpoints and its encoder."""
        return {"model": self.model_artifact, "encoder": self.encoder_artifact}

    def load_best(self) -> dict[str, Any]:
        return self.dist.main_first(lambda: checkpoint.load(self.files.best), others_too=False)

    def export_encoder(
        self,
        encoder_state: dict[str, Any],
        path: Path,
        results: dict[str, Any],
        pretrained: Callable[[Path], None] | None = None,
        parts: dict[str, dict[str, Any]] | None = None,
        portable: Callable[[Path], None] | None = None,
        vocabulary: list[str] | None = None,
    ) -> None:
        """What `load_encoder` needs: config, vocabulary and encoder weights (embeddings included),
        as `encoder.json` (`path`) and `encoder.safetensors` (`mtl.formats.encoder_file`).

        `pretrained` (encoder=hf) writes the weights in Hugging Face format into the run's
        `encoder/` folder, which `path` then names instead of holding them. `parts`: the weights of encoders
        a task adds to the sentence embedding (`Task.embedding_parts`), by their path in the model.
        `portable`: the writer of the same folder in sentence-transformers format for an encoder
        whose weights `path` holds (`mtl.models.sentence_transformers`). `vocabulary`: the words the encoder's embedding
        rows are, when not the whole training vocabulary (`mtl.train.data.shared_words`).
        """
        if not self.dist.is_main:
            return
        if pretrained is None:
            metadata = self.metadata if vocabulary is None else {**self.metadata, "vocabulary": vocabulary}
            files = encoder_file.write(path, metadata, encoder_state, parts or {})
            if portable is not None:  # in the artifact too, as an hf run's folder is
                atomic.write_folder(self.files.pretrained_encoder, portable, "sentence-transformers folder")
                files = [*files, self.files.pretrained_encoder]
        else:
            atomic.write_folder(self.files.pretrained_encoder, pretrained, "Hugging Face model folder")
            files = [
                self.files.pretrained_encoder,
                *encoder_file.write(path, self.metadata, {}, {}, "encoder"),
            ]
        self.tracker.log_artifact(
            self.encoder_artifact, "encoder", files, metadata={**results, **self.artifact_metadata}
        )


def encoder_metadata(config: TrainConfig, data: TrainingData) -> dict[str, Any]:
    """What every checkpoint carries so it can be used alone: the config, vocabulary and vectors."""
    return {
        "config": to_dict(config),
        # what loading needs, without the training schema (mtl.formats.encoder_file.OwnConfig)
        "encoder_config": {"model": to_dict(config.model), "data": to_dict(config.data)},
        "prompts": {name: task.prompt for name, task in config.tasks.items() if getattr(task, "prompt", "")},
        "vocabulary": data.vocabulary.words if data.vocabulary is not None else None,
        "vectors": str(data.vectors_path) if data.vectors_path is not None else None,
        "embedding_parts": embedding_parts(data),
        "plugins": plugins.records(),  # loading the encoder needs them given again (or installed)
    }


def embedding_parts(data: TrainingData) -> list[str]:
    """Where in the model the encoders are that the sentence embedding concatenates after the
    shared one (`Task.embedding_parts`): `heads.qt.output_encoder`."""
    return [f"heads.{name}.{part}" for name, task in data.tasks.items() for part in task.embedding_parts]


def pretrained_exporter(
    config: TrainConfig, data: TrainingData, encoder: nn.Module, card: CardFacts
) -> Callable[[Path], None] | None:
    """A pretrained encoder's writer of its fine-tuned model and tokenizer in Hugging Face format."""
    if not traits(config.model.encoder).pretrained or data.subwords is None:
        return None
    tokenizer, length = data.subwords.tokenizer, config.model.options.max_seq_length
    return lambda folder: save_sentence_transformer(encoder, tokenizer, folder, length, card)


def sentence_transformer_exporter(
    config: TrainConfig,
    data: TrainingData,
    encoder: nn.Module,
    card: CardFacts,
    words: list[str] | None = None,
) -> Callable[[Path], None] | str:
    """The writer of a GloVe encoder's sentence-transformers folder, or why it has none; `words`:
    the vocabulary words it keeps (None: all)."""
    if traits(config.model.encoder).pretrained or data.vocabulary is None:
        return "it is a pretrained model (its folder is the export)"
    if parts := embedding_parts(data):
        return f"its embedding concatenates encoders sentence-transformers cannot chain ({', '.join(parts)})"
    if reason := unsupported(encoder):
        return reason
    lowercase, vocabulary = config.data.lowercase, data.vocabulary
    rows = None if words is None else [vocabulary.index[word] for word in words]
    words = vocabulary.words if words is None else words
    limit = config.data.max_tokens
    return lambda folder: write_sentence_transformer(encoder, words, lowercase, folder, card, rows, limit)


def export_final_encoder(
    checkpointer: Checkpointer,
    config: TrainConfig,
    data: TrainingData,
    model: nn.Module,
    streams: dict[str, Any],
    results: dict[str, Any],
    contamination: dict[str, Any] | None = None,
) -> Callable[[Path], None] | str:
    """Export `model`'s encoder (the best checkpoint's, loaded) as the run's encoder.json, with
    only the words the run trained on or that have a public vector; return the writer of its
    sentence-transformers folder, or why it has none."""
    titles = {name: task.title for name, task in data.tasks.items()}
    scores = {**results, metrics.SCORED_ON: data.scored_on}
    card = facts_of(checkpointer.files.path.name, to_dict(config), scores, titles, contamination)
    exporter = pretrained_exporter(config, data, model.encoder, card)
    encoder_state, words = model.encoder.state_dict(), None
    if data.vocabulary is not None:
        rows = trained_rows(data, streams)
        encoder_state = pruned_state(encoder_state, rows, len(data.vocabulary))
        words = [data.vocabulary.words[i] for i in rows]
    portable = sentence_transformer_exporter(config, data, model.encoder, card, words)
    parts = {
        path: part_state(model.get_submodule(path), model.encoder.embedding) for path in embedding_parts(data)
    }
    if data.vocabulary is not None:
        parts = {path: pruned_state(state, rows, len(data.vocabulary)) for path, state in parts.items()}
    checkpointer.export_encoder(
        encoder_state,
        checkpointer.files.encoder,
        results,
        exporter,
        parts,
        None if isinstance(portable, str) else portable,
        words,
    )
    return portable
