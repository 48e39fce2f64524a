"""How often `just compare` calls identical configurations different, on synthetic seeds whose
variance is known: the calibration grid of `just bench-verdicts`.

Each synthetic seed k of a configuration predicts test item i correctly iff
d_i + b_k + e_ik > c: d_i the item's difficulty (shared by every seed, so paired items cancel
it), b_k the seed's shift (what training's seed does to the whole test set), e_ik item-by-seed
noise, all normal; c puts accuracy near 75%. Both groups of a comparison come from one
distribution, so every verdict is a false positive. The seed shift's spread is set so that the
seeds' accuracies spread by `ratio` times the items' standard error (0.5: items dominate, 10:
seeds do). A family is `tasks` independent such tasks compared at once and corrected by Holm,
as `just compare` corrects one pair's tasks: the family-wise rate is the share of families with
any verdict, which should lie near 1 - confidence.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from mtl.analysis import significance
from mtl.formats.comparison import EARLIER_METHOD

ACCURACY = 0.75
THRESHOLD = -math.sqrt(2) * stats.norm.ppf(ACCURACY)  # P(d + e > c) = ACCURACY with d, e ~ N(0, 1)


@dataclass(frozen=True)
class Cell:
    seeds: int  # K, per group
    ratio: float  # the seeds' accuracy spread over the items' standard error
    families: int
    false_families: int  # the studentized verdicts: families with any verdict
    false_families_bootstrap: int  # the same draws judged by the two-level bootstrap (before 2026-11-28)

    @property
    def rate(self) -> float:
        return self.false_families / self.families

    @property
    def bootstrap_rate(self) -> float:
        return self.false_families_bootstrap / self.families


def seed_shift_sd(ratio: float, items: int) -> float:
    """The spread of b_k that spreads a seed's accuracy by `ratio` item standard errors: accuracy
    moves by phi(z) / sqrt(2) per unit of b around z = Phi^-1(ACCURACY)."""
    item_se = math.sqrt(ACCURACY * (1 - ACCURACY) / items)
    slope = stats.norm.pdf(stats.norm.ppf(ACCURACY)) / math.sqrt(2)
    return ratio * item_se / slope


def grid(
    seeds: tuple[int, ...] = (2, 3, 5),
    ratios: tuple[float, ...] = (0.5, 1.0, 2.5, 5.0, 10.0),
    families: int = 400,
    tasks: int = 3,
    items: int = 500,
    resamples: int = 400,
    seed: int = 0,
    earlier: bool = True,
) -> list[Cell]:
    """Every (K, ratio) cell's family-wise false-positive count over `families` A/A families
    (`earlier`: the same draws judged by the two-level bootstrap too)."""
    config = significance.SignificanceConfig(resamples=max(100, resamples))
    cells = []
    for count in seeds:
        for ratio in ratios:
            rng = np.random.default_rng([seed, count, int(ratio * 1000)])
            shift = seed_shift_sd(ratio, items)
            false = false_bootstrap = 0
            for _ in range(families):
                studentized, bootstrapped = [], []
                for task in range(tasks):
                    per_seed, full = _seeds(rng, 2 * count, items, shift, resamples)
                    first = (f"A{task}", per_seed[:count], list(full[:count]))
                    second = (f"B{task}", per_seed[count:], list(full[count:]))
                    studentized.append(significance.from_scores(f"T{task}", first, second, config))
                    if earlier:
                        bootstrapped.append(_bootstrap(f"T{task}", first, second, config, rng))
                significance.correct(studentized)
                if earlier:
                    significance.correct(bootstrapped)
                false += any(c.verdict != "no evidence" for c in studentized)
                false_bootstrap += any(c.verdict != "no evidence" for c in bootstrapped)
            cells.append(Cell(count, ratio, families, false, false_bootstrap))
    return cells


def _seeds(
    rng: np.random.Generator, count: int, items: int, shift: float, resamples: int
) -> tuple[np.ndarray, np.ndarray]:
    """(count, resamples) accuracies in points on shared item resamples, and (count,) on all items."""
    difficulty = rng.standard_normal(items)
    shifts = rng.normal(0.0, shift, size=(count, 1))
    correct = (difficulty + shifts + rng.standard_normal((count, items)) > THRESHOLD).astype(np.float32)
    indices = rng.integers(0, items, size=(resamples, items))
    per_seed = 100 * correct[:, indices].mean(axis=-1)
    return per_seed, 100 * correct.mean(axis=1)


def _bootstrap(task, first, second, config, rng) -> significance.Comparison:  # noqa: ANN001
    """The comparison as mtl made it before 2026-11-28: seeds resampled (rescaled), then items,
    a percentile interval and a bootstrap p (the studentized one's fields otherwise)."""
    differences = significance.seeds_resampled(first[1], rng) - significance.seeds_resampled(second[1], rng)
    low, high = significance.interval(differences, 1 - config.confidence)
    return dataclasses.replace(
        significance.from_scores(task, first, second, config),
        low=low,
        high=high,
        p=significance.bootstrap_p(differences),
        differences=differences,
        se=None,
        method=EARLIER_METHOD,
    )


def markdown(cells: list[Cell], tasks: int) -> str:
    """The grid as a table: family-wise false-positive rates (nominal 5%), this method and the earlier one."""
    ratios = sorted({c.ratio for c in cells})
    lines = [
        f"Synthetic A/A families of {tasks} tasks (Holm), {cells[0].families} families a cell: the share "
        "with any verdict (nominal 5%). Studentized (now) / two-level bootstrap (before 2026-11-28).",
        "",
        "| seeds per group | " + " | ".join(f"seed sd = {r:g} item se" for r in ratios) + " |",
        "|---|" + "---:|" * len(ratios),
    ]
    for count in sorted({c.seeds for c in cells}):
        row = {c.ratio: c for c in cells if c.seeds == count}
        lines.append(
            f"| {count} | "
            + " | ".join(f"{100 * row[r].rate:.1f}% / {100 * row[r].bootstrap_rate:.1f}%" for r in ratios)
            + " |"
        )
    return "\n".join(lines) + "\n"
