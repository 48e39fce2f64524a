"""The project's tokenizers: spaCy's rule-based English tokenizer (no model) by default, the
Penn-Treebank one the ClassifSQuAD authors used, and plain whitespace.

Each library is imported when a text is first tokenized, not when a tokenizer is made: a build
whose tokens are all in the token cache imports neither (spaCy brings torch: 2.6 s here).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import re
from collections.abc import Iterable, Sequence

from mtl.errors import UserError

PARALLEL_TEXTS = 20_000  # the default of `parallel_texts` (the treebank tokenizer's: 4,000 texts a second)


class _Tokenizer:
    """Tokenizes a batch of texts, identical texts once; subclasses tokenize the distinct ones."""

    name: str  # its key in TOKENIZERS
    lowercase: bool
    parallel_texts: int = PARALLEL_TEXTS  # distinct texts from which worker processes pay for their start

    def __call__(self, text: str) -> list[str]:
        return self.tokenize([text])[0]

    def tokenize(self, texts: Sequence[str], processes: int = 1) -> list[list[str]]:
        """Each text's tokens; `processes` > 1 splits many texts over that many worker processes
        (the same tokens, in the same order)."""
        unique = list(dict.fromkeys(texts))
        if processes > 1 and len(unique) >= self.parallel_texts:
            tokenized = _in_processes(self.name, self.lowercase, unique, processes)
        else:
            tokenized = self._tokenize_unique(unique)
        tokens = dict(zip(unique, tokenized, strict=True))
        return [tokens[text] for text in texts]

    def _tokenize_unique(self, texts: Sequence[str]) -> Iterable[list[str]]:
        raise NotImplementedError


class Tokenizer(_Tokenizer):
    """Batched spaCy tokenization; identical texts are tokenized once.

    Lowercasing is applied to the tokens, after tokenization, so spaCy's case-sensitive
    exceptions (e.g. "U.S.") still split the way they do on the original text.
    """

    # spaCy tokenizes ~13,000 texts a second: starting the workers (a process each, spaCy imported
    # in each) cost 4-5 s of wall time, more in CPU. In-process was faster at 20,000 texts (1.7 s
    # against 6.3 s) and at 80,000 (7.7 against 9.4), and tied at 160,000 (12.7 against 12.9;
    # 2026-12-02, 2 cores, the machine loaded): a build of 80,000 questions (~155,000 texts) stays
    # in one process, and its CPU grows with the questions without a step at 20,000.
    parallel_texts = 250_000

    def __init__(self, lowercase: bool = True, batch_size: int = 2000):
        self.lowercase = lowercase
        self.batch_size = batch_size

    @property
    def description(self) -> dict[str, object]:
        version = importlib.metadata.version("spacy")
        return {"tokenizer": f"spacy.blank('en') {version}", "lowercase": self.lowercase}

    def _tokenize_unique(self, texts: Sequence[str]) -> Iterable[list[str]]:
        for doc in _blank_english_tokenizer().pipe(texts, batch_size=self.batch_size):
            words = [token.text for token in doc if not token.is_space]
            yield [word.lower() for word in words] if self.lowercase else words


@functools.cache
def _blank_english_tokenizer():
    """spaCy's rule-based English tokenizer, built once per process (a quarter of a second each
    time): it keeps no state between texts, so every Tokenizer shares it."""
    import spacy

    return spacy.blank("en").tokenizer


class TreebankTokenizer(_Tokenizer):
    """Penn-Treebank conventions as the authors of Liu et al. (2018) tokenized ClassifSQuAD.

    NLTK's word tokenizer on the lowercased text (hyphenated words stay whole, "don't" is
    `do n't`), with its opening and closing quote tokens turned into `"` as their code did.
    NLTK's `word_tokenize` also splits sentences first (with a model file); questions and
    answers are single sentences, so this tokenizes each text whole.
    """

    def __init__(self, lowercase: bool = True):
        if importlib.util.find_spec("nltk") is None:
            raise UserError("tokenizer=treebank needs NLTK: pip install 'mtl[paper]' (or pip install nltk)")
        self.lowercase = lowercase

    @property
    def description(self) -> dict[str, object]:
        version = importlib.metadata.version("nltk")
        return {"tokenizer": f"nltk.NLTKWordTokenizer {version}", "lowercase": self.lowercase}

    def _tokenize_unique(self, texts: Sequence[str]) -> Iterable[list[str]]:
        tokenizer = treebank_tokenizer()
        for text in texts:
            text = text.lower() if self.lowercase else text  # before tokenizing, as the authors did
            yield [QUOTES.get(token, token) for token in tokenizer.tokenize(text)]


QUOTES = {"``": '"', "''": '"'}


@functools.cache
def treebank_tokenizer():
    """NLTK's word tokenizer with its own patterns, compiled by Python's `re`.

    NLTK 3.10.4 compiles every pattern with the `regex` engine and runs each substitution under a
    wall-clock timeout, a guard against patterns a caller supplies. This tokenizer's patterns are
    NLTK's fixed ones, which NLTK ran with `re` through 3.10.3: with `re` they give the same
    tokens (tested against NLTK's own on SQuAD's texts) 2.6x as fast (164 -> 63 us a text here).
    NLTK's own `tokenize` still applies them, in its order; a pattern `re` cannot compile (a
    later NLTK's) stays NLTK's.
    """
    from nltk.tokenize import NLTKWordTokenizer

    tokenizer = NLTKWordTokenizer()
    for name, value in vars(NLTKWordTokenizer).items():
        if name.isupper() and isinstance(value, list | tuple):
            setattr(tokenizer, name, _recompiled(value))
    return tokenizer


def _recompiled(rules):
    """`rules` (NLTK's compiled patterns, alone or in (pattern, substitution) pairs, in lists or a
    pair) with each pattern compiled by `re` when it can be."""
    if isinstance(rules, tuple | list):
        return type(rules)(_recompiled(rule) for rule in rules)
    if isinstance(rules, re.Pattern) or not hasattr(rules, "pattern"):
        return rules
    flags = _re_flags(rules.flags)
    try:
        return rules if flags is None else re.compile(rules.pattern, flags)
    except re.error:
        return rules


def _re_flags(regex_flags: int) -> int | None:
    """The `re` flags of a `regex` pattern's flags (the two modules number ASCII differently), or
    None when it holds one `re` lacks (its version 1 behaviour, full case folding, ...)."""
    import regex

    names = ("IGNORECASE", "LOCALE", "MULTILINE", "DOTALL", "UNICODE", "VERBOSE", "ASCII")
    flags, left = 0, regex_flags & ~regex.VERSION0  # version 0 is `re`'s behaviour
    for name in names:
        if left & getattr(regex, name):
            flags |= getattr(re, name)
            left &= ~getattr(regex, name)
    return None if left else flags


class WhitespaceTokenizer(_Tokenizer):
    """The text split on whitespace: what SentEval hands a batcher (its task files are already
    tokenized), so a baseline scored this way sees SentEval's own tokens."""

    def __init__(self, lowercase: bool = True):
        self.lowercase = lowercase

    @property
    def description(self) -> dict[str, object]:
        return {"tokenizer": "whitespace", "lowercase": self.lowercase}

    def _tokenize_unique(self, texts: Sequence[str]) -> Iterable[list[str]]:
        for text in texts:
            yield (text.lower() if self.lowercase else text).split()


