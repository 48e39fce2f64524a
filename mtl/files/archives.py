"""Members of a downloaded zip or tar archive, read as untrusted input: one reader for both.

A member's name becomes a path under the folder it is written to, so every name is checked
before it is used: no absolute path, no `..`, no backslash or NUL; links, devices and other
special members are refused (tarfile's `filter="data"` rules, applied to zips the same way).
Sizes are bounded before a byte is decompressed: a member's declared size against a cap and
against its compressed size (a 1 MB zip declaring 1 GiB is a bomb, not a dataset), and the
bytes actually read against the declared size.
"""

from __future__ import annotations

import stat
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from mtl.errors import UserError, printable

MAX_MEMBER_BYTES = 1 << 30  # the largest file any dataset mtl fetches unpacks to is SNLI's (~470 MB)
MAX_RATIO = 200  # text deflates 3-10x; a member declaring 200x its compressed size is refused
MIN_BOUNDED = 16 << 20  # below this a member is never refused for its ratio (tiny, repetitive files)
CHUNK = 1 << 20


class UnsafeArchive(UserError):
    """An archive holding a member mtl refuses to read (a path outside, a link, a bomb)."""


@dataclass(frozen=True)
class Member:
    name: str  # as the archive names it, checked by `safe_name`
    size: int  # the declared size, once decompressed


def safe_name(archive: Path, name: str) -> str:
    """`name` when it is a relative path that stays inside the folder it is unpacked to."""
    parts = PurePosixPath(name).parts
    if (
        not name
        or name.startswith("/")
        or "\\" in name
        or "\x00" in name
        or ".." in parts
        or (parts and parts[0].endswith(":"))  # a drive letter (C:foo)
    ):
        raise UnsafeArchive(
            f"{printable(str(archive))} holds a member named {printable(name)!r}, which would be written outside "
            "its folder: the archive is not the one expected; delete it and fetch it again from its source"
        )
    return name


class Archive:
    """A zip or tar archive opened for reading its regular files by name, each checked and bounded.

    A damaged archive is a one-line UserError naming it (`damaged`, which the caller can act on:
    get-senteval removes it so the next run fetches it again)."""

    def __init__(self, path: Path, max_member_bytes: int = MAX_MEMBER_BYTES):
        self.path, self.max_member_bytes = Path(path), max_member_bytes
        self._zip: zipfile.ZipFile | None = None
        self._tar: tarfile.TarFile | None = None
        try:
            if zipfile.is_zipfile(self.path):
                self._zip = zipfile.ZipFile(self.path)
            else:
                self._tar = tarfile.open(self.path)  # noqa: SIM115 (closed by close())
        except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as error:
            raise Damaged(self.path, error) from None
        try:
            self._members = self._listed()
        except UserError:
            self.close()
            raise

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        for handle in (self._zip, self._tar):
            if handle is not None:
                handle.close()

    def names(self) -> list[str]:
        """Every regular file of the archive (folders skipped), in its order."""
        return list(self._members)

    def read(self, name: str) -> bytes:
        """The member's bytes; a member the archive lacks is one line naming it."""
        if name not in self._members:
            raise UserError(
                f"{printable(self.path.name)} has no {printable(name)}: the source changed since mtl recorded it; "
                "delete the file and fetch it again, or tell mtl's maintainers"
            )
        return b"".join(self.chunks(name))

    def chunks(self, name: str) -> Iterator[bytes]:
        """The member's bytes in chunks of at most 1 MiB, never more than its declared size."""
        member = self._members[name]
        try:
            if self._zip is not None:
                handle = self._zip.open(name)
            else:
                assert self._tar is not None
                handle = self._tar.extractfile(name)
                if handle is None:
                    raise tarfile.TarError(f"{name} has no data")
            read = 0
            with handle:
                while chunk := handle.read(min(CHUNK, member.size - read + 1)):
                    read += len(chunk)
                    if read > member.size:
                        raise UnsafeArchive(
                            f"{printable(self.path.name)}'s member {printable(name)} holds more bytes than the "
                            f"{member.size:,} it declares: the archive is not the one expected; delete it"
                        )
                    yield chunk
        except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as error:  # a CRC mismatch
            raise Damaged(self.path, error) from None

    def _listed(self) -> dict[str, Member]:
        try:
            found = list(self._zip_members() if self._zip is not None else self._tar_members())
        except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as error:
            raise Damaged(self.path, error) from None
        members: dict[str, Member] = {}
        for member in found:
            if member.name in members:
                raise UnsafeArchive(
                    f"{printable(str(self.path))} holds two members named {printable(member.name)!r}: the archive "
                    "is not the one expected; delete it and fetch it again"
                )
            members[member.name] = member
        return members

    def _zip_members(self) -> Iterator[Member]:
        assert self._zip is not None
        for info in self._zip.infolist():
            name = safe_name(self.path, info.filename)
            if info.is_dir():
                continue
            mode = info.external_attr >> 16
            if stat.S_IFMT(mode) and not stat.S_ISREG(mode):  # a symlink or device a Unix zip recorded
                raise self._special(name)
            self._check_size(name, info.file_size, info.compress_size)
            yield Member(name, info.file_size)

    def _tar_members(self) -> Iterator[Member]:
        assert self._tar is not None
        total = self.path.stat().st_size
        declared = 0
        for info in self._tar.getmembers():
            name = safe_name(self.path, info.name)
            if info.isdir():
                continue
            if not info.isfile():  # links, devices, FIFOs: tarfile's "data" filter refuses them too
                raise self._special(name)
            declared += info.size
            self._check_size(name, info.size, None)
            self._check_size(f"{name} (with the members before it)", declared, total)
            yield Member(name, info.size)

    def _check_size(self, name: str, size: int, compressed: int | None) -> None:
        if size > self.max_member_bytes or (
            compressed is not None and size > MIN_BOUNDED and size > MAX_RATIO * max(compressed, 1)
        ):
            raise UnsafeArchive(
                f"{printable(str(self.path))}'s member {printable(name)} declares {size:,} bytes"
                + (f" from {compressed:,} compressed" if compressed is not None else "")
                + f", more than a dataset file here can be (at most {self.max_member_bytes:,} bytes, "
                f"{MAX_RATIO}x compression): the archive is not the one expected; delete it"
            )

    def _special(self, name: str) -> UnsafeArchive:
        return UnsafeArchive(
            f"{printable(str(self.path))}'s member {printable(name)} is a link or a special file, which mtl never "
            "unpacks: the archive is not the one expected; delete it and fetch it again"
        )


class Damaged(UserError):
    """An archive that cannot be read: truncated, corrupted, or not an archive."""

    def __init__(self, path: Path, error: BaseException):
        self.path = path
        super().__init__(f"{printable(str(path))} is damaged ({printable(str(error))})")
