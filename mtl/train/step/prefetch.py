"""The next step's batch, made ready on a background thread while the current step runs.

A step's host work (rows -> padded token ids -> pinned tensors copied to the GPU) otherwise
sits between two steps with the GPU idle. The trainer says which batch comes next (the
scheduler's next task and that task's stream, peeked, not advanced); the thread prepares it
during the current step; the next step takes it only if it is the batch the stream then
gives, else prepares its own. The stream stays the one source of which batch a step sees,
so prefetching cannot change training, and a resumed run simply starts with nothing ready.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np


class Prefetcher:
    def __init__(self, prepare: Callable[[str, np.ndarray], Any], enabled: bool):
        self.prepare = prepare
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="mtl-prefetch") if enabled else None
        self.pending: tuple[str, np.ndarray, Future] | None = None
        self.hits = self.misses = 0  # batches taken ready, and prepared on the spot

    @classmethod
    def for_run(
        cls, prepare: Callable[[str, np.ndarray], Any], setting: str, device: Any, mixed: bool
    ) -> Prefetcher:
        """`prefetch=`: on, off, or auto, which prepares ahead on a GPU only (on the CPU the thread
        would take cores from the step itself); a mixed step prepares its own batches."""
        enabled = {"on": True, "off": False}.get(setting, device.type == "cuda")
        return cls(prepare, enabled and not mixed)

    @property
    def enabled(self) -> bool:
        return self.pool is not None

    def schedule(self, task: str, rows: np.ndarray) -> None:
        """Start preparing `task`'s batch `rows` (the next step's, as far as the trainer knows)."""
        if self.pool is not None:
            rows = rows.copy()
            self.pending = (task, rows, self.pool.submit(self.prepare, task, rows))

    def take(self, task: str, rows: np.ndarray) -> Any:
        """The prepared batch when it is `task`'s `rows`, else it is prepared now."""
        pending, self.pending = self.pending, None
        if pending is not None:
            ready = pending[2].result()  # also re-raises what failed on the thread
            if pending[0] == task and np.array_equal(pending[1], rows):
                self.hits += 1
                return ready
        self.misses += 1
        return self.prepare(task, rows)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pending = None
