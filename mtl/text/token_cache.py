"""A set of texts' tokens kept on disk (`$MTL_CACHE_DIR/tokens`), so that building ClassifSQuAD
again (other filters, scope, seed, or the tests' three builds) reads them instead of tokenizing
SQuAD's 176k questions and answers again (12 s with spaCy, 25-40 s with NLTK's treebank
tokenizer on 2 cores), and a training or transfer process reads a task's tokens that an earlier
one made (a sweep's members, a resume: 5.5 s of spaCy for SNLI's slice and dev/test sets).

An entry is named by the digest of what decides the tokens: the tokenizer and its library's
version (`description`), the source of mtl's tokenizer module (its post-processing: lowercasing,
dropped spaces, the authors' quotes) and every text, in order. It is plain JSON, read without
running anything; a damaged entry is tokenized again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import warnings
from collections.abc import Sequence
from pathlib import Path

from mtl.errors import UserError
from mtl.files.atomic import atomic_path
from mtl.files.paths import cache_dir
from mtl.text import tokenizer as tokenizer_module

FORMAT = 1


def cached_tokenize(tokenizer, texts: Sequence[str], processes: int = 1) -> list[list[str]]:
    """`tokenizer.tokenize(texts, processes)`, from the cache when these texts were tokenized so before."""
    entry = _entry(tokenizer, texts)
    if (tokens := read_entry(entry, len(texts))) is not None:
        return tokens
    tokens = tokenizer.tokenize(texts, processes=processes)
    _write(entry, tokens)
    return tokens


def _entry(tokenizer, texts: Sequence[str]) -> Path:
    digest = hashlib.sha256(f"{FORMAT}\0{json.dumps(tokenizer.description, sort_keys=True)}\0".encode())
    digest.update(_module_digest().encode())
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass") + b"\0")
    return cache_dir() / "tokens" / f"{digest.hexdigest()[:32]}.json"


@functools.cache
def _module_digest() -> str:
    return hashlib.sha256(Path(tokenizer_module.__file__).read_bytes()).hexdigest()


def read_entry(entry: Path, count: int) -> list[list[str]] | None:
    """The `count` token lists of a cache entry, or None when there is none or it is damaged (a miss)."""
    if not entry.is_file():
        return None
    try:
        tokens = json.loads(entry.read_text(encoding="utf-8"))
        if (
            not isinstance(tokens, list)
            or len(tokens) != count
            or not all(isinstance(t, list) and all(isinstance(w, str) for w in t) for t in tokens)
        ):
            raise ValueError(f"not {count} lists of tokens")
    except (
        OSError,
        ValueError,
        RecursionError,
    ) as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        warnings.warn(f"token cache entry {entry} is damaged ({error}): tokenizing again", stacklevel=3)
        return None
    return tokens


def _write(entry: Path, tokens: list[list[str]]) -> None:
    """Best effort: an unwritable cache folder or a full disk costs tokenizing again next time."""
    try:
        with atomic_path(entry, "token cache entry") as partial:
            partial.write_text(json.dumps(tokens, ensure_ascii=False), encoding="utf-8")
    except UserError as error:
        warnings.warn(
            f"{error}: continuing without the cache (set MTL_CACHE_DIR to a writable folder)", stacklevel=3
        )
