"""Read back the records of an offline W&B run file (`run-<id>.wandb`).

A resumed offline run continues in a new file: what the earlier files hold tells it which
history rows W&B already has.

The file is a LevelDB-style log: a 7-byte file header (":W&B", magic, version), then
32 KiB blocks of records, each with a 7-byte header (CRC-32 of type and chunk, length, type) and a chunk of
a serialized `Record` protobuf split as FULL, or FIRST, MIDDLE..., LAST.

W&B has no public Python reader of these files; its public one is the `wandb leet inspect
--json` command. The format is pinned here by its header (a file of another format is
refused in one line, never misread), and tests/test_wandb.py reads a file the installed W&B
wrote both ways and requires the same records: a W&B release that changes the format fails
that test before it misleads a resume.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mtl.errors import UserError

BLOCK = 32768
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
# The log's file header as W&B writes it (LEVELDBLOG_HEADER_IDENT, _MAGIC, _VERSION in its SDK).
IDENT, MAGIC, VERSION = b":W&B", 0xBEE1, 0


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
    """The file's records in order. A file cut short, or damaged after some whole records (a kill
    mid-write, a disk error), ends at the last record that decodes: W&B holds at most those."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise UserError(
            f"{path} cannot be read ({error.strerror or error}): resume with wandb=disabled"
        ) from None
    if len(data) < HEADER:
        return  # killed before W&B wrote its header: no record
    if data[:4] != IDENT or int.from_bytes(data[4:6], "little") != MAGIC or data[6:7] != bytes([VERSION]):
        from importlib.metadata import version

        raise UserError(
            f"{path} is not a W&B run file in the format mtl reads (header {data[:7]!r}, wandb "
            f"{version('wandb')} installed): resume with wandb=disabled, or with the wandb version that wrote it"
        )
    position, pending = HEADER, b""
    while position + HEADER <= len(data):
        left_in_block = BLOCK - position % BLOCK
        if left_in_block < HEADER:
            position += left_in_block
            continue
        checksum = int.from_bytes(data[position : position + 4], "little")
        length = int.from_bytes(data[position + 4 : position + 6], "little")
        kind = data[position + 6]
        chunk = data[position + HEADER : position + HEADER + length]
        if len(chunk) < length or length > left_in_block - HEADER or kind not in (FULL, FIRST, MIDDLE, LAST):
            return  # a length or kind that lies, or a record cut short
        if zlib.crc32(bytes([kind]) + chunk) != checksum:  # W&B's: CRC-32 of the kind and chunk
            return  # bytes overwritten since W&B wrote them
        position += HEADER + length
        if kind == FULL:
            record = _parse(chunk)
        elif kind == FIRST:
            pending, record = chunk, None
        elif kind == MIDDLE:
            pending, record = pending + chunk, None
        else:
            record = _parse(pending + chunk)
        if record is False:
            return
        if record is not None:
            yield record


def _parse(chunk: bytes) -> Any:
    """The record `chunk` holds, or False when it does not decode."""
    from google.protobuf.message import DecodeError
    from wandb.proto import wandb_internal_pb2  # only when a file is read: W&B is slow to import

    record = wandb_internal_pb2.Record()
    try:
        record.ParseFromString(chunk)
    except DecodeError:
        return False
    return record


def by_kind(path: Path) -> dict[str, list]:
    grouped: dict[str, list] = {}
    for record in records(path):
        kind = record.WhichOneof("record_type")
        grouped.setdefault(kind, []).append(getattr(record, kind))
    return grouped