TOKENIZERS = {"spacy": Tokenizer, "treebank": TreebankTokenizer, "whitespace": WhitespaceTokenizer}
for _name, _class in TOKENIZERS.items():
    _class.name = _name


def _in_processes(name: str, lowercase: bool, texts: list[str], processes: int) -> list[list[str]]:
    """`texts` tokenized by `processes` workers, in order (joblib's loky workers, as the transfer
    suite's: started clean rather than forked from a caller that may hold threads, and reused).
    A chunk's tokens come back as one string, SEPARATOR between tokens and TEXT_END after each
    text: a third of the time that pickling lists of lists takes; texts holding either
    character are tokenized here."""
    inline = [i for i, text in enumerate(texts) if SEPARATOR in text or TEXT_END in text]
    sent = [text for text in texts if SEPARATOR not in text and TEXT_END not in text]
    size = -(-len(sent) // (4 * processes))  # a few chunks per worker, so that none waits long for another
    chunks = [sent[i : i + size] for i in range(0, len(sent), size)]
    from joblib import Parallel, delayed

    parts = Parallel(n_jobs=processes)(delayed(_tokenize_chunk)(name, lowercase, chunk) for chunk in chunks)
    tokens = [text.split(SEPARATOR) if text else [] for part in parts for text in part.split(TEXT_END)[:-1]]
    for i in inline:  # back in their places
        tokens.insert(i, next(iter(make_tokenizer(name, lowercase)._tokenize_unique([texts[i]]))))
    return tokens


SEPARATOR, TEXT_END = "\x1f", "\x1e"  # ASCII's unit and record separators


def _tokenize_chunk(name: str, lowercase: bool, texts: list[str]) -> str:
    return "".join(
        SEPARATOR.join(tokens) + TEXT_END
        for tokens in make_tokenizer(name, lowercase)._tokenize_unique(texts)
    )


def make_tokenizer(name: str, lowercase: bool = True) -> Tokenizer | TreebankTokenizer | WhitespaceTokenizer:
    if name not in TOKENIZERS:
        raise UserError(f"unknown tokenizer {name!r}: choose one of {', '.join(TOKENIZERS)}")
    return TOKENIZERS[name](lowercase=lowercase)
