"""The `merged` record an encoder.json carries when `just merge-encoders` made it: its
parents, their SHA-256s and the method. Read without torch, because `just compare` and a
transfer's ledger ask every run folder whether it holds a merge before anything is loaded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mtl.files import schemas


def merge_record(folder: Path) -> dict[str, Any] | None:
    """The `merged` record of the encoder.json in `folder` (just merge-encoders), checked
    (schemas.MergeRecord); None when the folder holds no merge, or a damaged one."""
    try:
        record = json.loads((Path(folder) / "encoder.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    merged = record.get("merged") if isinstance(record, dict) else None
    if merged is None:
        return None
    try:
        return schemas.checked(schemas.MergeRecord, merged, f"{folder}/encoder.json: merged", "merge again")
    except schemas.DamagedFile:
        return None
