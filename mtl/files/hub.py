"""Pretrained Hugging Face models and tokenizers, by Hub id or local folder, with a clear offline error."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from mtl.errors import UserError

Loaded = TypeVar("Loaded")


@contextlib.contextmanager
def offline_unless_reachable(timeout: float = 3.0) -> Iterator[bool]:
    """Within the block: whether the Hub is out of reach, checked once by opening a connection to
    it; when it is, huggingface_hub and datasets are in their offline mode (as HF_HUB_OFFLINE=1
    makes them), so what they need comes from the local cache at once, or fails in one line,
    instead of after minutes of retries. Their settings are restored after the block."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}:
        yield True
        return
    endpoint = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((endpoint.hostname, port), timeout=timeout).close()
    except OSError:
        pass
    else:
        yield False
        return
    # read at their import: each module's own setting is switched too
    modules = [
        sys.modules[name] for name in ("huggingface_hub.constants", "datasets.config") if name in sys.modules
    ]
    saved, saved_environ = [module.HF_HUB_OFFLINE for module in modules], os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    for module in modules:
        module.HF_HUB_OFFLINE = True
    try:
        yield True
    finally:
        if saved_environ is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:  # a setting that did not mean offline ("0"): as it was
            os.environ["HF_HUB_OFFLINE"] = saved_environ
        for module, value in zip(modules, saved, strict=True):
            module.HF_HUB_OFFLINE = value


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
    if kwargs.get("use_safetensors") and is_local(name):
        folder = Path(name).expanduser()
        pickled = sorted(p.name for p in folder.glob("*.bin")) + sorted(p.name for p in folder.glob("*.pt*"))
        if pickled and not any(folder.glob("*.safetensors")):
            raise UserError(
                f"hf_model={name} holds its weights as a pickle ({pickled[0]}), which mtl never loads (loading a "
                "pickle can run code): convert it to safetensors (save_pretrained(..., safe_serialization=True))"
            )
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
