"""Writes that never leave a half-written file looking complete: temporary path, fsync, rename.

A crash or power loss leaves either the previous file or the new one, never an empty or
truncated file under the final name; the temporary file is removed when the write fails.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from mtl.errors import UserError
from mtl.files.paths import resolved


@contextmanager
def atomic_path(path: Path, what: str = "file") -> Iterator[Path]:
    """A temporary sibling of `path` to write to; on success it is synced and renamed to `path`."""
    path = Path(path)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # made new here, never opened through whatever was there: a link planted under the
        # temporary name would have the writer overwrite the file it points to
        partial.unlink(missing_ok=True)
        os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
        yield partial
        fsync_file(partial)
        os.replace(partial, path)
        fsync_dir(path.parent)
    except OSError as error:
        raise UserError(f"could not write {what} {path}: {error.strerror or error}{_advice(error)}") from None
    finally:
        with contextlib.suppress(OSError):  # a read-only place has no partial file to remove
            partial.unlink(missing_ok=True)


def failed_write(path: Path, error: Exception) -> OSError:
    """The OSError a writer that reports failure otherwise (torch.save: RuntimeError) stands for,
    with the free space left where `path` was being written, as that is the usual cause."""
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        free = None
    reason = str(error).splitlines()[0][:120] if str(error) else type(error).__name__
    room = "" if free is None else f"; {free / 2**20:,.1f} MiB free there: is the disk full?"
    return OSError(errno.EIO, f"the write failed ({reason}){room}")


@contextmanager
def safetensors_errors(path: Path) -> Iterator[None]:
    """safetensors' own error for a failed write (a full disk: `SafetensorError: ... No space left`)
    as the OSError it stands for, which the writers around it say in one line."""
    from safetensors import SafetensorError  # where safetensors writes, it is loaded already

    try:
        yield
    except SafetensorError as error:
        raise failed_write(Path(path), error) from None


def _advice(error: OSError) -> str:
    if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return ": choose a place you can write to"
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return ": free some space and run again"
    return ""


def write_text(path: Path, text: str, what: str = "file") -> None:
    with atomic_path(path, what) as partial:
        partial.write_text(text, encoding="utf-8")


def write_bytes(path: Path, data: bytes, what: str = "file") -> None:
    with atomic_path(path, what) as partial:
        partial.write_bytes(data)


def write_folder(path: Path, fill: Callable[[Path], None], what: str = "folder") -> None:
    """`fill(temporary folder)`, then the folder replaces `path` whole (an older one is removed after).

    The temporary names, `.<name>.partial-<pid>` and `.<name>.old-<pid>`, let a later writer
    remove what a killed one left behind.
    """
    path = Path(path)
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    retired = path.with_name(f".{path.name}.old-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        fill(partial)
        fsync_tree(partial)
        if path.exists():
            os.replace(path, retired)
        os.replace(partial, path)
        fsync_dir(path.parent)
    except OSError as error:
        raise UserError(f"could not write {what} {path}: {error.strerror or error}") from None
    finally:
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(retired, ignore_errors=True)


def fsync_file(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def fsync_dir(folder: Path) -> None:
    """Make a rename inside `folder` durable (a no-op where directories cannot be opened)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def fsync_tree(folder: Path) -> None:
    """fsync every file under `folder`, then the folders themselves, before `folder` is renamed."""
    for root, _, files in os.walk(folder):
        for name in files:
            fsync_file(Path(root) / name)
        fsync_dir(Path(root))


def check_output_dir(path: Path, key: str) -> Path:
    """Refuse, before any work starts, an output folder that is a file or cannot be written.

    The nearest existing ancestor must be a writable folder (so the folder can be made).
    """
    path = Path(path).expanduser()
    resolved(path, key)
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        where = "" if probe == path else f" ({probe} is a file)"
        raise UserError(f"{key}={path} is not a folder{where}: choose another {key}=")
    if probe.exists() and not os.access(probe, os.W_OK | os.X_OK):
        raise UserError(f"{key}={path} cannot be written ({probe} is read-only): choose another {key}=")
    return path


def fresh_path(folder: Path, stem: str, suffix: str) -> Path:
    """A default output name, `<stem>-<date>-<time><suffix>` in `folder` (-2, -3, ... when taken),
    claimed at once (created empty, exclusively), so two commands started in the same second
    never write one file: compare's and plan-seeds' records were overwritten so. The writer
    replaces the empty file whole; its .json sibling is checked too."""
    import time

    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for number in range(1, 10_000):  # a bound a person can see: 10,000 commands in one second
        path = folder / f"{stem}-{stamp}{'' if number == 1 else f'-{number}'}{suffix}"
        if path.with_suffix(".json").exists():
            continue
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            continue
        return path
    raise UserError(f"{folder}: 10,000 outputs named {stem}-{stamp}: give out= a name of your own")
