"""Read back the records of an offline W&B run file (`run-<id>.wandb`) through W&B's own reader.

A resumed offline run continues in a new file: what the earlier files hold tells it which
history rows W&B already has.

The file's format is W&B's private one (a LevelDB-style log of protobuf records); its public
reader is `wandb leet inspect --json`, which prints one JSON object per record, the same Go
reader `wandb sync` uploads with. mtl once parsed the log itself and differed from W&B where it
mattered: a file damaged in the middle ended at the damage for mtl, while W&B skips the damaged
block and reads on, so a resume re-logged steps W&B already held.
A file cut short (a kill mid-write) ends at its last whole record for both.

The reader is W&B's Go binary (`wandb-core leet inspect`), which the CLI command runs: started
here with the arguments the CLI gives it for a local file, as the CLI starts it, it skips the
CLI's Python start-up (0.35-0.5 s a file here against 1.5-1.8 s through `python -m wandb`, the
same output). A W&B without the binary is read through its CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

from mtl.errors import UserError

READER_TIMEOUT = 600  # seconds: W&B reads 2,000 history rows in 1 s here; a month-long run's file is larger


def run_files(directory: Path, run_id: str = "*") -> list[Path]:
    """The run files under `directory`, oldest first (folder names start with the start time)."""
    return sorted(Path(directory).glob(f"**/wandb/offline-run-*/run-{run_id}.wandb"))


def last_history_step(files: list[Path]) -> int | None:
    """The highest `_step` of the history rows in `files` (None when they hold none)."""
    steps = [
        int(record["history"].get("step", {}).get("num", 0))
        for path in files
        for record in records(path)
        if record.get("type") == "history"
    ]
    return max(steps, default=None)


def records(path: Path) -> list[dict[str, Any]]:
    """The file's records in order, each as `{"type": kind, kind: its fields, ...}` (protobuf's
    JSON form: field names as in W&B's `wandb_internal.proto`, values decoded, defaults left out)."""
    if not Path(path).is_file():
        raise UserError(f"{path} cannot be read (no such file): resume with wandb=disabled")
    try:
        done = subprocess.run(
            _reader_command(Path(path).resolve()),
            capture_output=True,
            text=True,
            timeout=READER_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise UserError(
            f"W&B took over {READER_TIMEOUT} s to read {path}: resume with wandb=disabled"
        ) from None
    if done.returncode != 0:
        said = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        why = said[-1] if said else f"exit status {done.returncode}"
        if "No such command" in done.stderr or "No such option" in done.stderr:  # a W&B before the reader
            why = f"wandb {version('wandb')} has no `wandb leet inspect`: pip install -U 'wandb>=0.31'"
        raise UserError(
            f"{path} is not a W&B run file the installed W&B reads ({why}): resume with wandb=disabled, "
            "or with the wandb version that wrote it"
        )
    read = []
    for line in done.stdout.splitlines():
        if not line.startswith("{"):
            continue  # W&B's own notes between records
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            raise UserError(
                f"W&B printed a record of {path} that is not JSON: resume with wandb=disabled"
            ) from None
        if isinstance(record, dict) and isinstance(record.get("type"), str):
            read.append(record)
    return read


def _reader_command(path: Path) -> list[str]:
    """`wandb leet inspect --json path` as W&B's CLI runs it (wandb/cli/leet.py: the binary, the
    command, `--no-observability` for an offline run, the file and its W&B folder); the CLI
    itself where W&B has no binary (the CLI then says what is missing)."""
    from wandb.errors import WandbCoreNotAvailableError
    from wandb.util import get_core_path

    try:
        core = get_core_path()
    except WandbCoreNotAvailableError:
        return [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(path)]
    return [
        core,
        "leet",
        "inspect",
        "--no-observability",
        "--json",
        "--run-file",
        str(path),
        str(path.parent.parent),
    ]


def by_kind(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The file's records grouped by kind (`run`, `history`, `artifact`...): each record's fields."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for record in records(path):
        kind = record["type"]
        grouped.setdefault(kind, []).append(record.get(kind) or {})
    return grouped
