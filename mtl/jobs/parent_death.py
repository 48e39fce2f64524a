"""Linux's parent-death signal for a study's members: a member (or the process that forks them)
is told when the process that started it dies, even by `kill -9`, and checkpoints and stops."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable

from mtl.train.loop.interrupts import PARENT_DIED

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _prctl() -> Callable[..., int] | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def arm(parent: int) -> None:
    """In the child, first thing: PARENT_DIED when `parent` dies (at once if it is gone already)."""
    prctl = _prctl()
    if prctl is None:
        return  # not Linux: nothing
    prctl(PR_SET_PDEATHSIG, PARENT_DIED)
    if os.getppid() != parent:  # the parent died before the signal was armed
        os.kill(os.getpid(), PARENT_DIED)


def die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` arming the signal towards this process, or None where there is none.

    A member has its own session (so a terminal's Ctrl-C reaches the study alone), so it would
    otherwise outlive a killed study and train on unsupervised. PARENT_DIED makes it checkpoint
    and stop, as Ctrl-C would."""
    if _prctl() is None:
        return None
    parent = os.getpid()
    return lambda: arm(parent)
