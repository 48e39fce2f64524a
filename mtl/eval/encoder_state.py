"""An encoder file's contents checked against the architecture its config builds, before a single
weight is loaded.

A checksum says a file is the one that was written, not that what was written is sound: a
hand-edited or foreign file can match its own checksum and still hold a vocabulary shorter
than the embedding rows, tensors of other shapes, integer weights, or NaN. Loaded as they are,
these give tracebacks from inside `load_state_dict`, or worse, embeddings built from other
words' vectors. So the encoder the config describes is built on PyTorch's meta device
(shapes only: a config asking for a hidden size of ten million allocates nothing), and every
tensor of the file must be one of its tensors, of its shape, finite, in a dtype that converts
to the model's without changing a value.
"""

from __future__ import annotations

from pathlib import Path

import torch

from mtl.errors import UserError
from mtl.models.encoders.base import EncoderConfig, build_encoder, frozen_embedding
from mtl.text.vocab import PAD, UNK

EMBEDDING = "embedding.weight"


def checked_vocabulary(words: object, rows: int, file: Path) -> list[str]:
    """The vocabulary of `file`, which must name each of its `rows` embedding rows once, padding and
    the unknown word first (as `Vocabulary` numbers them)."""
    if not isinstance(words, list) or not all(isinstance(word, str) for word in words):
        raise UserError(f"{file}: its vocabulary is not a list of words: {_broken}")
    if words[:2] != [PAD, UNK]:
        raise UserError(f"{file}: its vocabulary does not start with {PAD} and {UNK}: {_broken}")
    if len(words) != rows:
        raise UserError(
            f"{file}: its vocabulary has {len(words):,} words for {rows:,} embedding rows, so words "
            f"would get other words' vectors: {_broken}"
        )
    if len(set(words)) != len(words):
        seen: set[str] = set()
        twice = next(word for word in words if word in seen or seen.add(word))
        raise UserError(
            f"{file}: its vocabulary lists {twice!r} twice, which shifts every later word: {_broken}"
        )
    return words


def embedding_weight(state: dict[str, object], file: Path) -> torch.Tensor:
    """The word-embedding matrix of an encoder's state: 2-D, of a floating dtype."""
    weight = state.get(EMBEDDING)
    if not isinstance(weight, torch.Tensor):
        raise UserError(f"{file} holds no {EMBEDDING} (the word vectors): {_broken}")
    if weight.dim() != 2 or 0 in weight.shape:
        raise UserError(f"{file}: {EMBEDDING} has shape {tuple(weight.shape)}, not (words, width): {_broken}")
    return weight


def conformed(
    state: dict[str, object],
    config: EncoderConfig,
    embedding_shape: torch.Size,
    file: Path,
    what: str = "the encoder",
    with_embedding: bool = True,
) -> dict[str, torch.Tensor]:
    """`state` as the encoder `config` builds over an embedding of `embedding_shape` expects it:
    the same tensor names and shapes, finite, in the model's dtypes (converted only where no
    value changes). Anything else is a one-line error naming `file` and the tensor."""
    expected = _expected_state(config, embedding_shape, file)
    if not with_embedding:
        expected.pop(EMBEDDING)
    if missing := sorted(set(expected) - set(state)):
        raise UserError(
            f"{file}: {what} lacks {_names(missing)}, which its config ({_settings(config)}) needs: {_broken}"
        )
    if extra := sorted(set(state) - set(expected)):
        raise UserError(
            f"{file}: {what} holds {_names(extra)}, which its config ({_settings(config)}) has no place for: "
            f"{_broken}"
        )
    checked = {}
    for name, model_tensor in expected.items():
        value = state[name]
        if not isinstance(value, torch.Tensor):
            raise UserError(f"{file}: {what}'s {name} is a {type(value).__name__}, not a tensor: {_broken}")
        if value.shape != model_tensor.shape:
            raise UserError(
                f"{file}: {what}'s {name} has shape {tuple(value.shape)} where its config "
                f"({_settings(config)}) builds {tuple(model_tensor.shape)}: {_broken}"
            )
        checked[name] = _in_dtype(value, model_tensor.dtype, f"{file}: {what}'s {name}")
    return checked


def _expected_state(
    config: EncoderConfig, embedding_shape: torch.Size, file: Path
) -> dict[str, torch.Tensor]:
    """The state dict (meta tensors: shapes and dtypes only) of the encoder `config` builds."""
    try:
        with torch.device("meta"):
            encoder = build_encoder(frozen_embedding(torch.empty(embedding_shape)), config)
    except (ValueError, RuntimeError, TypeError, AssertionError) as error:
        raise UserError(f"{file}: its config builds no encoder ({error}): {_broken}") from None
    return encoder.state_dict()


def _in_dtype(value: torch.Tensor, dtype: torch.dtype, where: str) -> torch.Tensor:
    if value.dtype != dtype:
        if not (value.dtype.is_floating_point and dtype.is_floating_point):
            raise UserError(f"{where} holds {value.dtype} values where the model has {dtype}: {_broken}")
        converted = value.to(dtype)
        finite = torch.isfinite(value)
        if not torch.equal(converted[finite].to(value.dtype), value[finite]):
            raise UserError(f"{where} holds {value.dtype} values that {dtype} cannot hold exactly: {_broken}")
        value = converted
    if value.dtype.is_floating_point and not bool(torch.isfinite(value).all()):
        bad = int((~torch.isfinite(value)).sum())
        raise UserError(
            f"{where} holds {bad:,} NaN or infinite values (a diverged run or an edited file): "
            "load an earlier checkpoint of the run instead"
        )
    return value


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:4])
    return shown + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _settings(config: EncoderConfig) -> str:
    return f"encoder={config.encoder} hidden={config.hidden} pooling={config.pooling}"


_broken = "it is not an encoder mtl wrote (export it again, or load the run's checkpoints/best.pt)"
