"""`mnrl`: in-batch ranking (sentence-transformers' MultipleNegativesRankingLoss; Henderson et
al. 2017), by default over SNLI: each premise ranks its entailed hypothesis above every other
positive of the batch and every hard negative (the contradicted hypotheses).

Examples are (anchor, positive, negative) triples, or (anchor, positive) pairs with
`hard_negatives=false`; `in_batch_negatives=false` ranks each positive above its own provided
negative alone (no in-batch candidates, so none of them a false negative); the loss is the cross-entropy of `scale` times the cosine similarity
of the anchor with the batch's positives then negatives, the target being its own positive,
as in sentence-transformers. Ranks gather the candidates, so the loss is that of the whole
batch at any number of processes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from mtl.data.classifsquad import SPLIT_NAMES, load_classifsquad
from mtl.data.snli import LABELS, load_snli
from mtl.data.texts import LabelledTexts
from mtl.errors import UserError
from mtl.models.heads import InBatchScores, Widths
from mtl.runtime.distributed import gather_batch
from mtl.tasks.base import Task, at_least_fp32
from mtl.tasks.configs import RankingConfig, SquadRankingConfig
from mtl.tasks.inputs import RankingInputs, SquadRankingInputs
from mtl.tasks.kinds import register
from mtl.tasks.matryoshka import matryoshka_widths, over_widths
from mtl.text.unicode import decode_utf8, text_lines

ENTAILMENT, CONTRADICTION = LABELS.index("entailment"), LABELS.index("contradiction")


def snli_triples(pairs: LabelledTexts, hard_negatives: bool) -> LabelledTexts:
    """(premise, entailed, contradicted) for each entailed hypothesis of a premise that also has a
    contradicted one (the k-th entailment with the k-th contradiction, cycling); without
    `hard_negatives`, (premise, entailed) for every entailed hypothesis."""
    entailed: dict[str, list[str]] = {}
    contradicted: dict[str, list[str]] = {}
    for premise, hypothesis, label in zip(*pairs.columns, pairs.labels, strict=True):
        if label == ENTAILMENT:
            entailed.setdefault(premise, []).append(hypothesis)
        elif label == CONTRADICTION:
            contradicted.setdefault(premise, []).append(hypothesis)
    columns: list[list[str]] = [[], [], []] if hard_negatives else [[], []]
    for premise, positives in entailed.items():
        negatives = contradicted.get(premise, [])
        if hard_negatives and not negatives:
            continue
        for k, positive in enumerate(positives):
            columns[0].append(premise)
            columns[1].append(positive)
            if hard_negatives:
                columns[2].append(negatives[k % len(negatives)])
    return LabelledTexts(columns, [0] * len(columns[0]))


def classifsquad_triples(pairs: LabelledTexts, hard_negatives: bool) -> LabelledTexts:
    """(question, correct answer, wrong answer) for each question of ClassifSQuAD pairs, the wrong
    answer its first pair's (the build's seeded order); without `hard_negatives`, (question,
    correct answer). One row a question, as `snli_triples` keeps one a positive: a question in
    several rows would be its own rows' false negatives."""
    correct: dict[str, str] = {}
    wrong: dict[str, str] = {}
    for question, first, second, label in zip(*pairs.columns, pairs.labels, strict=True):
        right, other = (first, second) if label == 1 else (second, first)
        correct.setdefault(question, right)
        wrong.setdefault(question, other)
    columns: list[list[str]] = [list(correct), list(correct.values())]
    if hard_negatives:
        columns.append([wrong[question] for question in correct])
    return LabelledTexts(columns, [0] * len(correct))


def snli_split(config, split: str) -> str | None:
    """The SNLI split name a task reading SNLI (mnrl, distill) sets for `split` (train, dev, test)."""
    return {"train": config.train_split, "dev": config.dev_split, "test": config.test_split}[split]


