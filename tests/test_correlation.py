"""mtl's Pearson and Spearman (mtl/correlation.py) against scipy.stats, which they replace in the
transfer command (importing scipy.stats cost more than scoring an STS task)."""

import numpy as np
import pytest
from scipy import stats

from mtl.correlation import (
    average_ranks,
    correlation,
    correlation_p_value,
    rank_correlation,
    rank_correlation_p_value,
)


@pytest.mark.parametrize("count", [3, 5, 50, 3750])
def test_r_rho_and_their_p_values_are_scipys(count):
    rng = np.random.default_rng(count)
    gold = rng.integers(0, 6, count).astype(np.float64)  # STS gold scores: many ties
    predicted = (0.2 * gold + rng.normal(size=count)).astype(np.float32)  # cosines, float32
    pearson, spearman = stats.pearsonr(predicted, gold), stats.spearmanr(predicted, gold)
    r, rho = float(correlation(predicted, gold)), rank_correlation(predicted, gold)
    assert r == pytest.approx(pearson.statistic, abs=1e-14)
    assert rho == pytest.approx(spearman.statistic, abs=1e-14)
    assert correlation_p_value(r, count) == pytest.approx(pearson.pvalue, rel=1e-10, abs=1e-300)
    assert rank_correlation_p_value(rho, count) == pytest.approx(spearman.pvalue, rel=1e-10)


def test_tied_values_share_their_mean_rank():
    values = np.array([3.0, 1.0, 3.0, 2.0, 3.0, 1.0])
    assert average_ranks(values).tolist() == [5.0, 1.5, 5.0, 3.0, 5.0, 1.5]
    assert np.array_equal(average_ranks(values), stats.rankdata(values))


def test_a_constant_side_correlates_zero_and_proves_nothing():
    # scipy.stats answers NaN with a warning; a report holds finite numbers only
    assert correlation(np.ones(10), np.arange(10.0)) == 0.0
    assert correlation_p_value(0.0, 10) == pytest.approx(1.0)
    assert rank_correlation_p_value(1.0, 10) == 0.0


def test_rows_are_correlated_along_the_last_axis():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(4, 30)), rng.normal(size=(4, 30))
    expected = [stats.pearsonr(a, b).statistic for a, b in zip(x, y, strict=True)]
    assert correlation(x, y) == pytest.approx(expected, abs=1e-14)
