"""What a transfer report evaluated, and whether that is still the run's result.

`just transfer run=<a run still training>` evaluates the best checkpoint of the moment. Its
report records the file it read, that file's training step and a SHA-256 of its weights, so a
later reader can tell an early evaluation from one of the run's final encoder: `just report`
and `just compare` flag a report whose weights are not those of the run's encoder.json.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

import torch

from mtl.eval.loading import encoder_file
from mtl.files.locks import lock_file_of
from mtl.runs import RunFolder, read_summary, run_folder_of, weights_digest


def evaluated(run: str) -> dict[str, Any]:
    """The encoder file `load_encoder(run)` reads: its path, weights digest and training step."""
    file = encoder_file(run)
    entry: dict[str, Any] = {"file": str(file), "weights_sha256": weights_digest(file), "step": None}
    folder = run_folder_of(file)
    if folder is not None:
        entry["file"] = str(file.resolve().relative_to(folder))
        entry["step"] = _best_step(folder, file)
        if holder := training_process(folder):
            entry["training"] = holder
    return entry


def training_process(folder: Path) -> str | None:
    """Who holds the run folder's lock (a training process, described), or None when nobody does."""
    lock = lock_file_of(folder)
    if not lock.is_file():
        return None
    try:
        descriptor = os.open(lock, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return None
    except BlockingIOError:
        return os.pread(descriptor, 1024, 0).decode("utf-8", "replace").strip() or "another process"
    finally:
        os.close(descriptor)


def _best_step(folder: Path, file: Path) -> int | None:
    """The training step the evaluated weights are from: the best checkpoint's, as the run's
    summary (for its exported encoder) or the checkpoint says. The checkpoint is mapped, not read:
    `load_encoder` has just read and verified it, and only one number is wanted."""
    try:
        if file.name in ("encoder.json", "encoder.pt"):
            return int(read_summary(RunFolder(folder).summary)["best/step"])
        return int(torch.load(file, map_location="cpu", weights_only=True, mmap=True)["best"]["step"])
    except Exception:  # noqa: BLE001  (no summary yet, latest.pt has no best step, a file replaced since)
        return None
