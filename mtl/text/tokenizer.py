"""The one tokenizer of the project: spaCy's rule-based English tokenizer (no model)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

import spacy

from mtl.errors import UserError


class _Tokenizer:
    """Tokenizes a batch of texts, identical texts once; subclasses tokenize the distinct ones."""

    lowercase: bool

    def __call__(self, text: str) -> list[str]:
        return self.tokenize([text])[0]

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        unique = list(dict.fromkeys(texts))
        tokens = dict(zip(unique, self._tokenize_unique(unique), strict=True))
        return [tokens[text] for text in texts]

    def _tokenize_unique(self, texts: Sequence[str]) -> Iterable[list[str]]:
        raise NotImplementedError


class Tokenizer(_Tokenizer):
    """Batched spaCy tokenization; identical texts are tokenized once.

    Lowercasing is applied to the tokens, after tokenization, so spaCy's case-sensitive
    exceptions (e.g. "U.S.") still split the way they do on the original text.
    """

    def __init__(self, lowercase: bool = True, batch_size: int = 2000):
        self.lowercase = lowercase
        self.batch_size = batch_size
        self._spacy = _blank_english_tokenizer()

    @property
    def description(self) -> dict[str, object]:
        return {"tokenizer": f"spacy.blank('en') {spacy.__version__}", "lowercase": self.lowercase}

    def _tokenize_unique(self, texts: Sequence[str]) -> Iterable[list[str]]:
        for doc in self._spacy.pipe(texts, batch_size=self.batch_size):
            words = [token.text for token in doc if not token.is_space]
            yield [word.lower() for word in words] if self.lowercase else words


@functools.cache
def _blank_english_tokenizer():
    """spaCy's rule-based English tokenizer, built once per process (a quarter of a second each
    time): it keeps no state between texts, so every Tokenizer shares it."""
    return spacy.blank("en").tokenizer


class TreebankTokenizer(_Tokenizer):
    """Penn-Treebank conventions as the authors of Liu et al. (2018) tokenized ClassifSQuAD.

    NLTK's word tokenizer on the lowercased text (hyphenated words stay whole, "don't" is
    `do n't`), with its opening and closing quote tokens turned into `"` as their code did.
    NLTK's `word_tokenize` also splits sentences first (with a model file); questions and
    answers are single sentences, so this tokenizes each text whole.
    """

    def __init__(self, lowercase: bool = True):
        try:
            from nltk.tokenize import NLTKWordTokenizer
        except ImportError:
            raise UserError(
                "tokenizer=treebank needs NLTK: pip install 'mtl[paper]' (or pip install nltk)"
            ) from None
        import nltk

        self.lowercase = lowercase
        self._tokenizer = NLTKWordTokenizer()
        self._version = nltk.__version__

    @property
    def description(self) -> dict[str, object]:
        return {"tokenizer": f"nltk.NLTKWordTokenizer {self._version}", "lowercase": self.lowercase}

    def _tokenize_unique(self, texts: Sequence[str]) -> Iterable[list[str]]:
        for text in texts:
            text = text.lower() if self.lowercase else text  # before tokenizing, as the authors did
            yield [QUOTES.get(token, token) for token in self._tokenizer.tokenize(text)]


QUOTES = {"``": '"', "''": '"'}


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


def make_tokenizer(name: str, lowercase: bool = True) -> Tokenizer | TreebankTokenizer | WhitespaceTokenizer:
    if name not in TOKENIZERS:
        raise UserError(f"unknown tokenizer {name!r}: choose one of {', '.join(TOKENIZERS)}")
    return TOKENIZERS[name](lowercase=lowercase)
