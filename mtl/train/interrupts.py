"""Ctrl-C and SIGTERM as a request to stop after the current step, not in the middle of it."""

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


class StopRequests:
    """While entered, the first Ctrl-C, SIGTERM or PARENT_DIED sets `requested`; a second Ctrl-C
    or SIGTERM stops at once, a repeated PARENT_DIED does nothing."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopRequests:
        for signum in (signal.SIGINT, signal.SIGTERM, PARENT_DIED):
            with contextlib.suppress(ValueError):  # not the main thread
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: object) -> None:
        if self.requested:
            if signum == PARENT_DIED:
                return
            raise KeyboardInterrupt
        self.requested = True
        say("\ninterrupt: saving a checkpoint after this step (Ctrl-C again to stop at once)")
