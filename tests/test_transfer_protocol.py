import numpy as np
import pytest

from mtl.eval.transfer.classifiers import (
    Protocol,
    cosine,
    cross_validated_accuracy,
    dev_tuned_accuracy,
    pair_features,
    relatedness,
    score_distribution,
    sts_scores,
    train_test_accuracy,
)

FAST = Protocol.fast()


def test_score_distribution_of_tai_et_al():
    np.testing.assert_allclose(
        score_distribution([3.6, 1.0, 5.0], 1.0, 5.0),
        [[0, 0, 0.4, 0.6, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 1]],
        atol=1e-12,
    )
    assert score_distribution([2.5], 0.0, 5.0).shape == (1, 6)


def test_cosine_and_pair_features():
    u, v = np.array([[1.0, 0.0], [1.0, 1.0]]), np.array([[0.0, 2.0], [2.0, 2.0]])
    np.testing.assert_allclose(cosine(u, v), [0.0, 1.0])
    assert pair_features(u[:1], v[:1]).tolist() == [[1, 0, 0, 2, 1, 2, 0, 0]]


def test_sts_scores_average_plain_and_weighted():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(40, 5)), rng.normal(size=(40, 5))
    gold = cosine(a, b) * 2 + 3  # a monotone map of the cosine: correlation 1
    reverse = -gold[:20]
    results = sts_scores({"same": (a, b, gold), "reversed": (a[:20], b[:20], reverse)})
    assert results["same/pearson"] == pytest.approx(1.0)
    assert results["reversed/spearman"] == pytest.approx(-1.0)
    assert results["all/pearson"] == pytest.approx(0.0)
    assert results["all/pearson_weighted"] == pytest.approx((40 - 20) / 60)


def separable(n=200, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = rng.normal(size=(n, 6)) + 3 * y[:, None]
    return x, y


def test_cross_validation_on_separable_and_random_labels():
    x, y = separable()
    assert cross_validated_accuracy(x, y, FAST) == pytest.approx(1.0, abs=0.02)
    noise = np.random.default_rng(1).integers(0, 2, 200)
    assert cross_validated_accuracy(x, noise, FAST) == pytest.approx(0.5, abs=0.12)


def test_train_test_and_dev_tuned_accuracy():
    x, y = separable(300)
    result = train_test_accuracy(x[:200], y[:200], x[200:], y[200:], FAST)
    assert result["acc"] > 0.97 and result["f1"] > 0.97
    tuned = dev_tuned_accuracy(x[:200], y[:200], x[200:250], y[200:250], x[250:], y[250:], FAST)
    assert tuned["acc"] > 0.97 and tuned["dev_acc"] > 0.97


def test_relatedness_recovers_a_linear_score():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(600, 8))
    scores = np.clip(3 + x[:, 0] - 0.5 * x[:, 1], 1, 5)
    result = relatedness(
        x[:400],
        scores[:400],
        x[400:500],
        scores[400:500],
        x[500:],
        scores[500:],
        (1.0, 5.0),
        Protocol(relatedness_epochs=60),
    )
    assert result["pearson"] > 0.9 and result["spearman"] > 0.85
