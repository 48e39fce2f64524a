"""How a run reads its text: the vectors file, tokenizer, case and sentence length every task's
data and an exported encoder share, and the size of a quick run's dev and test sets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mtl.config import AtLeast1


@dataclass
class DataConfig:
    vectors: str | None = None  # GloVe file; None: MTL_VECTORS, $MTL_DATA_DIR/glove, or download
    lowercase: bool = True  # lowercase tokens (GloVe 6B is uncased)
    tokenizer: Literal["spacy", "treebank"] = "spacy"  # treebank: as a classifsquad-paper build (mtl[paper])
    max_eval: AtLeast1 | None = None  # N dev examples per task, drawn at random (seeded; quick runs)
    sample_test: bool = False  # max_eval= samples test too; false: test is scored whole, once, at the end
    max_tokens: AtLeast1 = (
        512  # words per sentence (word encoders); longer ones are cut at read time, counted
    )
