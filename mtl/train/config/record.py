"""A run folder's record, `config.json`: its config, the command that started it, its inputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mtl import plugins
from mtl.errors import UserError
from mtl.files import schemas
from mtl.formats import run_files
from mtl.runs import RunFolder


def read_run_record(run_dir: Path, key: str = "resume") -> dict[str, Any]:
    """The run's config.json: its config, the command that started it, its inputs' fingerprints.
    `key`: the command's own key for a run, named in the error (resume=, run=)."""
    path = RunFolder(run_dir).record
    record = schemas.read_json(path, run_files.RunRecord, "restore it, or start a new run")
    if record is None:
        raise UserError(f"{run_dir} is not a run folder (no config.json): pass {key}=runs/<run>")
    plugins.require(record.get("plugins"), f"run {run_dir}")  # before its config names what they register
    return record
