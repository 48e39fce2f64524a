"""A split of a sentence-pair or -triple task as parallel text columns and integer labels."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class LabelledTexts:
    columns: list[list[str]]  # one list per sentence position: (premise, hypothesis) or (question, a1, a2)
    labels: list[int]
    # A part of the split, not the whole (max_eval=): a seeded sample, or a corpus's first examples;
    # `whole` is the split a sample was drawn from (a run scores its test whole without reading it again)
    part: bool = False
    whole: LabelledTexts | None = None

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def drawn_from(self) -> int | None:
        """The whole split's size, where it is known (a sample's)."""
        return None if self.whole is None else len(self.whole)

    def head(self, count: int | None) -> LabelledTexts:
        """The first `count` examples (all when None)."""
        if count is None:
            return self
        return LabelledTexts([column[:count] for column in self.columns], self.labels[:count])

    def sample(self, count: int | None, seed: int) -> LabelledTexts:
        """`count` examples drawn at random (seeded), in their original order; all when None.

        Spread over the whole split: the first rows of ClassifSQuAD are a few questions of
        one article.
        """
        if count is None or count >= len(self):
            return self
        chosen = np.sort(np.random.default_rng(seed).choice(len(self), size=count, replace=False))
        return LabelledTexts(
            [[column[i] for i in chosen] for column in self.columns],
            [self.labels[i] for i in chosen],
            part=True,
            whole=self,
        )
