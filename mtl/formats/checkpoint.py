"""Checkpoints that are written atomically and verified when read.

Each file carries a SHA-256 of its contents (tensors byte for byte, everything else by
value) under `checksum`, so flipped bytes are detected instead of resumed from. The file
stays a plain `torch.save` dict: `torch.load(path)["model"]` still works without mtl.

Files are read with `weights_only=True`: tensors, dicts, lists, strings and numbers, which
is all mtl has ever written. Encoders and run folders are shared between researchers, and a
full unpickler runs whatever code a crafted file names, so such a file is refused instead.
"""

from __future__ import annotations

import hashlib
import os
import re
import warnings
from pathlib import Path
from typing import Any

import torch

from mtl.errors import UserError
from mtl.files.atomic import atomic_path, failed_write, fsync_dir

CHECKSUM = "checksum"


def save(state: dict[str, Any], path: Path, keep_previous: bool = False) -> None:
    """Write `state` to `path`; with `keep_previous` the file it replaces stays as `previous-<name>`."""
    path = Path(path)
    state = on_cpu(state)  # a GPU run's file loads on any machine, with or without map_location
    state = {**state, CHECKSUM: digest(state)}
    with atomic_path(path, "checkpoint") as partial:
        try:
            torch.save(state, partial)
        except RuntimeError as error:  # torch's zip writer says "disk full" as a RuntimeError
            raise failed_write(partial, error) from None
        if keep_previous and path.exists():
            os.replace(path, previous_of(path))
            fsync_dir(path.parent)


def on_cpu(value: Any) -> Any:
    """`value` with every tensor in it (nested in dicts, lists, tuples) copied to the CPU."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {key: on_cpu(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(on_cpu(item) for item in value)
    return value


def previous_of(path: Path) -> Path:
    return path.with_name(f"previous-{path.name}")


def load(path: Path, device: torch.device | str = "cpu") -> dict[str, Any]:
    """The state saved at `path`; a damaged file is a `DamagedCheckpoint` (a one-line UserError)."""
    path = Path(path)
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except FileNotFoundError:
        raise DamagedCheckpoint(f"checkpoint {path} does not exist") from None
    except Exception as error:  # truncated zip, bad pickle, empty file, not a checkpoint at all
        if _named_global(error) or "GLOBAL" in str(error):
            raise UnsafeCheckpoint(
                f"{path} holds Python objects that loading would execute{_named_global(error)}, not only "
                "tensors and plain values: mtl never writes such files and will not load it; use an encoder "
                "or run folder from a source you trust"
            ) from None
        if not _starts_like_torch_save(path):
            raise NotACheckpoint(
                f"{path} is not an encoder or run folder (nor a checkpoint: torch.save did not write it): "
                "give a run folder, its encoder.json, or checkpoints/best.pt"
            ) from None
        raise DamagedCheckpoint(
            f"checkpoint {path} is damaged (truncated or corrupted: {_reason(error)})"
        ) from None
    if not isinstance(state, dict):
        raise DamagedCheckpoint(
            f"checkpoint {path} is not an mtl checkpoint (it holds a {type(state).__name__})"
        )
    expected = state.pop(CHECKSUM, None)
    if expected is not None and digest(state) != expected:
        raise DamagedCheckpoint(f"checkpoint {path} is damaged (its checksum does not match its contents)")
    return state


def load_with_fallback(path: Path, device: torch.device | str = "cpu") -> tuple[dict[str, Any], Path]:
    """`path`, or the checkpoint it replaced when `path` is damaged or missing."""
    try:
        return load(path, device), path
    except DamagedCheckpoint as error:
        previous = previous_of(path)
        if not previous.is_file():
            raise
        warnings.warn(f"{error}; using the one before it, {previous}", stacklevel=2)
        return load(previous, device), previous


def digest(value: Any) -> str:
    hasher = hashlib.sha256()
    _feed(hasher, value)
    return hasher.hexdigest()


def _feed(hasher: Any, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu().contiguous()
        hasher.update(f"T{tensor.dtype}{tuple(tensor.shape)}".encode())
        hasher.update(tensor.reshape(-1).view(torch.uint8).numpy())
    elif isinstance(value, dict):
        hasher.update(b"{")
        for key, item in value.items():
            _feed(hasher, key)
            _feed(hasher, item)
        hasher.update(b"}")
    elif isinstance(value, list | tuple):
        hasher.update(b"[")
        for item in value:
            _feed(hasher, item)
        hasher.update(b"]")
    else:
        hasher.update(f"{type(value).__name__}:{value!r};".encode())


def _starts_like_torch_save(path: Path) -> bool:
    """Whether `path` is empty (a write cut short) or begins as torch.save's files do: a zip archive
    (torch >= 1.6) or a pickle (older torch)."""
    try:
        with open(path, "rb") as handle:
            start = handle.read(4)
    except OSError:
        return True
    return not start or start.startswith((b"PK\x03\x04", b"\x80"))


def _named_global(error: Exception) -> str:
    """` (posix.system)`: the callable a refused file asked for, when torch names it."""
    found = re.search(r"GLOBAL ([\w.]+)", str(error))
    return f" ({found.group(1)})" if found else ""


def _reason(error: Exception) -> str:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return text[:160]


class DamagedCheckpoint(UserError):
    pass


class NotACheckpoint(DamagedCheckpoint):
    """A file of some other kind (text, JSON lines): no checkpoint was ever written there."""


class UnsafeCheckpoint(UserError):
    """A file that needs a full unpickler: never loaded, and never taken for a damaged one to skip."""
