"""The text processing SentEval's download script (data/downstream/get_transfer_data.bash)
applies to the files it fetches, reimplemented so `just get-senteval` writes what it writes:

- `cat -v`: bytes outside printable ASCII shown in caret and meta notation (MR's "clichM-i"),
  before the Penn Treebank sed tokenizer reads MR, CR, SUBJ, MPQA and SNLI;
- the Penn Treebank tokenizer (Robert MacIntyre's `tokenizer.sed`, 1995) as sed applies it,
  rule by rule, to each line;
- Moses' `tokenizer.perl -l en -no-escape` (sacremoses, its Python port), lowercased for STS
  and STS-B, as-cased for SICK;
- TREC's removal of backquotes and apostrophes.

sed, cut and tr see bytes: those files are read as Latin-1 (one character per byte), so no byte
changes unless a rule changes it. Moses reads UTF-8 (its rules know Unicode letters): its files
are read as UTF-8, any invalid byte kept as it was (surrogateescape).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence


def cat_v(data: bytes) -> bytes:
    """GNU `cat -v`: a byte >= 128 as M- then its low 7 bits' form; a control byte (not tab or
    newline) as ^ and a letter; DEL as ^?."""
    return b"".join(_CAT_V[b] for b in data)


def _cat_v_form(byte: int) -> bytes:
    prefix = b""
    if byte >= 128:
        prefix, byte = b"M-", byte - 128
        if byte in (9, 10):  # a meta tab or newline is shown like any control character
            return prefix + b"^" + bytes([byte + 64])
    if byte in (9, 10):
        return bytes([byte])
    if byte < 32:
        return prefix + b"^" + bytes([byte + 64])
    if byte == 127:
        return prefix + b"^?"
    return prefix + bytes([byte])


_CAT_V = [_cat_v_form(b) for b in range(256)]


# The sed script's substitutions in its order: (pattern, replacement), each applied to every
# match of the line (sed's g flag; the two that have no g flag act once, at a line's end/start).
_TREEBANK: list[tuple[str, str, int]] = [
    (r'^"', "`` ", 0),  # opening double quotes
    (r'([ (\[{<])"', r"\1 `` ", 0),
    (r"\.\.\.", " ... ", 0),
    (r"[,;:@#$%&]", r" \g<0> ", 0),
    (r"([^.])([.])([\])}>\"']*)[ \t]*$", r"\1 \2\3 ", 0),  # a final period only
    (r"[?!]", r" \g<0> ", 0),
    (r"[\]\[(){}<>]", r" \g<0> ", 0),
    (r"--", " -- ", 0),
    (r"$", " ", 1),
    (r"^", " ", 1),
    (r'"', " '' ", 0),  # closing double quotes
    (r"([^'])' ", r"\1 ' ", 0),  # possessive or closing single quote
    (r"'([sSmMdD]) ", r" '\1 ", 0),  # it's, I'm, we'd
    (r"'ll ", " 'll ", 0),
    (r"'re ", " 're ", 0),
    (r"'ve ", " 've ", 0),
    (r"n't ", " n't ", 0),
    (r"'LL ", " 'LL ", 0),
    (r"'RE ", " 'RE ", 0),
    (r"'VE ", " 'VE ", 0),
    (r"N'T ", " N'T ", 0),
    (r" ([Cc])annot ", r" \1an not ", 0),
    (r" ([Dd])'ye ", r" \1' ye ", 0),
    (r" ([Gg])imme ", r" \1im me ", 0),
    (r" ([Gg])onna ", r" \1on na ", 0),
    (r" ([Gg])otta ", r" \1ot ta ", 0),
    (r" ([Ll])emme ", r" \1em me ", 0),
    (r" ([Mm])ore'n ", r" \1ore 'n ", 0),
    (r" '([Tt])is ", r" '\1 is ", 0),
    (r" '([Tt])was ", r" '\1 was ", 0),
    (r" ([Ww])anna ", r" \1an na ", 0),
    (r"  *", " ", 0),  # collapse runs of spaces
    (r"^ *", "", 1),
]
_TREEBANK_COMPILED = [(re.compile(pattern), replacement, count) for pattern, replacement, count in _TREEBANK]


def treebank_line(line: str) -> str:
    """One line (no newline) through the Penn Treebank sed script."""
    for pattern, replacement, count in _TREEBANK_COMPILED:
        line = pattern.sub(replacement, line, count=count)
    return line


def treebank(data: bytes) -> bytes:
    """`sed -f tokenizer.sed` on a whole file: every line, its newline kept."""
    return _by_line(data, treebank_line)


@functools.cache
def _moses():
    from sacremoses import MosesTokenizer  # imported for the files that need it only

    return MosesTokenizer(lang="en")


def moses_line(line: str, lowercase: bool) -> str:
    """Moses' English tokenizer without escaping (`-l en -no-escape`), then lowercase.perl's
    lowercasing when asked."""
    if not line.strip():  # tokenizer.perl prints a blank line as it is
        return line
    tokens = _moses().tokenize(line, escape=False, return_str=True)
    return tokens.lower() if lowercase else tokens


def moses(lines: Sequence[str], lowercase: bool) -> list[str]:
    return [moses_line(line, lowercase) for line in lines]


def without_quotes(data: bytes) -> bytes:
    """TREC: sed's s/`//g then s/'//g."""
    return data.replace(b"`", b"").replace(b"'", b"")


BYTES, UTF8 = "latin-1", "utf-8"  # how a processing step reads a file: as sed does, as Moses does


def lines_of(data: bytes, encoding: str = BYTES) -> list[str]:
    """The lines of `data` as cut and paste see them, without their newlines."""
    text = data.decode(encoding, errors="surrogateescape")
    return text[:-1].split("\n") if text.endswith("\n") else text.split("\n") if text else []


def joined(lines: Sequence[str], encoding: str = BYTES) -> bytes:
    return "".join(line + "\n" for line in lines).encode(encoding, errors="surrogateescape")


def cut(line: str, *fields: int) -> str:
    """`cut -f` of a tab-separated line (1-based fields); a line without a tab whole, as cut does."""
    if "\t" not in line:
        return line
    parts = line.split("\t")
    return "\t".join(parts[f - 1] for f in fields if f <= len(parts))


def _by_line(data: bytes, change: Callable[[str], str]) -> bytes:
    return joined([change(line) for line in lines_of(data)])
