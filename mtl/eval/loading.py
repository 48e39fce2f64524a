"""Loading an encoder: `load_encoder(path)` from a run folder, an exported encoder or a checkpoint,
any of them checked against the architecture its config builds before a weight is loaded, and
the baselines (`baseline_encoder`: GloVe bag of words, an untrained BiLSTM-max).

Nothing in an encoder file is unpickled (JSON and safetensors, or `torch.load(weights_only=True)`).
"""

from __future__ import annotations

from pathlib import Path

import torch

from mtl import plugins
from mtl.errors import UserError
from mtl.eval.encoder import SentenceEncoder, pretrained_encoder
from mtl.eval.encoder_state import checked_vocabulary, conformed, embedding_weight
from mtl.eval.vocab_expansion import ExpansionMap
from mtl.formats import encoder_file as exported
from mtl.formats.checkpoint import load
from mtl.models.encoders import traits
from mtl.models.encoders.base import (
    Encoder,
    EncoderConfig,
    build_encoder,
    frozen_embedding,
)
from mtl.models.encoders.concat import ConcatEncoder
from mtl.models.encoders.config import HFOptions
from mtl.models.memory import check_fits
from mtl.runs import RunFolder, upgraded
from mtl.runtime.device import resolve_device
from mtl.text.tokenizer import make_tokenizer
from mtl.text.vectors import load_vectors
from mtl.text.vocab import Vocabulary


def encoder_file(path: str | Path) -> Path:
    """The file `load_encoder` reads for `path`: a run folder's encoder.json (older runs: encoder.pt;
    an unfinished run: its best checkpoint), or `path` itself."""
    path = Path(path).expanduser()
    if not path.exists():
        raise UserError(f"{path} does not exist: {NOT_AN_ENCODER}")
    if (path / "modules.json").is_file() and RunFolder(path.parent).encoder.is_file():
        # the sentence-transformers folder mtl exports inside a run (or export) folder: the same
        # weights as the encoder.json beside it, which mtl reads with its own tokenizer
        path = path.parent
    run = RunFolder(path)
    file = path
    if path.is_dir():
        file = next((f for f in (run.encoder, run.legacy_encoder, run.best) if f.is_file()), run.encoder)
    if not file.is_file():
        if (path / "modules.json").is_file():
            raise UserError(
                f"{path} is a sentence-transformers folder mtl did not write: load it with "
                f"SentenceTransformer({str(path)!r}), or score it with `just transfer baseline=hf hf_model={path}`"
            )
        unfinished = run.record.is_file()  # a run folder that has not exported or checkpointed yet
        raise UserError(
            f"{path} holds no encoder (encoder.json or checkpoints/best.pt): "
            + (f"finish it with `just train-multitask resume={path}`" if unfinished else NOT_AN_ENCODER)
        )
    return file


def encoder_files(path: str | Path) -> list[Path]:
    """Every file of the encoder `load_encoder(path)` reads (encoder.json and its weights)."""
    file = encoder_file(path)
    return exported.files_of(file) if file.suffix == ".json" else [file]


def read_encoder_file(file: Path) -> dict:
    """What an encoder file (encoder.json with its weights, encoder.pt, a checkpoint) holds."""
    saved = exported.read(file) if file.suffix == ".json" else load(file, "cpu")
    # the encoder's own config, or (written before it was recorded) its training run's
    config = "encoder_config" if "encoder_config" in saved else "config"
    if missing := [key for key in (config, "vocabulary") if key not in saved]:
        raise UserError(
            f"{file} holds no {' and no '.join(missing)}: it is not an encoder or checkpoint written by mtl"
        )
    return saved


def load_encoder(path: str | Path, device: str = "auto", vocab_expansion: bool = False) -> SentenceEncoder:
    """From a run folder (its encoder.json), an exported encoder (encoder.json, or an older run's
    encoder.pt) or a checkpoint (best.pt, latest.pt). Nothing in them is unpickled.

    `vocab_expansion`: words training never saw enter through Skip-Thought's linear map into the
    trained word space (runs with embeddings=trainable or both); an encoder exported with
    vocab_expansion=true always does, with the map it recorded."""
    file = encoder_file(path)
    return encoder_of(read_encoder_file(file), file, path, device, vocab_expansion)


