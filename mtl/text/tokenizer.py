"""The one tokenizer of the project: spaCy's rule-based English tokenizer (no model)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import spacy


class Tokenizer:
    """Batched spaCy tokenization; identical texts are tokenized once.

    Lowercasing is applied to the tokens, after tokenization, so spaCy's case-sensitive
    exceptions (e.g. "U.S.") still split the way they do on the original text.
    """

    def __init__(self, lowercase: bool = True, batch_size: int = 2000):
        self.lowercase = lowercase
        self.batch_size = batch_size
        self._spacy = spacy.blank("en").tokenizer

    @property
    def description(self) -> dict[str, object]:
        return {"tokenizer": f"spacy.blank('en') {spacy.__version__}", "lowercase": self.lowercase}

    def __call__(self, text: str) -> list[str]:
        return self.tokenize([text])[0]

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        unique = list(dict.fromkeys(texts))
        tokens = dict(zip(unique, self._tokenize_unique(unique), strict=True))
        return [tokens[text] for text in texts]

    def _tokenize_unique(self, texts: Iterable[str]) -> Iterable[list[str]]:
        for doc in self._spacy.pipe(texts, batch_size=self.batch_size):
            words = [token.text for token in doc if not token.is_space]
            yield [word.lower() for word in words] if self.lowercase else words
