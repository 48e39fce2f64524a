"""`nli`: natural language inference on SNLI (Bowman et al. 2015), InferSent's training task.

(premise, hypothesis) -> entailment, neutral or contradiction, from the features
[u, v, |u-v|, u*v] of the two sentences' embeddings (InferSent, Section 3.1; Liu et al.
2018, Figure 1).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from mtl.config import AtLeast1
from mtl.data.snli import load_snli, resolve_snli_source
from mtl.data.texts import LabelledTexts
from mtl.models.heads import HeadRecipe
from mtl.tasks.base import Task, TaskConfig, register


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


@dataclass
class NLIConfig(TaskConfig):
    kind: str = "nli"
    steps: AtLeast1 = 1000  # NLI steps per block
    batch: AtLeast1 = 64  # NLI pairs per step
    source: str | None = None  # SNLI folder or Hub id; None: $MTL_DATA_DIR/snli, else stanfordnlp/snli
    train_split: str = "train"  # SNLI split to train on (train_small: the shared slice)
    dev_split: str = "dev"  # SNLI split that picks the best checkpoint
    test_split: str = (
        "test"  # SNLI split tested once, at the end; empty: none (MultiNLI's test is unlabelled)
    )
    display: str = ""  # the dataset's name in reports (a task file's: MultiNLI); empty: SNLI for nli


@register
class NLI(Task):
    kind = "nli"
    config_class = NLIConfig
    display = "SNLI"
    fixed_index = 0
    legacy_keys = {
        "schedule.steps_nli": "steps",
        "schedule.batch_nli": "batch",
        "data.max_nli_train": "max_train",
        "data.snli": "source",
        "data.nli_train_split": "train_split",
        "data.nli_dev_split": "dev_split",
        "data.nli_test_split": "test_split",
    }
    recipe = pair_recipe(classes=3)
    config: NLIConfig

    @property
    def input_name(self) -> str:
        """`snli` for the built-in task (as runs recorded it); another NLI task's own name."""
        return "snli" if self.name == self.kind else self.name

    def resolve_inputs(self) -> NLIConfig:
        return replace(self.config, source=resolve_snli_source(self.config.source))

    def load(self, split: str) -> LabelledTexts | None:
        names = {
            "train": self.config.train_split,
            "dev": self.config.dev_split,
            "test": self.config.test_split,
        }
        return load_snli(self.config.source, names[split]) if names[split] else None
