"""One writer per run folder, build output or sweep: an OS lock that dies with its process.

The lock is `flock` on a hidden sibling file, `.<name>.lock`, beside the folder it guards
(a sibling, because a build replaces its folder whole by a rename). It is taken before
anything in the folder is read, written or deleted and held until the work ends; the kernel
drops it when its process exits in any way, `kill -9` included, so a dead run never keeps
its folder locked and "restart a dead run" is only ever done with the lock in hand. The file
holds the holder's pid, host and command, which a second process is told.
"""

from __future__ import annotations

import fcntl
import os
import socket
import sys
import time
from pathlib import Path

from mtl.errors import UserError


def lock_file_of(folder: Path) -> Path:
    folder = Path(folder).expanduser()
    return folder.with_name(f".{folder.name}.lock")


class FolderLock:
    """Exclusive use of `folder` by this process, while entered (or from `acquire` to `release`)."""

    def __init__(self, folder: Path, what: str, key: str):
        """`what` names the folder in messages ("run folder"), `key` the option that chose it ("out")."""
        self.folder, self.what, self.key = Path(folder).expanduser(), what, key
        self.path = lock_file_of(self.folder)
        self._descriptor: int | None = None

    def acquire(self) -> FolderLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise UserError(
                f"could not lock {self.what} {self.folder} ({self.path}: {error.strerror or error}): "
                f"choose another {self.key}="
            ) from None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(descriptor)
            os.close(descriptor)
            raise FolderInUse(
                f"{self.what} {self.folder} is in use by {holder}: wait for it to end or stop it, "
                f"or choose another {self.key}="
            ) from None
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, describe_this_process().encode(), 0)
        self._descriptor = descriptor
        return self

    def release(self) -> None:
        """Unlock; the file stays (removing it would let two later processes lock two files)."""
        if self._descriptor is not None:
            os.close(self._descriptor)  # closing the descriptor drops the flock
            self._descriptor = None

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def describe_this_process() -> str:
    command = " ".join(Path(sys.argv[0]).name if i == 0 else a for i, a in enumerate(sys.argv))
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    return f"process {os.getpid()} on {socket.gethostname()} (since {started}: {command[:200]})"


def _read(descriptor: int) -> str:
    try:
        text = os.pread(descriptor, 1024, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text or "another process"


class FolderInUse(UserError):
    pass
