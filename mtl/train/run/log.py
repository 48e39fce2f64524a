"""Every record of a run goes to `metrics.jsonl`; its numbers go to W&B's history.

Training steps reach W&B as one row per `every` steps: the means of the steps' values
(loss, accuracy, gradient norm, examples/s, lr, epoch) and the counters at the window's
last step. W&B's `log` costs about half a millisecond of the loop's time; a GPU step takes a
few, so a row per step would cost such a run a tenth of its speed. Evaluations are rows of
their own; other events (blocks, checkpoints) and parameter counts stay in the file.

W&B rows are keyed by the global step (explicit, monotonic), so a resumed run continues
the history: the file is read again from the start (rebuilding the window under way), the
rows W&B already holds are not sent again, and those since the checkpoint that W&B never
got (a kill loses what its writer had not written) are sent from the file. Strings and
booleans (event names) stay in the file: W&B cannot chart them.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from mtl import metrics
from mtl.formats.run_files import log_line
from mtl.runs import read_metrics
from mtl.tracking.tracker import Tracker


class RunLog:
    def __init__(self, path: Path, tracker: Tracker, resume_at_byte: int | None = None, every: int = 1):
        self.path, self.tracker, self.every = path, tracker, every
        self._row: dict[str, Any] = {}
        self._row_step: int | None = None
        self._window: dict[str, list[int | float]] = {}  # the training steps' values since the last row
        self._window_step: int | None = None  # the last step in the window
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

    def log(self, record: dict[str, Any]) -> None:
        """Append `record` (which has a `global_step`) to the file; a step's or an evaluation's
        numbers to W&B."""
        self._file.write(log_line(record))
        self._file.flush()
        self._to_history(record)

    def _to_history(self, record: dict[str, Any]) -> None:
        step = record[metrics.GLOBAL_STEP]
        numbers = {key: value for key, value in record.items() if _chartable(value)}
        if metrics.TASK_ID in record:  # a training step
            for key, value in numbers.items():
                self._window.setdefault(key, []).append(value)
            self._window_step = step
            if step % self.every == 0:
                self._close_window()
        elif record.get(metrics.EVENT) == "evaluation" and numbers:
            self._add_to_row(step, numbers)

    def flush(self, step: int) -> None:
        """Send the row under way if it is of a step before `step` (W&B drops a row older than one
        it holds): before something else is logged to W&B at `step`."""
        if self._row_step is not None and self._row_step < step:
            self._send_row()

    def _close_window(self) -> None:
        """The window's row: floats averaged over its steps, counters (ints) at its last step."""
        if self._window_step is None:
            return
        values = {
            key: value[-1] if isinstance(value[-1], int) else math.fsum(value) / len(value)
            for key, value in self._window.items()
        }
        self._add_to_row(self._window_step, values)
        self._window, self._window_step = {}, None

    def _add_to_row(self, step: int, numbers: dict[str, Any]) -> None:
        if self._row_step is not None and step != self._row_step:
            self._send_row()
        self._row_step = step
        self._row.update(numbers)

    def _send_row(self) -> None:
        held = self._held_by_wandb
        if self._row and (held is None or self._row_step > held):
            self.tracker.log(self._row, step=self._row_step)
        self._row = {}

    def close(self, finished: bool = True) -> None:
        """`finished`: the run ended, so its last steps (fewer than `every`) make a row; a run that
        stops to be resumed leaves them to the resumed process, whose windows then match an
        uninterrupted run's."""
        if finished:
            self._close_window()
        self._send_row()
        self._file.close()


def _chartable(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


class NullLog:
    """A RunLog that keeps nothing (benchmarks time steps; ranks other than 0)."""

    position = 0

    def log(self, record: dict[str, Any]) -> None:
        pass

    def flush(self, step: int) -> None:
        pass

    def close(self, finished: bool = True) -> None:
        pass
