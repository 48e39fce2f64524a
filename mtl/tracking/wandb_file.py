"""Read back the records of an offline W&B run file (`run-<id>.wandb`).

A resumed offline run continues in a new file: what the earlier files hold tells it which
history rows W&B already has.

The file is a LevelDB-style log: a 7-byte file header (":W&B", magic, version), then
32 KiB blocks of records, each with a 7-byte header (crc32c, length, type) and a chunk of
a serialized `Record` protobuf split as FULL, or FIRST, MIDDLE..., LAST.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

BLOCK = 32768
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def run_files(directory: Path, run_id: str = "*") -> list[Path]:
    """The run files under `directory`, oldest first (folder names start with the start time)."""
    return sorted(Path(directory).glob(f"**/wandb/offline-run-*/run-{run_id}.wandb"))


def last_history_step(files: list[Path]) -> int | None:
    """The highest `_step` of the history rows in `files` (None when they hold none)."""
    steps = [
        record.history.step.num
        for path in files
        for record in records(path)
        if record.WhichOneof("record_type") == "history"
    ]
    return max(steps, default=None)


def records(path: Path) -> Iterator[Any]:
    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    position, pending = HEADER, b""
    while position + HEADER <= len(data):
        left_in_block = BLOCK - position % BLOCK
        if left_in_block < HEADER:
            position += left_in_block
            continue
        length = int.from_bytes(data[position + 4 : position + 6], "little")
        kind = data[position + 6]
        chunk = data[position + HEADER : position + HEADER + length]
        position += HEADER + length
        if kind == FULL:
            yield _parse(chunk)
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield _parse(pending + chunk)
        else:
            break


def _parse(chunk: bytes) -> Any:
    from wandb.proto import wandb_internal_pb2  # only when a file is read: W&B is slow to import

    record = wandb_internal_pb2.Record()
    record.ParseFromString(chunk)
    return record


def by_kind(path: Path) -> dict[str, list]:
    grouped: dict[str, list] = {}
    for record in records(path):
        kind = record.WhichOneof("record_type")
        grouped.setdefault(kind, []).append(getattr(record, kind))
    return grouped