def encoder_of(
    saved: dict, file: Path, path: str | Path, device: str = "auto", vocab_expansion: bool = False
) -> SentenceEncoder:
    """The encoder `saved` holds: what `read_encoder_file` read from `file`, the encoder file of
    `path` (as `load_encoder`, for a caller that reads the file's metadata too)."""
    plugins.require(saved.get("plugins"), f"encoder {file}")  # before its config names what they register
    config, prompts = own_config(saved, file)
    given = Path(path).expanduser()
    # the run's name, also when given its sentence-transformers folder (runs/<run>/encoder)
    name = (
        given.parent.name
        if (given / "modules.json").is_file() and file.parent == given.parent
        else given.name
    )
    if traits(config.model.encoder).pretrained:
        config.model.options.compile = False  # compiling is for training; encode() runs the model as it is
        if "pretrained" in saved:  # the export names the fine-tuned model's Hugging Face folder
            folder = saved["pretrained"]
            if not isinstance(folder, str) or Path(folder).name != folder or folder in ("", ".", ".."):
                raise UserError(f"{file} names {folder!r} as its model folder: expected a folder beside it")
            config.model.options.hf_model = str(file.parent / folder)
            config.model.options.lora_r, config.model.options.lora_targets = (
                0,
                "",
            )  # its weights hold the adapters merged
            encoder = pretrained_encoder(config.model, device, name)
        else:
            encoder = pretrained_encoder(config.model, device, name, _encoder_state(saved, file))
        encoder.prompts = prompts  # encode(prompt_name=<task>) embeds as that task trained
        if vocab_expansion:
            encoder.fit_vocab_expansion()  # refused, in one line: subwords leave no word new
        return encoder
    # Everything is checked against the architecture the config builds before a weight is loaded.
    state = _encoder_state(saved, file)
    weight = embedding_weight(state, file)
    words = checked_vocabulary(saved["vocabulary"], weight.shape[0], file)
    state = conformed(state, config.model, weight.shape, file)
    embedding = frozen_embedding(state["embedding.weight"])
    encoder = build_encoder(embedding, config.model)
    encoder.load_state_dict(state)
    if parts := _part_states(saved, file):
        encoders = [encoder]
        for part, part_state in parts.items():
            # trained word vectors of its own, else the frozen ones it shares with the first encoder
            own = "embedding.weight" in part_state
            part_state = conformed(
                part_state, config.model, weight.shape, file, f"its part {part}", with_embedding=own
            )
            vectors = frozen_embedding(part_state["embedding.weight"]) if own else embedding
            encoders.append(build_encoder(vectors, config.model))
            encoders[-1].load_state_dict({**part_state, "embedding.weight": vectors.weight})
        encoder = ConcatEncoder(encoders)
    loaded = SentenceEncoder(
        encoder,
        Vocabulary(words),
        make_tokenizer(config.data.tokenizer, config.data.lowercase),  # as the encoder was trained
        _vectors_path(saved, file),
        resolve_device(device),
        name=name,
        max_tokens=config.data.max_tokens,
    )
    loaded.word_embeddings = config.model.embeddings
    if isinstance(recorded := saved.get("vocab_expansion"), dict):  # exported with its map
        words_fitted = recorded.get("words")
        loaded.expansion = ExpansionMap.from_tensors(
            saved.get("expansion", {}), words_fitted if isinstance(words_fitted, int) else 0, str(file)
        )
    elif vocab_expansion:
        loaded.fit_vocab_expansion()
    return loaded


def is_mtl_encoder(source: str) -> bool:
    """A run folder, an exported encoder folder or an encoder/checkpoint file, rather than a
    Hugging Face model (a folder with its own config.json and weights, or a Hub id)."""
    path = Path(source).expanduser()
    if path.is_file():
        return True
    run = RunFolder(path)
    return path.is_dir() and any(f.is_file() for f in (run.encoder, run.legacy_encoder, run.best))


def load_any_encoder(source: str, max_seq_length: int = 128, device: str = "auto") -> SentenceEncoder:
    """An mtl encoder (`load_encoder`) or a Hugging Face model folder or Hub id as it comes (mean
    pooling, `max_seq_length` subword tokens): what a teacher or a miner of negatives may be."""
    if is_mtl_encoder(source):
        return load_encoder(source, device=device)
    model = EncoderConfig(encoder="hf", options=HFOptions(hf_model=source, max_seq_length=max_seq_length))
    return pretrained_encoder(model, device, Path(source.rstrip("/")).name)


