"""`squad`: ClassifSQuAD (Liu et al. 2018, Section 3), built from SQuAD v1.1 by `just build-classifsquad`.

(question, answer1, answer2) -> is answer1 the correct answer? From the features
[q, a1, a2, |q-a1|, q*a1, |q-a2|, q*a2]; pair models compare (q, a1) and (q, a2).
"""

from __future__ import annotations

from pathlib import Path

import torch

from mtl.data.classifsquad import SPLIT_NAMES, load_classifsquad
from mtl.data.texts import LabelledTexts
from mtl.models.heads import HeadRecipe
from mtl.tasks.base import Task
from mtl.tasks.configs import SquadConfig
from mtl.tasks.inputs import SquadInputs
from mtl.tasks.kinds import register


def triple_features(q: torch.Tensor, a1: torch.Tensor, a2: torch.Tensor) -> torch.Tensor:
    return torch.cat([q, a1, a2, (q - a1).abs(), q * a1, (q - a2).abs(), q * a2], dim=-1)


@register
class Squad(SquadInputs, Task):
    config_class = SquadConfig
    display = "ClassifSQuAD"
    fixed_index = 1
    recipe = HeadRecipe(
        sentences=3,
        outputs=2,
        features=triple_features,
        width=7,
        pairs=((0, 1), (0, 2)),
        calls=((0,), (1, 2)),
    )
    config: SquadConfig

    @property
    def input_name(self) -> str:
        return "classifsquad"

    def input_artifact(self) -> Path:
        return Path(self.config.source)  # the exact build that was loaded, by its content digest

    def load(self, split: str) -> LabelledTexts | None:
        return self.load_first(split, None)

    def load_first(self, split: str, count: int | None) -> LabelledTexts | None:
        if split not in SPLIT_NAMES:  # SQuAD's test set is hidden: dev is the last word
            return None
        return load_classifsquad(self.config.source, SPLIT_NAMES[split], first=count)
