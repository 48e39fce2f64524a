"""What a transfer report evaluated, and whether that is still the run's result.

`just transfer run=<a run still training>` evaluates the best checkpoint of the moment. Its
report records the file it read, that file's training step and a SHA-256 of its weights, so a
later reader can tell an early evaluation from one of the run's final encoder: `just report`
and `just compare` flag a report whose weights are not those of the run's encoder.json.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from mtl.errors import UserError
from mtl.eval.encoder import encoder_file
from mtl.locks import lock_file_of
from mtl.runs import RunFolder
from mtl.train import checkpoint


def evaluated(run: str) -> dict[str, Any]:
    """The encoder file `load_encoder(run)` reads: its path, weights digest and training step."""
    file = encoder_file(run)
    entry: dict[str, Any] = {"file": str(file), "weights_sha256": weights_digest(file), "step": None}
    folder = _run_folder_of(file)
    if folder is not None:
        entry["file"] = str(file.resolve().relative_to(folder))
        entry["step"] = _best_step(folder, file)
        if holder := training_process(folder):
            entry["training"] = holder
    return entry


def weights_digest(file: Path) -> str:
    """The SHA-256 an exported encoder records for its weights; a checkpoint's: of its bytes."""
    if file.suffix == ".json":
        try:
            recorded = json.loads(file.read_text(encoding="utf-8")).get("weights_sha256")
        except (OSError, ValueError, AttributeError, RecursionError):
            recorded = None
        if isinstance(recorded, str):
            return recorded
    hasher = hashlib.sha256()
    with open(file, "rb") as handle:
        while chunk := handle.read(1 << 22):
            hasher.update(chunk)
    return hasher.hexdigest()


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


def stale(report: dict, report_path: Path, folder: Path) -> str | None:
    """Why the transfer report `report` (read from `report_path` in run folder `folder`) is not a
    result of the run's final encoder, or None when it is (or the run has no final encoder yet)."""
    final = RunFolder(folder).encoder
    if not final.is_file():
        return None
    entries = report.get("evaluated")
    if not isinstance(entries, list) or not entries:  # a report written before reports said
        try:
            older = report_path.stat().st_mtime < final.stat().st_mtime
        except OSError:
            return None
        return "written before the run exported its final encoder" if older else None
    ours = [e for e in entries if isinstance(e, dict) and _names_this_run(e, folder)]
    if not ours:
        return None
    if any(e.get("weights_sha256") == weights_digest(final) for e in ours):
        return None
    entry = ours[0]
    step = f" at step {entry['step']}" if entry.get("step") is not None else ""
    return f"evaluated {entry.get('file')}{step}, not the run's final encoder"


def _names_this_run(entry: dict, folder: Path) -> bool:
    file = str(entry.get("file", ""))
    return not Path(file).is_absolute() or Path(file).resolve().is_relative_to(folder.resolve())


def _run_folder_of(file: Path) -> Path | None:
    for parent in file.resolve().parents:
        if RunFolder(parent).record.is_file():
            return parent
    return None


def _best_step(folder: Path, file: Path) -> int | None:
    """The training step the evaluated weights are from: the best checkpoint's, as its summary or
    its checkpoint (read without its tensors) say."""
    files = RunFolder(folder)
    if file.name == "encoder.json" or file.name == "encoder.pt":
        try:
            summary = json.loads(files.summary.read_text(encoding="utf-8"))
            return int(summary["best/step"])
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return None
    try:
        return int(checkpoint.load(file)["best"]["step"])
    except (UserError, KeyError, TypeError, ValueError):  # latest.pt has no best step
        return None
