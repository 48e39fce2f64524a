"""Messages for the person at the terminal, which must get through even when a pipe is gone."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import warnings
from collections.abc import Iterator
from typing import TextIO

from mtl.errors import printable


def say(message: str) -> None:
    """Print to stderr; when Ctrl-C has killed the pipe it went to (`2>&1 | tee log`), to the terminal.
    Control characters (a file's text quoted in a message) are written as escapes."""
    message = printable(message)
    try:
        above_bars(sys.stderr, message + "\n")
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


def above_bars(stream: TextIO, lines: str) -> None:
    """Write whole `lines` to `stream` with every open progress bar cleared first and drawn again
    below them: on a terminal stdout and stderr share the screen, and a message written while a
    bar holds the line would start in the middle of it (`...loss 1.096]step 20: ...`)."""
    tqdm = getattr(sys.modules.get("tqdm.std"), "tqdm", None)  # no bars unless tqdm is loaded
    bars = [b for b in list(getattr(tqdm, "_instances", ())) if hasattr(b, "start_t") and not b.disable]
    if not bars:
        stream.write(lines)
        stream.flush()
        return
    with tqdm.get_lock():
        for bar in bars:
            bar.clear(nolock=True)
        stream.write(lines)
        stream.flush()
        for bar in bars:
            bar.refresh(nolock=True)


def end_progress_bars() -> None:
    """Close every progress bar still open, which ends its line: a bar an error unwound past
    (iterated, or held outside a `with`) would otherwise leave its line open, and the message
    after it would start in the middle of it (`…read SQuAD]error: …`) in a log file or pipe.
    For a command's last words only: a bar closed mid-work stops drawing."""
    from tqdm import tqdm  # the class that keeps the open bars, for a command's last words only

    for bar in list(getattr(tqdm, "_instances", ())):
        with contextlib.suppress(Exception):  # a bar on a closed stream: nothing to end
            bar.close()


class Printable(io.TextIOBase):
    """A command's standard output with every control character but line feeds and tabs written as an
    escape: what commands print (tables, reports) quotes run names, task names and lines of files,
    which must not drive the terminal (an ESC sequence that recolours, retitles or clears it)."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.pending = ""  # the start of a line not ended yet: written with its end, above the bars

    def write(self, text: str) -> int:
        self.pending += printable(text)
        if "\n" in self.pending:
            lines, _, self.pending = self.pending.rpartition("\n")
            above_bars(self.stream, lines + "\n")
        return len(text)

    def flush(self) -> None:
        if self.pending:  # asked for a line's start now (print(..., end="", flush=True))
            self.stream.write(self.pending)
            self.pending = ""
        self.stream.flush()

    @property
    def encoding(self) -> str:
        return getattr(self.stream, "encoding", None) or "utf-8"

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()


@contextlib.contextmanager
def printable_stdout() -> Iterator[None]:
    """`sys.stdout` as `Printable`, and every warning's text escaped, for the duration (a
    command's run): a warning quotes paths and names from files (a downloaded encoder's
    vectors path), whose escape sequences would otherwise drive the terminal."""
    original, original_format = sys.stdout, warnings.formatwarning
    sys.stdout = wrapped = Printable(original)
    warnings.formatwarning = _printable_warning
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            wrapped.flush()  # a last line printed without its end
        sys.stdout, warnings.formatwarning = original, original_format


_format_warning = warnings.formatwarning


def _printable_warning(message, category, filename, lineno, line=None) -> str:  # noqa: ANN001
    return printable(_format_warning(message, category, filename, lineno, line))


class Unbreakable(io.TextIOBase):
    """A text stream that drops its writes once the pipe it wraps has broken.

    Progress bars write to it, so a Ctrl-C that kills `| tee log` cannot turn a bar's
    refresh into an exception before the run has checkpointed.
    """

    def __init__(self, stream: TextIO):
        self.stream, self.broken = stream, False

    # Equal to the stream it wraps, and to any other wrapper of it: tqdm clears a bar before
    # `tqdm.write` only when the bar's stream equals the one written to, and every
    # progress_stream() call makes a new wrapper.
    def __eq__(self, other: object) -> bool:
        return other is self.stream or (isinstance(other, Unbreakable) and other.stream is self.stream)

    def __hash__(self) -> int:
        return hash(id(self.stream))

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                self.stream.write(text)
            except OSError:
                self.broken = True
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self.stream.flush()
            except OSError:
                self.broken = True

    @property
    def encoding(self) -> str:
        """The wrapped stream's, so tqdm draws Unicode bars where the terminal takes them (it falls
        back to ASCII for a stream without an encoding)."""
        return getattr(self.stream, "encoding", None) or "utf-8"

    def isatty(self) -> bool:
        return not self.broken and self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()


def progress_stream() -> Unbreakable:
    return Unbreakable(sys.stderr)