def read_triples(path: Path, task: str = "mnrl") -> LabelledTexts:
    """anchor<TAB>positive<TAB>negative lines (blank lines skipped) as three text columns."""
    columns: list[list[str]] = [[], [], []]
    for number, line in enumerate(text_lines(decode_utf8(path.read_bytes(), "triples file", path)), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3 or not all(f.strip() for f in fields):
            raise UserError(
                f"{task}.triples={path}: line {number} is not anchor<TAB>positive<TAB>negative "
                f"({len(fields)} fields): fix or regenerate the file"
            )
        for column, text in zip(columns, fields, strict=True):
            column.append(text.strip())
    if not columns[0]:
        raise UserError(f"{task}.triples={path} holds no triples")
    return LabelledTexts(columns, [0] * len(columns[0]))


class RankingHead(nn.Module):
    def __init__(self, scale: float, widths: Widths = ()):
        super().__init__()
        self.scale, self.widths = scale, widths

    def forward(self, encoder, sentences) -> InBatchScores:
        return self.score(self.embed(encoder, sentences))

    def embed(self, encoder, sentences) -> list[torch.Tensor]:
        """Each sentence column's (b, D) embeddings: anchors, positives, negatives."""
        return [at_least_fp32(encoder(tokens, lengths)) for tokens, lengths in sentences]

    def score(self, embeddings: list[torch.Tensor]) -> InBatchScores:
        """The batch's scores from its embeddings (GradCache calls the two halves apart)."""
        anchors, *others = embeddings
        gathered = [gather_batch(candidates) for candidates in others]  # positives, then negatives
        offset = gathered[0][1]
        candidates = torch.cat([candidates for candidates, _ in gathered])

        def scores(width: int | None) -> torch.Tensor:  # cosine similarities on the first `width` dims
            a, c = (nn.functional.normalize(x[:, :width], dim=-1) for x in (anchors, candidates))
            return self.scale * a @ c.T

        truncated = tuple((weight, scores(width)) for width, weight in self.widths if self.training)
        return InBatchScores(scores(None), offset, truncated)


@register
class Ranking(RankingInputs, Task):
    config_class = RankingConfig
    display = "SNLI ranking"
    in_batch = True
    anchors_positives = True
    metric = "recall_at_1"  # the anchor's own positive scores highest of the batch's candidates
    config: RankingConfig

    def mini_batch(self, config: RankingConfig) -> int | None:  # type: ignore[override]
        return config.mini_batch  # <task>.mini_batch=

    @property
    def source(self) -> str:
        return (
            f"{self.config.triples} ({self.config.provenance or 'triples'})"
            if self.config.triples
            else super().source
        )

    def load(self, split: str) -> LabelledTexts | None:
        if split == "train" and self.config.triples:
            triples = read_triples(self._triples_path(), self.name)
            return (
                triples if self.config.hard_negatives else LabelledTexts(triples.columns[:2], triples.labels)
            )
        name = snli_split(self.config, split)
        if not name:
            return None  # test_split= empty: no test (an empty train or dev split is refused by splits())
        triples = snli_triples(
            load_snli(self.config.source, name, self.name, split), self.config.hard_negatives
        )
        if not len(triples):
            raise UserError(
                f"{self.name}: SNLI {split} at {self.config.source} has no premise with both an entailed and a "
                f"contradicted hypothesis: set {self.name}.hard_negatives=false, or check the source"
            )
        return triples

    def head(self, encoder: nn.Module, hidden: int, layers: int, dropout: float) -> nn.Module:
        if not self.config.in_batch_negatives and not self.config.hard_negatives:
            raise UserError(
                f"{self.name}.in_batch_negatives=false ranks each positive above its provided negatives: "
                f"with {self.name}.hard_negatives=false there are none (the loss would be 0)"
            )
        if encoder.pair_model:
            raise UserError(f"{self.name}: ranking embeds sentences alone; encoder=decomposable cannot")
        return RankingHead(self.config.scale, matryoshka_widths(self.config, self.name, encoder.output_dim))

    def losses(self, outputs: InBatchScores, labels: torch.Tensor) -> torch.Tensor:
        """Training with matryoshka=: the weighted sum of the loss at each width (the full width
        only where listed, as sentence-transformers' MatryoshkaLoss); else the full width's. With
        in_batch_negatives=false, every candidate but the anchor's own is left out."""
        own = self._own(outputs, labels)
        kept = None if self.config.in_batch_negatives else self._own_candidates(outputs, labels)
        return over_widths(
            lambda logits: nn.functional.cross_entropy(
                logits if kept is None else logits.masked_fill(~kept, float("-inf")), own, reduction="none"
            ),
            outputs.logits,
            outputs.truncated,
        )

    def _own_candidates(self, outputs: InBatchScores, labels: torch.Tensor) -> torch.Tensor:
        """(b, candidates) True at each anchor's own positive and its own negative(s): the
        candidates are the batch's positives, then each negative column's, every block as long."""
        blocks = 2 if self.config.hard_negatives else 1
        block = outputs.logits.shape[1] // blocks
        rows = torch.arange(len(labels), device=outputs.logits.device)
        kept = torch.zeros_like(outputs.logits, dtype=torch.bool)
        for number in range(blocks):
            kept[rows, outputs.offset + rows + number * block] = True
        return kept

    def scores(self, outputs: InBatchScores, labels: torch.Tensor) -> torch.Tensor:
        return (outputs.logits.argmax(dim=1) == self._own(outputs, labels)).float()

    @staticmethod
    def _own(outputs: InBatchScores, labels: torch.Tensor) -> torch.Tensor:
        return outputs.offset + torch.arange(len(labels), device=outputs.logits.device)

    def bucket_key(self, lengths: np.ndarray) -> np.ndarray:
        return lengths.max(axis=1)


@register
class SquadRanking(SquadRankingInputs, Ranking):
    """`squad_ranking`: ClassifSQuAD's questions rank their correct answer above the batch's other
    answers (and a wrong answer from the same article), as `mnrl` ranks SNLI's entailments: a
    second in-batch source, another domain, for mixing with mnrl (`just study compare-batches`)."""

    config_class = SquadRankingConfig  # type: ignore[assignment]
    display = "ClassifSQuAD ranking"
    config: SquadRankingConfig  # type: ignore[assignment]

    @property
    def source(self) -> str:
        return str(self.config.source)

    def input_artifact(self) -> Path:
        return Path(self.config.source)

    def load(self, split: str) -> LabelledTexts | None:
        if split not in SPLIT_NAMES:  # SQuAD's test set is hidden: dev is the last word (as squad)
            return None
        pairs = load_classifsquad(self.config.source, SPLIT_NAMES[split])
        return classifsquad_triples(pairs, self.config.hard_negatives)
