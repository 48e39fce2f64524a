"""The one exception type whose message is meant for the user, not a traceback, and the escaping
that keeps text from a file from driving the terminal."""

import unicodedata


class UserError(Exception):
    """Bad input or environment: the CLI prints the message on one line and exits non-zero.

    Messages quote what users give (a column name, a line of a file), which may hold line breaks
    or a terminal's control sequences: they are written as escapes, so the message stays the one
    line the CLI promises and a file's text never moves the cursor, recolours or retitles the
    terminal."""

    def __init__(self, message: object = "", *args: object):
        super().__init__(printable(str(message), keep=""), *args)


def printable(text: str, keep: str = "\n\t") -> str:
    """`text` with every control character but those in `keep` written as an escape (`\\x1b`):
    C0 and C1 controls (ESC starts the terminal's sequences), DEL, the characters str.splitlines()
    breaks at, and the bidirectional overrides that make text read other than it is."""
    if text.isprintable() and not any(c in UNSAFE for c in text):
        return text  # the usual case, at C speed
    return "".join(_escape(c) if c not in keep and _unsafe(c) else c for c in text)


def _unsafe(character: str) -> bool:
    return character in UNSAFE or unicodedata.category(character) in ("Cc", "Zl", "Zp")


def _escape(character: str) -> str:
    if character in SHORT_ESCAPES:
        return SHORT_ESCAPES[character]
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


SHORT_ESCAPES = {"\r": "\\r", "\n": "\\n", "\t": "\\t"}
# Bidirectional embeddings, overrides and isolates (Unicode's "Trojan Source" characters).
UNSAFE = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
