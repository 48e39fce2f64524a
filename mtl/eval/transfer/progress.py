"""What the transfer bar says while one task runs (embedding 10,662 sentences, fold 3/10): a
single task of the standard protocol takes minutes, and a bar that only counts tasks would sit
still that long.

The suite sets where the words go (`reporting`); the code that embeds and fits says its stage
(`stage`) without knowing whether anyone listens: nothing is shown outside a suite.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar

_listener: ContextVar[Callable[[str], None] | None] = ContextVar("transfer_stage", default=None)


@contextmanager
def reporting(listener: Callable[[str], None] | None) -> Iterator[None]:
    """Within the block, each `stage(text)` calls `listener(text)` (None: says nothing)."""
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)


def stage(text: str) -> None:
    if (listener := _listener.get()) is not None:
        listener(text)


def silenced() -> AbstractContextManager[None]:
    """Within the block, `stage` says nothing: a part whose stages would hide its caller's (an
    outer fold's C search under the count of the outer folds)."""
    return reporting(None)
