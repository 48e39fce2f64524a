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

from mtl.analysis import power, significance
from mtl.formats.comparison import EARLIER_METHOD
from mtl.studies import mixture

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


@dataclass(frozen=True)
class PowerCell:
    ratio: float  # the seeds' accuracy spread over the items' standard error
    pilot_seeds: int
    difference: float  # points planted: `sds` times the true seed sd
    trials: int
    planned: dict[str, list[int]]  # per basis (estimate, upper, true): each trial's seeds per arm
    detected: dict[str, int]  # per basis: studies at those seeds that called the planted difference

    def power(self, basis: str) -> float:
        return self.detected[basis] / self.trials


BASES = ("estimate", "upper", "true")  # the seed variance a plan is made from


def power_check(
    ratios: tuple[float, ...] = (0.5, 1.0, 2.5, 5.0),
    pilot_seeds: int = 3,
    trials: int = 200,
    sds: float = 2.0,
    items: int = 500,
    resamples: int = 400,
    seed: int = 0,
    most: int = 30,
) -> list[PowerCell]:
    """Does `just plan-seeds` give enough seeds? Per trial: a pilot of `pilot_seeds` seeds of one
    configuration, its plan (mtl/analysis/power.py) for a difference of `sds` true seed sds at 80%
    power, from the pilot's seed variance, from its 80% upper bound, and (a check of the formula)
    from the true one; then a study at each planned seed count with that difference planted in
    one arm, judged by `just compare`'s test: the share of studies that call it. The difference
    is planted exactly in expected accuracy (each seed's shift moved so the mean accuracy rises by
    it); a seed spread so wide that the difference would pass 99% accuracy is left out."""
    config = significance.SignificanceConfig(resamples=max(100, resamples))
    cells = []
    for ratio in ratios:
        rng = np.random.default_rng([seed, 0x90E7, int(ratio * 1000)])
        shift = seed_shift_sd(ratio, items)
        spread = math.sqrt(2 + shift**2)  # of d + b + e: the mean accuracy is Phi((moved - c) / spread)
        _, pool = _seeds_of(rng, rng.standard_normal(items), 400, shift, 0.0, 1)
        truth = float(np.var(pool, ddof=1))  # the true seed variance in points, from a large pool
        difference = sds * math.sqrt(truth)
        base = stats.norm.cdf(-THRESHOLD / spread)
        if base + difference / 100 >= 0.99:
            continue
        moved = THRESHOLD + spread * float(stats.norm.ppf(base + difference / 100))
        planned: dict[str, list[int]] = {basis: [] for basis in BASES}
        detected = dict.fromkeys(BASES, 0)
        for _ in range(trials):
            difficulty = rng.standard_normal(items)
            _, pilot = _seeds_of(rng, difficulty, pilot_seeds, shift, 0.0, 1)
            variance = float(np.var(pilot, ddof=1))
            variances = {
                "estimate": variance,
                "upper": power.upper_variance(variance, pilot_seeds - 1),
                "true": truth,
            }
            for basis, assumed in variances.items():
                count = power.seeds_needed(difference, assumed, 0.0, 0.05, 0.8, most) or most
                planned[basis].append(count)
                planted = np.repeat([0.0, moved], count)  # A's seeds, then B's: on the same resamples
                per_seed, full = _seeds_of(rng, difficulty, 2 * count, shift, planted, resamples)
                first = ("A", per_seed[:count], list(full[:count]))
                compared = significance.from_scores(
                    "T", first, ("B", per_seed[count:], list(full[count:])), config
                )
                detected[basis] += compared.p <= 0.05 and compared.difference < 0
        cells.append(PowerCell(ratio, pilot_seeds, difference, trials, planned, detected))
    return cells


