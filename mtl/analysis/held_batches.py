"""The noise floor of a run's mean affinity: the 95% interval over its held batches, the units the
measurements are repeated on (mtl/train/callbacks/affinity.py).

A measurement's value on held batch b is the run's affinity at that time (common to every batch),
plus the batch's own offset (the same at every measurement: the batches are drawn once), plus a
residual of that batch at that time: x(b, m) = mu(m) + beta(b) + gamma(b, m). The run's mean
averages mu over its measurements, so mu is the estimand, not noise; what the floor covers is
which batches were drawn (beta, over B units) and the residuals (gamma).

- Every batch at every measurement (the default): each batch's mean over the run is one unit,
  and the floor is the t interval of their mean, B - 1 degrees of freedom. Exact for normal
  offsets, whatever mu does.
- Some batches in turn (`affinity_each=k`, k >= 2, in a connected design: `held_in_turn`): a
  batch's mean is over some of the run's times only, so mu would enter the spread between
  batch means. The offsets are estimated within each measurement instead (the two-way additive
  model, fitted by least squares: the intrablock analysis of an incomplete block design), the
  two variances by moments (the offsets' floored at 0), and the floor is the t interval of the
  run's mean under them, with Satterthwaite's degrees of freedom. With every batch at every
  measurement this is the interval above. Its coverage, simulated from one real run's variances
  (RESULTS): 94-99% at 2 of 8 batches per measurement, 95-98% at 4.
- One batch per measurement (`affinity_each=1`), or batches never measured together: mu and the
  offsets cannot be told apart. The spread of the batch means still bounds the floor from
  above (mu's movement only widens it), and it is said to be a bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats


@dataclass
class Floor:
    half_width: np.ndarray  # the entries' shape: the 95% interval's half-width
    kind: str  # batches: every batch each time; design: some in turn; bound: an upper bound
    units: int  # the held batches it is over


def held_values(rows: list[dict[str, Any]]) -> list[tuple[list[int], np.ndarray]] | None:
    """Each measurement's held batch numbers and their values (k, ...): all of them in order, or
    those `held` names (affinity_each=); None when a line kept none or their shapes differ."""
    measured = []
    for row in rows:
        if row.get("per_batch") is None:
            return None
        values = np.array(row["per_batch"], dtype=float)
        measured.append(([int(b) for b in row.get("held") or range(len(values))], values))
    if len({values.shape[1:] for _, values in measured}) != 1:
        return None
    return measured


def batch_floor(rows: list[dict[str, Any]]) -> Floor | None:
    """The floor of the mean over `rows` (each measurement's matrix the mean of its held batches'),
    over the held batches; None with fewer than two batches or no per-batch values."""
    measured = held_values(rows)
    if measured is None:
        return None
    numbers = sorted({b for held, _ in measured for b in held})
    if len(numbers) < 2:
        return None
    if all(sorted(held) == numbers for held, _ in measured):
        return _over_batch_means(measured, numbers, "batches")
    return _in_turn(measured, numbers) or _over_batch_means(measured, numbers, "bound")


def _batch_means(measured: list[tuple[list[int], np.ndarray]], numbers: list[int]) -> np.ndarray:
    """(B, ...) each batch's mean over the measurements that took it."""
    taken: dict[int, list[np.ndarray]] = {b: [] for b in numbers}
    for held, values in measured:
        for b, value in zip(held, values, strict=True):
            taken[b].append(value)
    return np.stack([np.mean(taken[b], axis=0) for b in numbers])


def _t_interval(means: np.ndarray) -> np.ndarray:
    count = len(means)
    return stats.t.ppf(0.975, count - 1) * means.std(axis=0, ddof=1) / np.sqrt(count)


def _over_batch_means(measured: list[tuple[list[int], np.ndarray]], numbers: list[int], kind: str) -> Floor:
    """The t interval of the batch means: exact with every batch each time, else a bound."""
    return Floor(_t_interval(_batch_means(measured, numbers)), kind, len(numbers))


def _in_turn(measured: list[tuple[list[int], np.ndarray]], numbers: list[int]) -> Floor | None:
    """The two-way model's floor; None when the design cannot separate the batches' offsets from
    the measurements' times (not connected) or leaves no residual degrees of freedom."""
    count, position = len(numbers), {b: i for i, b in enumerate(numbers)}
    times = len(measured)
    shape = measured[0][1].shape[1:]
    information = np.zeros((count, count))  # C: the offsets' information within measurements
    adjusted = np.zeros((count, *shape))  # Q: each batch's values less its measurements' means
    within = np.zeros(shape)  # the spread within measurements
    weights = np.zeros(count)  # each batch's weight in the run's mean (a measurement's is 1 / M)
    residual_weight = 0.0  # the sum of the squared weights of the cells
    cells = 0
    for held, values in measured:
        taken = len(held)
        rows = [position[b] for b in held]
        indicator = np.zeros(count)
        indicator[rows] = 1.0
        information += np.diag(indicator) - np.outer(indicator, indicator) / taken
        centred = values - values.mean(axis=0)
        np.add.at(adjusted, rows, centred)
        within += np.square(centred).sum(axis=0)
        np.add.at(weights, rows, 1.0 / (times * taken))
        residual_weight += 1.0 / (times * times * taken)
        cells += taken
    degrees = cells - times - (count - 1)
    if degrees < 1 or np.linalg.matrix_rank(information) < count - 1:
        return None
    inverse = np.linalg.pinv(information)
    offsets = np.tensordot(inverse, adjusted, axes=1)  # beta, summing to 0
    residual = np.maximum(within - (offsets * adjusted).sum(axis=0), 0.0) / degrees  # gamma's variance
    spread = np.square(offsets).sum(axis=0) / (count - 1)  # B - 1 degrees of freedom
    # the run's mean's variance, between * sum(w_b^2) + residual * sum(w_bm^2), with the offsets'
    # variance by moments: between = spread - residual * trace(C+) / (B - 1), floored at 0
    by_spread = np.square(weights).sum()
    by_residual = residual_weight - by_spread * np.trace(inverse) / (count - 1)
    variance = by_spread * spread + by_residual * residual
    floored = spread * (count - 1) < residual * np.trace(inverse)
    variance = np.where(floored, residual * residual_weight, variance)
    # Satterthwaite's degrees of freedom for the combination (B - 1 with every batch each time)
    first, second = by_spread * spread, np.where(floored, residual * residual_weight, by_residual * residual)
    freedom = np.square(variance) / np.maximum(
        np.where(floored, 0.0, np.square(first) / (count - 1)) + np.square(second) / degrees, 1e-300
    )
    quantile = stats.t.ppf(0.975, np.clip(freedom, 1.0, None))
    return Floor(quantile * np.sqrt(variance), "design", count)
