"""The weighted bags of word vectors the seed papers' tables set encoders against, beside GloVe BoW:
`baseline=sif`, `baseline=glove-bow-idf`, `baseline=glove-positional` (`just transfer`).

- **SIF** (Arora, Liang, Ma 2017, "smooth inverse frequency"): each word weighted a/(a + p(w)),
  p(w) its unigram probability, then every embedding minus its projection on the first singular
  vector of the embeddings of the sentences encoded together. As the authors' code
  (PrincetonML/SIF): a = 1e-3, a word absent from the frequencies weighs 1, the weighted sum is
  divided by the sentence's word count (not the weights' sum), and the component is the first
  right singular vector of the uncentered matrix (their `TruncatedSVD`, not a centered PCA,
  although the paper says "principal component").
- **GloVe BoW IDF**: the average of the words' vectors weighted by inverse document frequency
  (scikit-learn's smooth idf, log((1 + N) / (1 + df)) + 1, each sentence a document).
- **GloVe positional encoding** (InferSent Table 4, from Sukhbaatar et al. 2015 Section 4.1):
  the sum of l_j * v_j over the sentence's words j = 1..J, with
  l_kj = (1 - j/J) - (k/d)(1 - 2j/J) for dimension k = 1..d, so word order reaches the vector.

Frequencies come from the sentences given to one `encode()` call (`word_frequencies=task`: the
transfer suite embeds each task's distinct sentences in one call, so SIF and IDF are fitted on
the task's own text), or from a file: `word count` lines (SIF's enwiki_vocab_min200.txt) or a
corpus of sentences, one per line. SIF's component is always fitted on the sentences encoded
together, as its authors fit it on the evaluation's sentences. Words without a vector are left
out, as glove-bow leaves them out.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from mtl.errors import UserError
from mtl.eval.configs import SIF_A, WEIGHTED_BASELINES
from mtl.eval.embeddings import checked_options, finished
from mtl.eval.encoder import checked_sentences
from mtl.text.coverage import Coverage
from mtl.text.tokenizer import Tokenizer
from mtl.text.vectors import lookup


@dataclass(frozen=True)
class WordStatistics:
    """How often each word occurs (`counts`) and in how many sentences (`documents`, None when
    only counts were given), over `sentences` sentences."""

    counts: Counter[str]
    documents: Counter[str] | None
    sentences: int

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @classmethod
    def of(cls, token_lists: Sequence[Sequence[str]]) -> WordStatistics:
        return cls(
            Counter(word for tokens in token_lists for word in tokens),
            Counter(word for tokens in token_lists for word in set(tokens)),
            len(token_lists),
        )


def read_frequencies(path: str | Path, tokenizer: Tokenizer) -> WordStatistics:
    """`word count` lines (every line two fields, the second a whole number), else a corpus of
    sentences, one per line, tokenized as the encoder tokenizes."""
    file = Path(path).expanduser()
    try:
        lines = [line for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(
            f"word_frequencies={path} cannot be read ({error}): give a file of `word count` lines or "
            "of sentences, or word_frequencies=task"
        ) from None
    if not lines:
        raise UserError(f"word_frequencies={path} is empty: give `word count` lines or sentences")
    fields = [line.split() for line in lines]
    # ASCII digits: str.isdigit() also takes `²` and other scripts' digits, which int() refuses
    if all(len(f) == 2 and f[1].isascii() and f[1].isdigit() for f in fields):
        counts = Counter({word.lower() if tokenizer.lowercase else word: 0 for word, _ in fields})
        for word, count in fields:
            counts[word.lower() if tokenizer.lowercase else word] += int(count)
        return WordStatistics(counts, None, 0)
    return WordStatistics.of(tokenizer.tokenize(lines))


def sif_weights(words: Sequence[str], statistics: WordStatistics, a: float = SIF_A) -> np.ndarray:
    """a / (a + p(w)) per word; 1 for a word the frequencies never saw (SIF's getWeight)."""
    total = statistics.total
    return np.array(
        [a / (a + statistics.counts[w] / total) if statistics.counts.get(w) else 1.0 for w in words],
        dtype=np.float64,
    )


def idf_weights(words: Sequence[str], statistics: WordStatistics) -> np.ndarray:
    """Smooth inverse document frequency, log((1 + N) / (1 + df(w))) + 1, as scikit-learn's."""
    if statistics.documents is None:
        raise UserError(
            "baseline=glove-bow-idf counts the sentences a word occurs in: word_frequencies= must be a "
            "corpus of sentences (or task), not `word count` lines"
        )
    n = statistics.sentences
    return np.array([math.log((1 + n) / (1 + statistics.documents[w])) + 1 for w in words], dtype=np.float64)


def position_weights(length: int, dim: int) -> np.ndarray:
    """(length, dim) l_kj = (1 - j/J) - (k/d)(1 - 2j/J), j and k counted from 1 (MemN2N's position encoding)."""
    j = np.arange(1, length + 1, dtype=np.float64)[:, None] / length
    k = np.arange(1, dim + 1, dtype=np.float64)[None, :] / dim
    return (1 - j) - k * (1 - 2 * j)


def without_first_component(embeddings: np.ndarray) -> np.ndarray:
    """Each row minus its projection on the first right singular vector of the (uncentered) matrix."""
    if len(embeddings) == 0 or not np.any(embeddings):
        return embeddings
    direction = np.linalg.svd(embeddings, full_matrices=False)[2][0]
    return embeddings - np.outer(embeddings @ direction, direction)


class WeightedBagOfWords:
    """A baseline with `encode()` as the transfer suite and `mtl.transfer` call it. Not a trained
    network: the embeddings are computed in numpy (float64, returned as float32)."""

    def __init__(
        self,
        name: str,
        vectors: str,
        tokenizer: Tokenizer,
        sif_a: float = SIF_A,
        word_frequencies: str = "task",
    ):
        if name not in WEIGHTED_BASELINES:
            raise UserError(
                f"unknown weighted baseline {name!r}: choose one of {', '.join(WEIGHTED_BASELINES)}"
            )
        if not sif_a > 0:
            raise UserError(f"sif_a={sif_a}: SIF's a is a positive smoothing weight (the authors': 1e-3)")
        self.kind, self.name, self.vectors, self.tokenizer = name, name, vectors, tokenizer
        self.sif_a = sif_a
        self.statistics = (
            None if word_frequencies == "task" else read_frequencies(word_frequencies, tokenizer)
        )
        if name == "glove-bow-idf" and self.statistics is not None:
            idf_weights([], self.statistics)  # a counts file: refused now, not after the first task
        self.dim = lookup(vectors, ["the", ","]).dim
        self.token_counts: Counter[str] = Counter()
        self.known: set[str] = set()
        self.truncated = 0

    @property
    def coverage(self) -> Coverage | None:
        if not self.token_counts:
            return None
        return Coverage.of([self.token_counts.elements()], self.known.__contains__, "the encoded sentences",
                           Path(self.vectors).name)  # fmt: skip

    def encode(
        self,
        sentences: str | Sequence[str],
        *,
        batch_size: int = 128,
        show_progress_bar: bool | None = None,
        normalize_embeddings: bool = False,
        truncate_dim: int | None = None,
        precision: str = "float32",
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
        pooling: str | None = None,
        progress: bool | None = None,
        output_value: str | None = "sentence_embedding",
    ) -> np.ndarray | torch.Tensor | list[torch.Tensor]:
        """(N, D) float32 embeddings in input order (one string: (D,)). SIF and IDF read their
        frequencies from these sentences unless `word_frequencies=` gave a file, and SIF removes
        the first singular direction of these sentences' embeddings: encode a task's sentences
        together, as its authors do."""
        if isinstance(sentences, str):
            return self.encode([sentences], normalize_embeddings=normalize_embeddings,
                               truncate_dim=truncate_dim, precision=precision)[0]  # fmt: skip
        if pooling is not None:
            raise UserError(
                f"pooling={pooling}: baseline={self.name} weighs word vectors its own way; leave pooling out"
            )
        checked_options(precision, truncate_dim, self.dim, output_value)
        if output_value != "sentence_embedding":
            raise UserError(
                f"encode(output_value={output_value!r}): baseline={self.name} has sentence embeddings only"
            )
        tokens = self.tokenizer.tokenize(checked_sentences(sentences))  # one-line errors, as encode()'s
        self.token_counts.update(word for words in tokens for word in words)
        found = lookup(self.vectors, {word for words in tokens for word in words})
        self.known |= set(found.words)
        row = {word: i for i, word in enumerate(found.words)}
        matrix = found.matrix.astype(np.float64)
        statistics = self.statistics or WordStatistics.of(tokens)
        out = np.zeros((len(tokens), self.dim), dtype=np.float64)
        for i, words in enumerate(tokens):
            known = [w for w in words if w in row]
            if not known:
                continue  # no word with a vector: zeros, as glove-bow
            vectors = matrix[[row[w] for w in known]]
            if self.kind == "sif":  # the authors divide by the word count, not the weights' sum
                out[i] = sif_weights(known, statistics, self.sif_a) @ vectors / len(known)
            elif self.kind == "glove-bow-idf":
                weights = idf_weights(known, statistics)
                out[i] = weights @ vectors / weights.sum()
            else:
                out[i] = (position_weights(len(known), self.dim) * vectors).sum(axis=0)
        if self.kind == "sif":
            out = without_first_component(out)
        return finished(
            torch.from_numpy(out.astype(np.float32)),
            normalize=normalize_embeddings,
            truncate_dim=truncate_dim,
            precision=precision,
            to_numpy=convert_to_numpy and not convert_to_tensor,
            to_tensor=convert_to_tensor,
        )

    def token_states(self, *_args, **_kwargs):
        raise UserError(f"baseline={self.name} has no token states: pooling=selfattn needs a trained encoder")
