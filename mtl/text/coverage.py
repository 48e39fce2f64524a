"""How much of a text collection the word vectors cover, said on every command.

A vectors file that shares few words with the data (another language, cased vs uncased)
would silently train on random vectors; a low share is a warning.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mtl.console import say

LOW_TOKEN_SHARE = 0.5  # GloVe covers ~99% of SNLI and SQuAD tokens; under half means the wrong file


@dataclass
class Coverage:
    label: str  # what was covered, e.g. "training data"
    source: str  # the vectors file
    words: int
    words_found: int
    tokens: int
    tokens_found: int

    @classmethod
    def of(cls, token_lists: Iterable[Sequence[str]], has_vector, label: str, source: str) -> Coverage:
        counts = Counter(token for tokens in token_lists for token in tokens)
        found = {word: n for word, n in counts.items() if has_vector(word)}
        return cls(label, source, len(counts), len(found), sum(counts.values()), sum(found.values()))

    @property
    def token_share(self) -> float:
        return self.tokens_found / self.tokens if self.tokens else 1.0

    def line(self) -> str:
        word_share = self.words_found / self.words if self.words else 1.0
        return (
            f"vocabulary coverage of {self.label}: {self.token_share:.1%} of tokens, {self.words_found:,} of "
            f"{self.words:,} distinct words ({word_share:.1%}) have a vector in {self.source}"
        )

    def warning(self) -> str | None:
        if self.token_share >= LOW_TOKEN_SHARE:
            return None
        return (
            f"warning: only {self.token_share:.1%} of the tokens of {self.label} have a vector in {self.source}: "
            "the rest get random vectors; is vectors= the right file (language, casing)?"
        )

    def report(self) -> None:
        print(self.line())
        if warning := self.warning():
            say(warning)  # escaped: it quotes a file's name
