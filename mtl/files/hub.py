"""Pretrained Hugging Face models and tokenizers, by Hub id or local folder, with a clear offline error."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from mtl.errors import UserError

Loaded = TypeVar("Loaded")


def looks_like_hub_id(source: str) -> bool:
    """`organization/name`, not a path: the shape of a Hub dataset or model id."""
    return source.count("/") == 1 and not source.startswith((".", "/", "~"))


def is_local(name: str) -> bool:
    return Path(name).expanduser().is_dir()


def resolve_model_source(name: str | None) -> str:
    """An absolute folder for a local model, else the Hub id as given."""
    if not name:
        raise UserError(
            "encoder=hf needs hf_model=: a Hub id (sentence-transformers/all-MiniLM-L6-v2) or a local folder"
        )
    if is_local(name):
        return str(Path(name).expanduser().resolve())
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise UserError(f"hf_model={name}: no such folder; pass a Hugging Face model folder or a Hub id")
    return name


def load_pretrained(loader: Callable[..., Loaded], name: str, what: str, **kwargs: Any) -> Loaded:
    """`loader(name)` (e.g. `AutoModel.from_pretrained`), or a one-line UserError that says what to pass."""
    name = resolve_model_source(name)
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}
    if not is_local(name) and offline and not _cached(name):
        raise _not_available(name, "HF_HUB_OFFLINE is set")
    try:
        return loader(name, **kwargs)
    except (OSError, ValueError) as error:  # ValueError: a config.json that names no model type
        if is_local(name):
            raise UserError(
                f"hf_model={name} holds no usable {what} ({str(error).splitlines()[0]}): pass a folder "
                "written by save_pretrained"
            ) from None
        if isinstance(error, ValueError):
            raise UserError(f"hf_model={name}: {str(error).splitlines()[0]}") from None
        raise _not_available(name, "the Hub could not be reached") from None


def _cached(name: str) -> bool:
    from huggingface_hub import try_to_load_from_cache  # only when a Hub id is asked for

    return isinstance(try_to_load_from_cache(name, "config.json"), str)


def _not_available(name: str, why: str) -> UserError:
    return UserError(
        f"hf_model={name} is not in the local Hugging Face cache and {why}: pass a local model folder, "
        "e.g. hf_model=../shared/data/models/all-MiniLM-L6-v2"
    )
