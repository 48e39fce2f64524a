"""Ctrl-C and SIGTERM as a request to stop after the current step, not in the middle of it."""

from __future__ import annotations

import contextlib
import signal
from typing import Any

from mtl.console import say


class StopRequests:
    """While entered, the first Ctrl-C or SIGTERM sets `requested`; the second stops at once."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopRequests:
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not the main thread
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: object) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        say("\ninterrupt: saving a checkpoint after this step (Ctrl-C again to stop at once)")