def _seeds_of(
    rng: np.random.Generator,
    difficulty: np.ndarray,
    count: int,
    shift: float,
    planted: float | np.ndarray,
    resamples: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(count, resamples) accuracies in points of `count` seeds on shared resamples of these items,
    and (count,) on all of them; each seed's shift drawn with sd `shift` and moved by `planted`
    (one value, or one per seed)."""
    items = len(difficulty)
    shifts = rng.normal(np.reshape(planted, (-1, 1)), shift, size=(count, 1))
    correct = (difficulty + shifts + rng.standard_normal((count, items)) > THRESHOLD).astype(np.float32)
    indices = rng.integers(0, items, size=(resamples, items))
    return 100 * correct[:, indices].mean(axis=-1), 100 * correct.mean(axis=1)


def power_markdown(cells: list[PowerCell]) -> str:
    lines = [
        f"Seeds per arm planned by `just plan-seeds` for a difference of 2 true seed sds at 80% power, from "
        f"a pilot of {cells[0].pilot_seeds} seeds (its estimate, its 80% upper bound) and from the true seed "
        f"variance; the share of {cells[0].trials} studies at the planned seeds that call the planted "
        "difference (just compare's test, one task, 5%).",
        "",
        "| seed sd / item se | difference (points) | "
        + " | ".join(f"seeds from the {b} (median) | power" for b in BASES)
        + " |",
        "|---:|---:|" + "---:|---:|" * len(BASES),
    ]
    for c in cells:
        lines.append(
            f"| {c.ratio:g} | {c.difference:.2f} | "
            + " | ".join(f"{int(np.median(c.planned[b]))} | {100 * c.power(b):.1f}%" for b in BASES)
            + " |"
        )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Design:
    """Two arms as a study may have them: seed counts, each arm's seed spread (relative), and how
    seeds are drawn: normal, heavy-tailed (Student's t, 3 df, scaled to the same sd) or
    collapsing (each seed, with probability COLLAPSE, lands 6 sds low: a run that diverged)."""

    first_seeds: int
    second_seeds: int
    first_spread: float = 1.0  # relative: the noisier arm's seeds spread by the seed sd of `ratio`
    second_spread: float = 1.0
    seeds_drawn: str = "normal"

    @property
    def label(self) -> str:
        spread = (
            f", seed sd {self.first_spread:g}:{self.second_spread:g}"
            if self.first_spread != self.second_spread
            else ""
        )
        drawn = f", {self.seeds_drawn} seeds" if self.seeds_drawn != "normal" else ""
        return f"{self.first_seeds} v {self.second_seeds}{spread}{drawn}"


COLLAPSE = 0.15
# The designs issue 100 found plain Welch miscalibrated on, and the equal ones power is kept at.
DESIGNS = (
    Design(2, 8),
    Design(2, 6, 4.0, 1.0),
    Design(2, 6, 1.0, 4.0),
    Design(2, 5, seeds_drawn="collapsing"),
    Design(3, 8),
    Design(3, 8, 4.0, 1.0),
    Design(2, 8, seeds_drawn="heavy-tailed"),
    Design(3, 3),
    Design(5, 5),
    Design(3, 3, seeds_drawn="heavy-tailed"),
)


@dataclass(frozen=True)
class DesignCell:
    design: Design
    families: int
    false: dict[str, int]  # per test (guarded, welch): A/A families with any verdict
    detected: dict[str, int]  # per test: planted tasks called, of families x tasks
    tasks: int

    def size(self, test: str) -> float:
        return self.false[test] / self.families

    def power(self, test: str) -> float:
        return self.detected[test] / (self.families * self.tasks)


TESTS = {"guarded": None, "welch": 0.0}  # from_scores' guard: mtl's df, plain Satterthwaite's


def arms_grid(
    designs: tuple[Design, ...] = DESIGNS,
    families: int = 400,
    tasks: int = 3,
    ratio: float = 5.0,
    sds: float = 2.0,
    items: int = 500,
    resamples: int = 200,
    seed: int = 0,
) -> list[DesignCell]:
    """Per design: the share of A/A families (`tasks` tasks, Holm) with any verdict, and the share
    of tasks called when every task's first arm is `sds` seed sds better (its seeds' shifts moved
    by `sds` times the seed sd of `ratio`, the noisier arm's), for the guarded df and for plain Welch's on the same
    draws. Seeds dominate at the default ratio (5 item standard errors), where the df matter."""
    config = significance.SignificanceConfig(resamples=max(100, resamples))
    shift = seed_shift_sd(ratio, items)
    cells = []
    for design in designs:
        rng = np.random.default_rng([seed, design.first_seeds, design.second_seeds, len(cells)])
        false = dict.fromkeys(TESTS, 0)
        detected = dict.fromkeys(TESTS, 0)
        for _ in range(families):
            for planted, counts in ((0.0, false), (sds * shift, detected)):
                family: dict[str, list[significance.Comparison]] = {test: [] for test in TESTS}
                for task in range(tasks):
                    per_seed, full = _arms(rng, design, items, shift, planted, resamples)
                    k = design.first_seeds
                    first = (f"A{task}", per_seed[:k], list(full[:k]))
                    second = (f"B{task}", per_seed[k:], list(full[k:]))
                    for test, guard in TESTS.items():
                        family[test].append(
                            significance.from_scores(f"T{task}", first, second, config, guard)
                        )
                for test, comparisons in family.items():
                    significance.correct(comparisons)
                    called = [c.verdict != "no evidence" for c in comparisons]
                    counts[test] += any(called) if counts is false else sum(called)
        cells.append(DesignCell(design, families, false, detected, tasks))
    return cells


def _arms(
    rng: np.random.Generator, design: Design, items: int, shift: float, planted: float, resamples: int
) -> tuple[np.ndarray, np.ndarray]:
    """(K_A + K_B, resamples) accuracies in points on shared item resamples, and on all items: the
    first arm's seeds, then the second's, each seed's shift drawn as the design says."""
    difficulty = rng.standard_normal(items)
    shifts = []
    widest = max(design.first_spread, design.second_spread)  # the noisier arm's seed sd is `shift`
    for count, spread, moved in (
        (design.first_seeds, design.first_spread / widest, planted),
        (design.second_seeds, design.second_spread / widest, 0.0),
    ):
        if design.seeds_drawn == "heavy-tailed":
            drawn = rng.standard_t(3, size=count) / math.sqrt(3)  # t(3) has variance 3
        else:
            drawn = rng.standard_normal(count)
        if design.seeds_drawn == "collapsing":
            drawn = drawn - 6.0 * (rng.random(count) < COLLAPSE)
        shifts.append(moved + spread * shift * drawn)
    shifts_ = np.concatenate(shifts)[:, None]
    count = len(shifts_)
    correct = (difficulty + shifts_ + rng.standard_normal((count, items)) > THRESHOLD).astype(np.float32)
    indices = rng.integers(0, items, size=(resamples, items))
    return 100 * correct[:, indices].mean(axis=-1), 100 * correct.mean(axis=1)


def arms_markdown(cells: list[DesignCell]) -> str:
    """The designs' table: family-wise false verdicts and power, the guarded df beside Welch's."""
    first = cells[0]
    lines = [
        f"Arms of unequal seeds and spreads: {first.families} A/A families of {first.tasks} tasks a "
        "design (Holm, nominal 5%), and the share of tasks called when the first arm is 2 seed sds "
        "better; just compare's guarded degrees of freedom / plain Welch-Satterthwaite's, on the "
        "same draws.",
        "",
        "| arms | false verdicts (families) | power (tasks) |",
        "|---|---:|---:|",
    ]
    for c in cells:
        lines.append(
            f"| {c.design.label} | {100 * c.size('guarded'):.1f}% / {100 * c.size('welch'):.1f}% | "
            f"{100 * c.power('guarded'):.1f}% / {100 * c.power('welch'):.1f}% |"
        )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class AcrossCell:
    tasks: int
    seeds: int
    correlation: float  # of a seed's shift between tasks
    families: int
    false: int  # A/A pairs whose verdict across tasks is one


def across_grid(
    task_counts: tuple[int, ...] = (6, 10, 16),
    seeds: tuple[int, ...] = (3, 5),
    correlation: float = 0.6,
    families: int = 400,
    ratio: float = 2.5,
    items: int = 300,
    resamples: int = 200,
    seed: int = 0,
) -> list[AcrossCell]:
    """How often the verdict across tasks (significance.across_tasks) calls identical
    configurations different: A/A pairs of `seeds` seeds on `task_counts` tasks, each seed's
    shift correlated `correlation` between tasks (a good seed is good on most tasks, which tests
    that treat tasks as independent would miss)."""
    config = significance.SignificanceConfig(resamples=max(100, resamples))
    shift = seed_shift_sd(ratio, items)
    cells = []
    for count in seeds:
        for tasks in task_counts:
            rng = np.random.default_rng([seed, 0xAC, count, tasks])
            false = 0
            for _ in range(families):
                shared = rng.standard_normal((2 * count, 1))  # each seed's part common to every task
                own = rng.standard_normal((2 * count, tasks))
                shifts = shift * (math.sqrt(correlation) * shared + math.sqrt(1 - correlation) * own)
                scored, family = {}, []
                for task in range(tasks):
                    difficulty = rng.standard_normal(items)
                    noise = rng.standard_normal((2 * count, items))
                    correct = (difficulty + shifts[:, task : task + 1] + noise > THRESHOLD).astype(np.float32)
                    indices = rng.integers(0, items, size=(config.resamples, items))
                    per_seed = 100 * correct[:, indices].mean(axis=-1)
                    full = list(100 * correct.mean(axis=1))
                    name = f"T{task}"
                    family.append(
                        significance.from_scores(
                            name,
                            ("A", per_seed[:count], full[:count]),
                            ("B", per_seed[count:], full[count:]),
                            config,
                        )
                    )
                    scored[name] = (per_seed, full)
                significance.correct(family)
                mean = significance.across_tasks(("A", "B"), count, scored, family, config)
                false += mean is not None and mean.comparison.verdict != "no evidence"
            cells.append(AcrossCell(tasks, count, correlation, families, false))
    return cells


def across_markdown(cells: list[AcrossCell]) -> str:
    first = cells[0]
    lines = [
        f"The verdict across tasks on A/A pairs: {first.families} pairs a cell, each seed's shift "
        f"correlated {first.correlation:g} between tasks; the share called different (nominal 5%).",
        "",
        "| seeds per arm | " + " | ".join(f"{t} tasks" for t in sorted({c.tasks for c in cells})) + " |",
        "|---|" + "---:|" * len({c.tasks for c in cells}),
    ]
    for count in sorted({c.seeds for c in cells}):
        row = sorted((c for c in cells if c.seeds == count), key=lambda c: c.tasks)
        lines.append(f"| {count} | " + " | ".join(f"{100 * c.false / c.families:.1f}%" for c in row) + " |")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class PlanCell:
    seeds: int
    difference: float  # points planted
    printed: float  # the power plan-seeds prints for these seeds
    trials: int
    detected: int  # studies just compare called the planted difference in

    @property
    def measured(self) -> float:
        return self.detected / self.trials


def plan_check(
    counts: tuple[int, ...] = (3, 5, 8),
    ratio: float = 2.5,
    sds: float = 2.0,
    trials: int = 1000,
    items: int = 500,
    resamples: int = 200,
    seed: int = 0,
) -> list[PlanCell]:
    """Does the power `just plan-seeds` prints match what `just compare` then does? Per seed count,
    the printed power (mtl/analysis/power.py, at the true seed variance and the studies' own item
    variance) beside the share of `trials` synthetic studies (item-level seeds, `sds` true seed sds
    planted in one arm) that compare's test calls, one task at 5%."""
    config = significance.SignificanceConfig(resamples=max(100, resamples))
    rng = np.random.default_rng([seed, 0x91A7])
    shift = seed_shift_sd(ratio, items)
    spread = math.sqrt(2 + shift**2)
    # The arms sit symmetrically about 50% accuracy, where the probit bends alike on both sides:
    # at 75% the better arm's seeds would spread less, and the test would beat any plan made from
    # one variance.
    _, pool = _seeds_of(rng, rng.standard_normal(items), 400, shift, THRESHOLD, 1)
    difference = sds * math.sqrt(float(np.var(pool, ddof=1)))
    half = spread * float(stats.norm.ppf(0.5 + difference / 200))
    arms = (THRESHOLD - half, THRESHOLD + half)
    pools = [_seeds_of(rng, rng.standard_normal(items), 2000, shift, arm, 1)[1] for arm in arms]
    truth = float(np.mean([np.var(arm_pool, ddof=1) for arm_pool in pools]))
    cells = []
    for count in counts:
        detected, item_parts = 0, []
        for _ in range(trials):
            planted = np.repeat(arms, count)
            per_seed, full = _seeds_of(rng, rng.standard_normal(items), 2 * count, shift, planted, resamples)
            compared = significance.from_scores(
                "T",
                ("A", per_seed[:count], list(full[:count])),
                ("B", per_seed[count:], list(full[count:])),
                config,
            )
            detected += compared.p <= 0.05 and compared.difference < 0  # B's the better arm
            seed_part = (np.var(full[:count], ddof=1) + np.var(full[count:], ddof=1)) / count
            item_parts.append(max(0.0, (compared.se or 0.0) ** 2 - float(seed_part)))
        printed = power.power(difference, truth, float(np.median(item_parts)), count, 0.05)
        cells.append(PlanCell(count, difference, printed, trials, detected))
    return cells


def plan_markdown(cells: list[PlanCell]) -> str:
    lines = [
        f"The power `just plan-seeds` prints against the share of {cells[0].trials} synthetic studies "
        f"`just compare` calls (a difference of {cells[0].difference:.2f} points planted, one task, 5%).",
        "",
        "| seeds per arm | printed | measured |",
        "|---:|---:|---:|",
        *(f"| {c.seeds} | {100 * c.printed:.1f}% | {100 * c.measured:.1f}% |" for c in cells),
    ]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class GateCell:
    proxies: int
    searches: int
    passed_before: int  # pure-noise searches the gate passed before issue 100 (Spearman >= 0.3, error)
    passed_now: int  # ... with the permutation p as well


def gate_check(
    proxies: tuple[int, ...] = (8, 16),
    searches: int = 200,
    permutations: int = 99,
    tasks: int = 3,
    min_spearman: float = 0.3,
    seed: int = 0,
) -> list[GateCell]:
    """How often mixture-search's skill gate passes proxies whose scores are pure noise: mixtures
    drawn from a Dirichlet, scores independent of them, the gate as it was and as it is."""
    cells = []
    for count in proxies:
        rng = np.random.default_rng([seed, 0x6A7E, count])
        before = now = 0
        for search in range(searches):
            mixtures = rng.dirichlet(np.ones(tasks), count)
            scores = rng.normal(size=count)
            fitted = mixture.fit(mixtures, scores)
            before += mixture.skill(fitted, scores).enough(min_spearman)
            now += mixture.gated_skill(mixtures, scores, fitted, permutations, search).enough(min_spearman)
        cells.append(GateCell(count, searches, before, now))
    return cells


def gate_markdown(cells: list[GateCell]) -> str:
    lines = [
        "mixture-search's skill gate on pure noise (scores independent of the mixtures): the share of "
        "searches it passes, before (Spearman >= 0.3 and below a constant's error) and now (a "
        "permutation p <= 0.05 as well).",
        "",
        "| proxies | searches | passed before | passed now |",
        "|---:|---:|---:|---:|",
        *(
            f"| {c.proxies} | {c.searches} | {100 * c.passed_before / c.searches:.1f}% | "
            f"{100 * c.passed_now / c.searches:.1f}% |"
            for c in cells
        ),
    ]
    return "\n".join(lines) + "\n"
