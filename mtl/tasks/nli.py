"""`nli`: natural language inference on SNLI (Bowman et al. 2015), InferSent's training task.

(premise, hypothesis) -> entailment, neutral or contradiction, from the features
[u, v, |u-v|, u*v] of the two sentences' embeddings (InferSent, Section 3.1; Liu et al.
2018, Figure 1).
"""

from __future__ import annotations

import torch

from mtl.data.snli import load_snli
from mtl.data.texts import LabelledTexts
from mtl.models.heads import HeadRecipe
from mtl.tasks.base import Task
from mtl.tasks.configs import NLIConfig
from mtl.tasks.inputs import NLIInputs
from mtl.tasks.kinds import register


def pair_features(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.cat([u, v, (u - v).abs(), u * v], dim=-1)


# Pair classification: the recipe of every task of (sentence, sentence) -> class.
def pair_recipe(classes: int) -> HeadRecipe:
    return HeadRecipe(
        sentences=2,
        outputs=classes,
        features=pair_features,
        width=4,
        pairs=((0, 1),),
        calls=((0,), (1,)),
    )


@register
class NLI(NLIInputs, Task):
    config_class = NLIConfig
    display = "SNLI"
    fixed_index = 0
    recipe = pair_recipe(classes=3)
    config: NLIConfig

    @property
    def input_name(self) -> str:
        """`snli` for the built-in task (as runs recorded it); another NLI task's own name."""
        return "snli" if self.name == self.kind else self.name

    def load(self, split: str) -> LabelledTexts | None:
        names = {
            "train": self.config.train_split,
            "dev": self.config.dev_split,
            "test": self.config.test_split,
        }
        return load_snli(self.config.source, names[split], self.name, split) if names[split] else None