def own_config(saved: dict, file: Path) -> tuple[exported.OwnConfig, dict[str, str]]:
    """The encoder's own config and each task's prompt: as an export or checkpoint records them,
    or, in one written before they did, out of the training run's whole config (in any earlier
    layout, through `runs.upgrade`) without reading the rest of it."""
    if "encoder_config" in saved:
        own = exported.own_config(saved["encoder_config"], f"{file} encoder_config")
        return own, exported.checked_prompts(saved.get("prompts", {}), str(file))
    values = upgraded(saved["config"], str(file))
    own = exported.own_config({k: values[k] for k in ("model", "data") if k in values}, str(file))
    tasks = values.get("tasks") if isinstance(values.get("tasks"), dict) else {}
    prompts = {
        name: task["prompt"]
        for name, task in tasks.items()
        if isinstance(task, dict) and isinstance(task.get("prompt"), str) and task["prompt"]
    }
    return own, prompts


def _vectors_path(saved: dict, file: Path) -> str | None:
    """The vectors file the encoder was trained with (new words take their vectors from it)."""
    vectors = saved.get("vectors")
    if vectors is not None and not isinstance(vectors, str):
        raise UserError(
            f"{file}: its vectors entry is a {type(vectors).__name__}, not a path: {NOT_AN_ENCODER}"
        )
    return vectors


def _part_states(saved: dict, file: Path) -> dict[str, dict[str, torch.Tensor]]:
    """The weights of the encoders a task adds to the sentence embedding (Quick-Thoughts' g), by
    their path in the model: an exported encoder holds them, a checkpoint names them."""
    if "parts" in saved:
        return saved["parts"]
    model = saved.get("model", {})
    paths = saved.get("embedding_parts", [])
    if not isinstance(paths, list) or not all(isinstance(path, str) for path in paths):
        raise UserError(f"{file}: its embedding_parts is not a list of names: {NOT_AN_ENCODER}")
    shared = model.get("encoder.embedding.weight")

    def own_vectors(value: object) -> bool:  # trained, so unlike the shared frozen ones
        return not isinstance(value, torch.Tensor) or not (
            isinstance(shared, torch.Tensor) and value.shape == shared.shape and torch.equal(value, shared)
        )

    return {
        path: {
            key.removeprefix(f"{path}."): value
            for key, value in model.items()
            if key.startswith(f"{path}.") and (key != f"{path}.embedding.weight" or own_vectors(value))
        }
        for path in paths
    }


def _encoder_state(saved: dict, file: Path) -> dict[str, torch.Tensor]:
    """The encoder's weights out of an exported encoder or a training checkpoint."""
    if saved.get("encoder"):
        return saved["encoder"]
    model = saved.get("model")
    if not isinstance(model, dict) or not model:
        raise UserError(f"{file} holds no encoder weights (no `encoder` or `model`): {NOT_AN_ENCODER}")
    return {
        k.removeprefix("encoder."): v
        for k, v in model.items()
        if isinstance(k, str) and k.startswith("encoder.")
    }


NOT_AN_ENCODER = "give a run folder, an encoder.json or a checkpoint (best.pt, latest.pt) that mtl wrote"


def baseline_encoder(
    name: str,
    vectors: str,
    hidden: int = 2048,
    seed: int = 1234,
    device: str = "auto",
    tokenizer: str = "spacy",
) -> SentenceEncoder:
    """`glove-bow` (average of GloVe vectors) or `random-bilstm` (untrained BiLSTM-max, 000_ Table 4);
    `tokenizer`: spacy, or whitespace (SentEval's own tokens, as its bag-of-words example reads)."""
    dim = load_vectors(vectors, ["the"]).dim
    torch.manual_seed(seed)
    embedding = frozen_embedding(torch.zeros(2, dim))
    if name == "glove-bow":
        encoder: Encoder = build_encoder(embedding, EncoderConfig(encoder="bow"))  # mean of known words
    elif name == "random-bilstm":
        config = EncoderConfig(encoder="bilstm", hidden=hidden, pooling="max")
        check_fits(
            lambda: build_encoder(frozen_embedding(torch.empty(2, dim)), config),
            resolve_device(device),
            f"random_hidden={hidden}",
        )
        encoder = build_encoder(embedding, config)
    else:
        raise UserError(f"unknown baseline {name!r}: choose one of glove-bow, random-bilstm")
    return SentenceEncoder(
        encoder,
        Vocabulary([]),
        make_tokenizer(tokenizer, lowercase=True),
        vectors,
        resolve_device(device),
        name,
    )
