"""`sts`: sentence-pair similarity regression (STS Benchmark, SICK-R) from files with named columns.

The head is sentence-transformers' CosineSimilarityLoss: the cosine of the two embeddings
regressed (mean squared error) onto the gold score scaled to [0, 1] by `low` and `high`.
Its metrics are of the whole split: Pearson's r (which picks the best checkpoint) and
Spearman's rho of the cosines against the gold scores, as SentEval reports STS.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy import stats
from torch import nn

from mtl.data.texts import LabelledTexts
from mtl.errors import UserError
from mtl.models.heads import AtWidths, Widths
from mtl.tasks.base import Task, at_least_fp32
from mtl.tasks.configs import STSConfig
from mtl.tasks.inputs import STSInputs
from mtl.tasks.kinds import register
from mtl.tasks.matryoshka import matryoshka_widths, over_widths
from mtl.tasks.pairs import read_rows, streamed_rows


class CosineHead(nn.Module):
    def __init__(self, widths: Widths = ()):
        super().__init__()
        self.widths = widths

    def forward(self, encoder, sentences) -> torch.Tensor | AtWidths:
        first, second = (at_least_fp32(encoder(tokens, lengths)) for tokens, lengths in sentences)

        def cosines(width: int | None) -> torch.Tensor:
            return nn.functional.cosine_similarity(first[:, :width], second[:, :width], dim=-1)

        if self.training and self.widths:
            return AtWidths(cosines(None), tuple((weight, cosines(width)) for width, weight in self.widths))
        return cosines(None)


@register
class STS(STSInputs, Task):
    config_class = STSConfig
    label_dtype = np.float32
    corpus_metric = True
    metric = "pearson"
    config: STSConfig

    def load(self, split: str) -> LabelledTexts | None:
        config = self.config
        name = {"train": config.train_file, "dev": config.dev, "test": config.test}[split]
        if not name:
            return None
        where = f"{config.source}/{name}"
        columns = (config.first, config.second, config.score)
        rows = read_rows(
            self.name, config.source, name, config.format, config.header, columns, config.subset,
            streamed_rows(config, split), split,
        )  # fmt: skip
        first, second, scores = [], [], []
        for row in rows:
            score = _score(row.values[config.score])
            if score is None:
                raise UserError(
                    f"{where} line {row.line} has score {row.values[config.score]!r}, not a finite number: "
                    f"fix it or set {self.name}.score="
                )
            if not config.low <= score <= config.high:
                raise UserError(
                    f"{where} line {row.line} has score {score:g}, outside {self.name}'s scale "
                    f"[{config.low:g}, {config.high:g}]: fix the line, or set {self.name}.low= and high= "
                    "to the file's scale (STS-B 0-5, SICK 1-5)"
                )
            first.append(str(row.values[config.first]))
            second.append(str(row.values[config.second]))
            scores.append((score - config.low) / (config.high - config.low))
        if not scores:
            raise UserError(f"{where} holds no rows")
        return LabelledTexts([first, second], scores)

    def head(self, encoder: nn.Module, hidden: int, layers: int, dropout: float) -> nn.Module:
        if encoder.pair_model:
            raise UserError(
                f"{self.name}: cosine similarity embeds sentences alone; encoder=decomposable cannot"
            )
        return CosineHead(matryoshka_widths(self.config, self.name, encoder.output_dim))

    def losses(self, outputs: torch.Tensor | AtWidths, labels: torch.Tensor) -> torch.Tensor:
        if isinstance(outputs, AtWidths):
            return over_widths(lambda cosines: (cosines - labels) ** 2, outputs.full, outputs.truncated)
        return (outputs - labels) ** 2

    def scores(self, outputs: torch.Tensor | AtWidths, labels: torch.Tensor) -> torch.Tensor:
        """Per example, what a training step logs: minus the squared error of the full width (a
        step's Pearson over a batch would be noise)."""
        full = outputs.full if isinstance(outputs, AtWidths) else outputs
        return -((full - labels) ** 2)

    def dev_metrics(self) -> tuple[str, ...]:
        return ("pearson", "spearman")

    def corpus_metrics(self, outputs: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        if np.std(outputs) == 0 or np.std(labels) == 0:
            return {"pearson": 0.0, "spearman": 0.0}  # undefined: a constant says nothing of the order
        return {
            "pearson": float(stats.pearsonr(outputs, labels)[0]),
            "spearman": float(stats.spearmanr(outputs, labels)[0]),
        }

    def bucket_key(self, lengths: np.ndarray) -> np.ndarray:
        return lengths.max(axis=1)


def _score(value: object) -> float | None:
    """A gold score as a finite float, or None (text that is no number, NaN, inf)."""
    try:
        score = float(value)
    except (TypeError, ValueError):
        return None
    return score if math.isfinite(score) else None
