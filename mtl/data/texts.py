"""A split of a sentence-pair or -triple task as parallel text columns and integer labels."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LabelledTexts:
    columns: list[list[str]]  # one list per sentence position: (premise, hypothesis) or (question, a1, a2)
    labels: list[int]

    def __len__(self) -> int:
        return len(self.labels)

    def head(self, count: int | None) -> LabelledTexts:
        """The first `count` examples (all when None)."""
        if count is None:
            return self
        return LabelledTexts([column[:count] for column in self.columns], self.labels[:count])
