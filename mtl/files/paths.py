"""Where data, caches and local overrides live (environment variables over defaults)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from mtl.errors import UserError


def data_dir() -> Path | None:
    """`MTL_DATA_DIR`: a local folder holding `squad/`, `snli/`, `glove/`, `senteval/`.

    Set but missing is an error, not "unset": a typo would otherwise start the downloads
    (2 GB of GloVe) that the variable exists to avoid.
    """
    value = os.environ.get("MTL_DATA_DIR")
    if not value:
        return None
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise UserError(
            f"MTL_DATA_DIR={value} is not a folder: point it at the local data (squad/, snli/, glove/, "
            "senteval/), or unset it to download"
        )
    return folder


def cache_dir() -> Path:
    """`MTL_CACHE_DIR`, else `$XDG_CACHE_HOME/mtl`, else `~/.cache/mtl`."""
    if value := os.environ.get("MTL_CACHE_DIR"):
        return Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "mtl"


def resolved(path: str | Path, key: str) -> Path:
    """`path` absolute, its symlinks followed; a symlink loop is a one-line error naming `key`."""
    path = Path(path).expanduser()
    try:
        return path.resolve()
    except (RuntimeError, OSError) as error:  # Python < 3.13 raises RuntimeError for a loop
        reason = (
            "a symlink loop"
            if isinstance(error, RuntimeError) or error.errno == errno.ELOOP
            else error.strerror
        )
        raise UserError(
            f"{key}={path} cannot be followed ({reason}): fix the link or choose another {key}="
        ) from None
