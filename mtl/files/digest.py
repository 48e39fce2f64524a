"""Content digests of files: what records name to catch a damaged or swapped file."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 4 MiB chunks."""
    hasher = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 22):
            hasher.update(chunk)
    return hasher.hexdigest()
