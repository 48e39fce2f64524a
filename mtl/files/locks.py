"""One writer per run folder, build output or sweep: an OS lock that dies with its process.

The lock is `flock` on a hidden sibling file, `.<name>.lock`, beside the folder it guards
(a sibling, because a build replaces its folder whole by a rename). It is taken before
anything in the folder is read, written or deleted and held until the work ends; the kernel
drops it when its process exits in any way, `kill -9` included, so a dead run never keeps
its folder locked and "restart a dead run" is only ever done with the lock in hand. The file
holds the holder's pid, host, SLURM job and command, which a second process is told.

On a cluster's shared file system a node that dies keeps its lock on the file server until
its lease runs out. A lock whose holder names a SLURM job that SLURM confirms has ended (squeue
shows an ended state, or sacct, once the controller forgot the job) is stale: the lock file is
replaced and taken, so a requeued job resumes its run. A job SLURM does not know is no evidence.
Only a job of this very cluster is ever judged so: the holder names its cluster, and a job of
another cluster (or of an unnamed one: a lock written before clusters were recorded) is never
taken for gone, as this cluster's `squeue` cannot know it.

The lock file is opened without following a link and must be a regular file: a link planted
there would otherwise have the file it points to truncated.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
import re
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

from mtl.errors import UserError, printable


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
            descriptor = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise UserError(
                    f"{printable(str(self.path))}, the lock file of {self.what} {printable(str(self.folder))}, is "
                    "a link: mtl never writes through one; remove it (or choose another "
                    f"{self.key}=)"
                ) from None
            raise UserError(
                f"could not lock {self.what} {printable(str(self.folder))} ({printable(str(self.path))}: "
                f"{error.strerror or error}): choose another {self.key}="
            ) from None
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            os.close(descriptor)
            raise UserError(
                f"{printable(str(self.path))}, the lock file of {self.what} {printable(str(self.folder))}, is "
                f"not a regular file: remove it (or choose another {self.key}=)"
            )
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(descriptor)
            os.close(descriptor)
            if stale_holder(holder) and not getattr(self, "_replaced", False):
                self.path.unlink(missing_ok=True)  # a new file, which the dead holder does not lock
                self._replaced = True
                return self.acquire()
            raise FolderInUse(
                f"{self.what} {self.folder} is in use by {holder}: wait for it to end or stop it, "
                f"or choose another {self.key}=" + _by_hand(holder, self.path)
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
    job = ""
    if os.environ.get("SLURM_JOB_ID"):
        cluster = os.environ.get("SLURM_CLUSTER_NAME") or this_cluster() or "?"
        job = f", SLURM job {os.environ['SLURM_JOB_ID']} of cluster {cluster}"
    return f"process {os.getpid()} on {socket.gethostname()}{job} (since {started}: {command[:200]})"


_HOLDER = re.compile(r"process (\d+) on (\S+?), SLURM job (\d+) of cluster (\S+?)[ ,(]")


def stale_holder(holder: str) -> bool:
    """Whether the lock's holder ran in a SLURM job of this cluster that SLURM confirms has ended
    (and is no process of this host that still runs). A job of another cluster, or of a cluster the
    holder did not name, is never stale: this cluster's `squeue` does not know it. Nor is a job this
    cluster does not know (purged from the controller's memory, or an id from before a reinstall)
    unless its accounting (`sacct`) shows it ended after the lock was taken: a live holder on
    another node must never lose its lock to a guess. Such a lock is freed by its lease, or by hand."""
    found = _HOLDER.match(holder)
    if found is None:
        return False
    pid, host, job, cluster = int(found[1]), found[2], found[3], found[4]
    if host == socket.gethostname() and process_alive(pid):
        return False
    if cluster != (os.environ.get("SLURM_CLUSTER_NAME") or this_cluster()):
        return False
    try:
        done = subprocess.run(
            ["squeue", "-h", "-t", "all", "-o", "%T", "-j", job],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False  # no SLURM to ask here: never taken for stale
    states = done.stdout.split()
    if done.returncode == 0 and states:
        return all(state in ENDED for state in states)  # still in the controller's memory
    return ended_in_accounting(job, _since(holder))


# A job's states once it has left for good (squeue shows them for MinJobAge, sacct afterwards)
ENDED = frozenset({
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
    "REVOKED", "TIMEOUT",
})  # fmt: skip


def ended_in_accounting(job: str, since: float | None) -> bool:
    """Whether SLURM's accounting shows job `job` ended, and ended after `since` (the lock's time:
    an id reused since is another job). False where sacct cannot answer (no accounting)."""
    try:
        done = subprocess.run(
            ["sacct", "-n", "-X", "-P", "-j", job, "-o", "State,End"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and accounting_says_ended(done.stdout, since)


def accounting_says_ended(rows: str, since: float | None) -> bool:
    """sacct's `State|End` rows (one per attempt of the job): every attempt ended, the last after
    `since` where it is known. No rows: no evidence."""
    rows_read = [line.split("|") for line in rows.splitlines() if line.strip()]
    if not rows_read or any(len(row) != 2 for row in rows_read):
        return False
    ends = []
    for state, end in rows_read:
        if (state.split() or [""])[0] not in ENDED:  # "CANCELLED by 0"; an empty state is none
            return False
        try:
            ends.append(time.mktime(time.strptime(end, "%Y-%m-%dT%H:%M:%S")))
        except ValueError:
            return False  # Unknown: not ended as far as sacct knows
    return since is None or max(ends) >= since


def _since(holder: str) -> float | None:
    found = re.search(r"\(since (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", holder)
    return time.mktime(time.strptime(found[1], "%Y-%m-%d %H:%M:%S")) if found else None


def this_cluster() -> str | None:
    """The name of the SLURM cluster this machine belongs to (`scontrol show config`); None where
    SLURM's commands are absent or say nothing."""
    return _cluster_of(os.environ.get("SLURM_CONF"))


@functools.cache  # asked once per configuration a process uses
def _cluster_of(conf: str | None) -> str | None:
    try:
        done = subprocess.run(
            ["scontrol", "show", "config"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"^ClusterName\s*=\s*(\S+)", done.stdout, re.MULTILINE)
    return found[1] if found and done.returncode == 0 else None


def process_alive(pid: int) -> bool:
    """Whether a process `pid` runs on this host (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _by_hand(holder: str, path: Path) -> str:
    """For a holder on another node: how to free its lock once its job is known to have ended."""
    found = re.match(r"process \d+ on (\S+?), SLURM job (\d+)", holder)
    if found is None or found[1] == socket.gethostname():
        return ""
    return f" (if SLURM job {found[2]} has ended and its node is down, remove {printable(str(path))})"


def _read(descriptor: int) -> str:
    try:
        text = os.pread(descriptor, 1024, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text or "another process"


class FolderInUse(UserError):
    pass
