"""Pearson's r and Spearman's rho with their two-sided p-values, as scipy.stats computes them.

The transfer command scores STS tasks and writes SentEval's results format with these; importing
scipy.stats for them costs 0.4-0.5 CPU-s, more than an STS task's whole scoring (issue 105: the
transfer command on STS14 alone cost more CPU than SentEval's process). The p-values take SciPy's
special functions (0.2 CPU-s less to import), when a report asks for them.
"""

from __future__ import annotations

import numpy as np


def correlation(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson's r along the last axis (float64; 0 where either side is constant)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    x = x - x.mean(axis=-1, keepdims=True)
    y = y - y.mean(axis=-1, keepdims=True)
    denominator = np.sqrt((x * x).sum(axis=-1) * (y * y).sum(axis=-1))
    return (x * y).sum(axis=-1) / np.where(denominator > 0, denominator, np.inf)


def rank_correlation(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho: Pearson's r of the two sides' ranks, ties given their average rank (as
    scipy.stats.spearmanr)."""
    return float(correlation(average_ranks(x), average_ranks(y)))


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of a 1-d array, tied values sharing the mean of their ranks (scipy.stats.rankdata)."""
    values = np.asarray(values).ravel()
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts_group = np.r_[True, ordered[1:] != ordered[:-1]]
    starts = np.flatnonzero(starts_group)
    sizes = np.diff(np.r_[starts, len(values)])
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = (starts + (sizes + 1) / 2)[np.cumsum(starts_group) - 1]
    return ranks


def correlation_p_value(r: float, count: int) -> float:
    """Two-sided p-value of Pearson's r over `count` pairs, as scipy.stats.pearsonr (the exact
    null distribution of r for normal data: a beta distribution on [-1, 1])."""
    from scipy import special

    if count < 3:
        return float("nan")
    half = count / 2 - 1
    return float(min(1.0, 2 * special.betainc(half, half, 0.5 * (1 - min(abs(r), 1.0)))))


def rank_correlation_p_value(rho: float, count: int) -> float:
    """Two-sided p-value of Spearman's rho over `count` pairs, as scipy.stats.spearmanr (Student's t
    with count - 2 degrees of freedom)."""
    from scipy import special

    if count < 3:
        return float("nan")
    if abs(rho) >= 1:
        return 0.0
    t = rho * np.sqrt((count - 2) / ((rho + 1) * (1 - rho)))
    return float(2 * special.stdtr(count - 2, -abs(t)))
