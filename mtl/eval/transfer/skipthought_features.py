"""Skip-Thought's features beside the embeddings (Kiros et al. 2015; its code, ryankiros/skip-thoughts).

`features=skipthought-mrpc` (Section 3.3, "feats"; eval_msrp.py): a sentence pair's [|u - v|,
u * v] followed by Socher et al. (2011)'s six pair statistics on whitespace tokens: whether the
two sentences hold the same set of numbers, the same non-empty set, one set inside the other,
the share of A's distinct tokens found in B and of B's in A, and the mean of the two length
ratios. The authors' code tokenizes MRPC with NLTK's word_tokenize first; SentEval's MRPC
files are raw text, so mtl tokenizes them with its spaCy tokenizer, case kept.

`features=nb-bigram` (Section 3.5, "+ NB"; eval_classification.py and nbsvm.py, after Wang and
Manning 2012): the embedding followed by the sentence's unigram and bigram indicators, each
scaled by its log-count ratio r = log(p / q) between the two classes (counts plus 1, each
class's normalised). The ratios are counted on the training sentences of each fit only, inner
folds included, as the authors' nested cross-validation does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import sparse

from mtl.errors import UserError

NB_ALPHA = 1.0  # the counts' smoothing (nbsvm.py's alpha)


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def pair_statistics(a_tokens: Sequence[Sequence[str]], b_tokens: Sequence[Sequence[str]]) -> np.ndarray:
    """(N, 6) Socher et al.'s statistics of each pair of token lists, as eval_msrp.py's `feats`."""
    rows = []
    for a, b in zip(a_tokens, b_tokens, strict=True):
        numbers_a, numbers_b = {t for t in a if _is_number(t)}, {t for t in b if _is_number(t)}
        shared = len(set(a) & set(b))
        rows.append([
            float(numbers_a == numbers_b),
            float(numbers_a == numbers_b and len(numbers_a) > 0),
            float(numbers_a <= numbers_b or numbers_b <= numbers_a),
            shared / max(len(set(a)), 1),
            shared / max(len(set(b)), 1),
            0.5 * (len(a) / max(len(b), 1) + len(b) / max(len(a), 1)),
        ])  # fmt: skip
    return np.array(rows, dtype=np.float64).reshape(len(rows), 6)


def nb_features(
    train_texts: Sequence[str], train_labels: np.ndarray, others: Sequence[Sequence[str]]
) -> tuple[sparse.csr_matrix, list[sparse.csr_matrix]]:
    """NB-scaled unigram + bigram indicators of `train_texts` and of each text list in `others`,
    the ratios counted on the training texts (two classes) only."""
    from sklearn.feature_extraction.text import CountVectorizer

    classes = np.unique(train_labels)
    if len(classes) != 2:
        raise UserError(
            f"features=nb-bigram weighs words by two classes' counts: this task has {len(classes)}"
        )
    vectorizer = CountVectorizer(ngram_range=(1, 2), tokenizer=str.split, lowercase=False, token_pattern=None)
    counts = vectorizer.fit_transform(train_texts)  # (N, V) occurrences
    first = np.asarray(train_labels) == classes[0]
    p = NB_ALPHA + np.asarray(counts[first].sum(axis=0)).ravel()
    q = NB_ALPHA + np.asarray(counts[~first].sum(axis=0)).ravel()
    ratio = np.log((p / p.sum()) / (q / q.sum()))

    def scaled(matrix: sparse.spmatrix) -> sparse.csr_matrix:
        present = (matrix > 0).astype(np.float64)  # each n-gram once per sentence, as nbsvm.py
        return sparse.csr_matrix(present.multiply(ratio[None, :]))

    return scaled(counts), [scaled(vectorizer.transform(texts)) for texts in others]


def with_nb(
    x_train: np.ndarray,
    train_texts: Sequence[str],
    y_train: np.ndarray,
    tested: Sequence[tuple[np.ndarray, Sequence[str]]],
) -> tuple[sparse.csr_matrix, list[sparse.csr_matrix]]:
    """The embeddings of a fit's training set and of each (embeddings, texts) it is tested on, NB
    features appended (ratios from the training set)."""
    train_nb, others = nb_features(train_texts, y_train, [texts for _, texts in tested])
    return (
        sparse.hstack([sparse.csr_matrix(x_train), train_nb], format="csr"),
        [
            sparse.hstack([sparse.csr_matrix(x), nb], format="csr")
            for (x, _), nb in zip(tested, others, strict=True)
        ],
    )
