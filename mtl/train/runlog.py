"""Every record of a run goes to `metrics.jsonl`; its numbers go to W&B as one history row per step.

W&B rows are keyed by the global step (explicit, monotonic), so a resumed run continues
the history: the rows W&B already holds are not sent again, and the records since the
checkpoint that W&B never got (a kill loses the row being built) are sent from the file.
Strings and booleans (event names) stay in the file: W&B cannot chart them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from mtl import jsonfile, metrics
from mtl.tracking import Tracker


class RunLog:
    def __init__(self, path: Path, tracker: Tracker, resume_at_byte: int | None = None):
        self.path, self.tracker = path, tracker
        self._row: dict[str, Any] = {}
        self._row_step: int | None = None
        self._held_by_wandb = tracker.last_history_step()  # None: W&B holds no row of this run yet
        if resume_at_byte is not None and path.exists():
            # Forget what was logged after the checkpoint we resume from: it will be logged again.
            with open(path, "r+b") as handle:
                handle.truncate(resume_at_byte)
            for record in read_metrics(path):
                self._to_history(record)
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115  (open for the run's lifetime)

    @property
    def position(self) -> int:
        self._file.flush()
        return self._file.tell()

    def log(self, record: dict[str, Any], history: bool = True) -> None:
        """Append `record` (which has a `global_step`) to the file; with `history`, its numbers to W&B."""
        self._file.write(jsonfile.dumps(record) + "\n")
        self._file.flush()
        if history:
            self._to_history(record)

    def _to_history(self, record: dict[str, Any]) -> None:
        step = record[metrics.GLOBAL_STEP]
        if self._held_by_wandb is not None and step <= self._held_by_wandb:
            return
        numbers = {key: value for key, value in record.items() if _chartable(value)}
        if not numbers:
            return
        if self._row_step is not None and step != self._row_step:
            self._send_row()
        self._row_step = step
        self._row.update(numbers)

    def _send_row(self) -> None:
        if self._row:
            self.tracker.log(self._row, step=self._row_step)
        self._row = {}

    def close(self) -> None:
        self._send_row()
        self._file.close()


def _chartable(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def read_metrics(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line]


class NullLog:
    """A RunLog that keeps nothing (benchmarks time steps; ranks other than 0)."""

    position = 0

    def log(self, record: dict[str, Any], history: bool = True) -> None:
        pass

    def close(self) -> None:
        pass
