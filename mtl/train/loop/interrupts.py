"""Ctrl-C, SIGTERM and SLURM's warning before a time limit as a request to stop after the
current step, not in the middle of it."""

from __future__ import annotations

import contextlib
import signal
from typing import Any

from mtl.console import say

PARENT_DIED = signal.SIGUSR1
"""The signal a sweep's member gets when its sweep dies (Linux's parent-death signal).

Linux sends it once per exiting thread of the dying parent (the child is handed to the next
thread, then to init), so a member of a killed multi-threaded sweep gets it two or more times
in a row: unlike a second Ctrl-C, a repeat must not turn the checkpointing stop into an
immediate one. Also `kill -USR1 PID` for a user: stop after this step, however often sent.
"""


TIME_LIMIT = signal.SIGUSR2
"""What SLURM sends `--signal` seconds before a job's time limit (launcher=slurm: `slurm.signal_s`):
stop after this step with a checkpoint, and the job is requeued. A repeat is not a second Ctrl-C:
SLURM may signal the job's processes more than once."""

ONCE = (PARENT_DIED, TIME_LIMIT)  # signals whose repeat does not turn the stop into an immediate one


class StopRequests:
    """While entered, the first Ctrl-C, SIGTERM, TIME_LIMIT or PARENT_DIED sets `requested`; a second
    Ctrl-C or SIGTERM stops at once, a repeated PARENT_DIED or TIME_LIMIT does nothing."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopRequests:
        for signum in (signal.SIGINT, signal.SIGTERM, *ONCE):
            with contextlib.suppress(ValueError):  # not the main thread
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: object) -> None:
        if self.requested:
            if signum in ONCE:
                return
            raise KeyboardInterrupt
        self.requested = True
        say("\ninterrupt: saving a checkpoint after this step (Ctrl-C again to stop at once)")
