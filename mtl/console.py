"""Messages for the person at the terminal, which must get through even when a pipe is gone."""

from __future__ import annotations

import contextlib
import os
import sys


def say(message: str) -> None:
    """Print to stderr; when Ctrl-C has killed the pipe it went to (`2>&1 | tee log`), to the terminal."""
    try:
        print(message, file=sys.stderr, flush=True)
        return
    except OSError:
        pass
    try:
        with open("/dev/tty", "w") as terminal:
            print(message, file=terminal)
    except OSError:
        pass  # no terminal either: the checkpoint is on disk all the same
    # Nothing more can reach the dead pipe: stop Python's exit from trying (and failing) to flush it.
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, stream.fileno())
