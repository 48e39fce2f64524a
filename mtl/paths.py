"""Where data, caches and local overrides live (environment variables over defaults)."""

from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path | None:
    """`MTL_DATA_DIR`: a local folder holding `squad/`, `snli/`, `glove/`, `senteval/`."""
    value = os.environ.get("MTL_DATA_DIR")
    return Path(value).expanduser() if value else None


def cache_dir() -> Path:
    """`MTL_CACHE_DIR`, else `$XDG_CACHE_HOME/mtl`, else `~/.cache/mtl`."""
    if value := os.environ.get("MTL_CACHE_DIR"):
        return Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "mtl"
