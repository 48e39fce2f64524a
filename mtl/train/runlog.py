"""Every metric of a run goes to `metrics.jsonl` in the run folder and to W&B."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from mtl.tracking import Tracker


class RunLog:
    def __init__(self, path: Path, tracker: Tracker, resume_at_byte: int | None = None):
        self.path, self.tracker = path, tracker
        if resume_at_byte is not None and path.exists():
            # Forget what was logged after the checkpoint we resume from: it will be logged again.
            with open(path, "r+b") as handle:
                handle.truncate(resume_at_byte)
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115  (open for the run's lifetime)

    @property
    def position(self) -> int:
        self._file.flush()
        return self._file.tell()

    def log(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record, default=_jsonable) + "\n")
        self._file.flush()
        self.tracker.log(
            {k: v for k, v in record.items() if not (isinstance(v, float) and not math.isfinite(v))}
        )

    def close(self) -> None:
        self._file.close()


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"cannot log {type(value).__name__}")


def read_metrics(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line]


class NullLog:
    """A RunLog that keeps nothing (benchmarks time steps without writing)."""

    position = 0

    def log(self, record: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass
