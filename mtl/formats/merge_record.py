"""The `merged` record an encoder.json carries when `just merge-encoders` made it: its
parents, their SHA-256s and the method. Read without torch, because `just compare` and a
transfer's ledger ask every run folder whether it holds a merge before anything is loaded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from mtl.files import schemas
from mtl.files.schemas import Record


class MergeParent(Record):
    path: str
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class MergeRecord(Record):
    """encoder.json's `merged` (just merge-encoders): its method and parents; the rest kept as written."""

    method: str
    parents: list[MergeParent] = Field(min_length=1)  # a merge of nothing is damage


def merge_record(folder: Path) -> dict[str, Any] | None:
    """The `merged` record of the encoder.json in `folder` (just merge-encoders), checked
    (MergeRecord); None when the folder holds no merge, or a damaged one."""
    try:
        record = json.loads((Path(folder) / "encoder.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    merged = record.get("merged") if isinstance(record, dict) else None
    if merged is None:
        return None
    try:
        return schemas.checked(MergeRecord, merged, f"{folder}/encoder.json: merged", "merge again")
    except schemas.DamagedFile:
        return None


def parent_file(folder: Path, recorded: str) -> Path:
    """A parent's encoder file as the merge in `folder` recorded it: relative to the merge's
    folder (merges since 2026-12-02, so a study copied whole reads its own parents), or absolute
    (earlier merges)."""
    path = Path(recorded)
    return path if path.is_absolute() else Path(folder) / path
