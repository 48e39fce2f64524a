"""Text as mtl reads it: UTF-8 (a leading byte-order mark is dropped), and only valid Unicode.

JSON may escape a lone surrogate (`"\\ud800"`): Python reads it into a `str` that no
UTF-8 writer (the tokenizer's cache, `datasets`, W&B) accepts later, so it is refused
where it is read, with the field that holds it.
"""

from __future__ import annotations

from pathlib import Path

from mtl.errors import UserError


def decode_utf8(data: bytes, what: str, path: Path) -> str:
    """The text of a file's bytes; bytes that are not UTF-8 are an error naming the line."""
    try:
        return data.decode("utf-8-sig")  # -sig: without a leading byte-order mark, when there is one
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise UserError(
            f"line {line} of {what} {path} is not UTF-8 ({error.reason}): re-save the file as UTF-8"
        ) from None


def invalid_unicode(text: str) -> str | None:
    """Where `text` holds a lone surrogate (`\\ud800 at character 4`), or None when it is valid."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"\\u{ord(text[error.start]):04x} at character {error.start}"
    return None


def text_lines(text: str) -> list[str]:
    """The lines of a file's text, split at line feeds only (a CRLF's carriage return dropped).

    `str.splitlines` also splits at U+2028, U+0085 and other separators that JSON strings and
    sentences may hold as text (`json.dumps(ensure_ascii=False)` writes U+2028 as it is), which
    would cut a JSON Lines record or a sentence in two.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]
