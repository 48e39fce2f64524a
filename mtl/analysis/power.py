"""`just plan-seeds`: how many seeds per arm a study needs to detect a difference, from a pilot.

    just plan-seeds runs/sweeps/pilot difference=2 report=transfer-fast

The pilot is run folders or a sweep folder whose runs `just compare` would read: seeds of one
configuration, or of several. Per transfer task it measures what the verdicts' variance is made
of (mtl/analysis/significance.py): the variance between seeds of one configuration (pooled over
the pilot's configurations, each with its seeds' degrees of freedom) and, where the pilot has two
configurations or more, the paired test items' variance of a difference that no seed count
removes. Then, for two arms of K seeds each (or K against `baseline_seeds`), the power of `just
compare`'s two-sided test at `confidence`, Bonferroni over `family` comparisons (Holm's first step:
a floor on its power), is simulated with the test itself: its standard error and its guarded
degrees of freedom. The plan is the smallest K with at least `power`; 90% beside it.

A pilot of 3 seeds knows its seed variance to within a factor of several, so the plan gives two
numbers: K at the pilot's estimate, and K if the seed variance is at its one-sided 80% upper
confidence bound (chi-square). A study warns when its seeds are fewer than the estimate's K
(`plan=<plan-seeds.json>` on versus-single and mixture-search).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
from pydantic import Field

from mtl.analysis import significance
from mtl.config import AtLeast0, Range, apply_overrides, paths_and_keys
from mtl.errors import UserError
from mtl.files import atomic, jsonfile, schemas
from mtl.files.schemas import Record
from mtl.runs import Run, beside, differing_keys, find_runs


class SeedPlan(Record):
    """plan-seeds-<time>.json (`just plan-seeds`): the seeds per arm each transfer task needs
    (None: more than `most`), read back by a study's plan= to warn when it has fewer."""

    seeds: dict[str, Annotated[int, Field(ge=2)] | None] = Field(min_length=1)
    most: Annotated[int, Field(ge=2)]


UPPER_BOUND = 0.8  # the one-sided confidence of the seed variance's upper bound


@dataclass
class PlanSeedsConfig:
    difference: str = (
        "2"  # the difference to detect: points (2: 2 points of accuracy, or r x 100), or seed sds (2sd)
    )
    power: Annotated[float, Range(0.5, 0.99)] = 0.8  # the chance of a verdict when the difference is real
    confidence: Annotated[float, Range(0.5, 0.999)] = 0.95  # of the verdicts (as just compare's)
    family: AtLeast0 = 0  # comparisons the study corrects together; 0: the pilot's transfer tasks
    report: str = "transfer"  # which transfer report of each run (transfer-fast, ...)
    resamples: Annotated[int, Range(100)] = 1000  # paired item resamples (the items' variance)
    most: Annotated[int, Range(2, 1000)] = 100  # the most seeds per arm tried
    baseline_seeds: AtLeast0 = (
        0  # seeds the other arm already has (a well-run baseline: 8); 0: as many as the new arm
    )
    seed: AtLeast0 = 0  # of the resampling
    out: str | None = None  # a .md file (and .json beside it); None: plan-seeds-<time>.md beside the runs


@dataclass
class TaskPlan:
    task: str
    seed_variance: float  # points^2: between seeds of one configuration (pooled)
    freedom: int  # its degrees of freedom (sum over configurations of seeds - 1)
    item_variance: float  # points^2: of a difference, from the paired items, no seed count removes
    difference: float  # points: what is to be detected
    seeds: int | None  # per arm, at the estimate; None: more than `most`
    seeds_if_upper: int | None  # per arm, the seed variance at its 80% upper bound
    compared_pairs: int  # the pilot's pairs of configurations the item variance is from (0: assumed 0)
    seeds_at_90: int | None = None  # per arm at 90% power (at the estimate)


DRAWS = 20_000  # simulated studies per power: a Monte Carlo sd of 0.3 points at 80%


def power(
    difference: float,
    seed_variance: float,
    item_variance: float,
    seeds: int,
    alpha: float,
    other_seeds: int | None = None,
) -> float:
    """The chance that `just compare`'s two-sided test at level `alpha` calls a real `difference`
    between an arm of `seeds` seeds and one of `other_seeds` (None: as many), simulated: the test
    itself (its standard error and guarded degrees of freedom, significance.guarded_df) on
    DRAWS studies whose seeds' means and variances are drawn as normal seeds give them (mean
    N(mu, v / K), variance v chi2(K - 1) / (K - 1)), the items' part known (its thousands of
    resamples). The noncentral t at Welch's largest df, used before, put 3 seeds at 46% where the
    test has 36% (issue 100). The draws are the same for every call (common random numbers), so
    power rises smoothly with the seeds."""
    from scipy import stats

    counts = (seeds, seeds if other_seeds is None else other_seeds)
    if seed_variance <= 0:  # items alone: a z test
        if item_variance <= 0:
            return 1.0 if difference else 0.0
        critical, shift = stats.norm.ppf(1 - alpha / 2), abs(difference) / math.sqrt(item_variance)
        return float(stats.norm.sf(critical - shift) + stats.norm.cdf(-critical - shift))
    rng = np.random.default_rng(0x5EED)
    observed = difference + math.sqrt(item_variance) * rng.standard_normal(DRAWS)
    parts = []
    for count in counts:
        observed = observed + (1 if not parts else -1) * math.sqrt(
            seed_variance / count
        ) * rng.standard_normal(DRAWS)
        variance = seed_variance * rng.chisquare(count - 1, DRAWS) / (count - 1)
        parts.append((variance / count, count - 1))
    se = np.sqrt(item_variance + parts[0][0] + parts[1][0])
    df = significance.guarded_df(item_variance, parts)
    p = 2 * stats.t.sf(np.abs(observed) / se, df)
    return float(np.mean(p <= alpha))


def seeds_needed(
    difference: float,
    seed_variance: float,
    item_variance: float,
    alpha: float,
    wanted: float,
    most: int,
    other_seeds: int | None = None,
) -> int | None:
    """The fewest seeds (2 at least: one seed has no seed variance) with `wanted` power, for both
    arms, or for one against `other_seeds`: doubling, then halving the gap (power rises with the
    seeds), so a plan of 100 asks for 14 simulations, not 99."""

    def enough(seeds: int) -> bool:
        return power(difference, seed_variance, item_variance, seeds, alpha, other_seeds) >= wanted

    if enough(2):
        return 2
    low, high = 2, 4  # low: not enough
    while not enough(min(high, most)):
        if high >= most:
            return None
        low, high = high, 2 * high
    high = min(high, most)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high


def upper_variance(variance: float, freedom: int) -> float:
    """The seed variance's one-sided UPPER_BOUND upper confidence bound (chi-square, `freedom` df)."""
    from scipy import stats

    return variance * freedom / float(stats.chi2.ppf(1 - UPPER_BOUND, freedom))


def pilot_encoders(folders: list[Path], report: str) -> list[significance.Encoder]:
    """The pilot's configurations, each with its seeds; runs that differ in their seed alone are
    one configuration (where `just compare` would set them against each other)."""
    encoders = significance.group_runs(folders, report)
    runs = [Run.read(folder) for folder in folders]
    if len(runs) > 1 and not differing_keys(runs, ignored=("run.seed",)):
        significance.check_distinct_seeds(runs)
        items: dict[str, list[significance.Items]] = {}
        for encoder in encoders:
            for task, per_seed in encoder.items.items():
                items.setdefault(task, []).extend(per_seed)
        run_tasks = [tasks for encoder in encoders for tasks in encoder.run_tasks]
        encoders = [significance.Encoder("pilot", folders, items, run_tasks=run_tasks)]
    if not any(len(encoder.runs) > 1 for encoder in encoders):
        raise UserError(
            "the pilot has one seed of each configuration: its seed variance is unknown; train 3 seeds "
            "(seeds=3) of one configuration at least"
        )
    return encoders


def task_variances(
    encoders: list[significance.Encoder], task: str, config: PlanSeedsConfig
) -> tuple[float, int, float, int]:
    """(seed variance, its df, item variance of a difference, pairs it is from) of `task`."""
    pooled, freedom = 0.0, 0
    for encoder in encoders:
        seeds = encoder.items.get(task, [])
        if len(seeds) > 1 and len(seeds) == len(encoder.runs):
            full = [
                float(significance.scores(i, significance.everything(significance.item_counts(i))))
                for i in seeds
            ]
            pooled += float(np.var(full, ddof=1)) * (len(full) - 1)
            freedom += len(full) - 1
    item_parts = []
    complete = [e for e in encoders if len(e.items.get(task, [])) == len(e.runs) > 1]
    for first, second in zip(complete, complete[1:], strict=False):
        compared = significance.compare_task(
            task,
            (first.name, first.items[task]),
            (second.name, second.items[task]),
            significance.SignificanceConfig(resamples=config.resamples, seed=config.seed),
        )
        first_full = significance.per_seed(first, task)
        second_full = significance.per_seed(second, task)
        seed_part = np.var(first_full, ddof=1) / len(first_full) + np.var(second_full, ddof=1) / len(
            second_full
        )
        item_parts.append(max(0.0, (compared.se or 0.0) ** 2 - float(seed_part)))
    item = float(np.median(item_parts)) if item_parts else 0.0
    return (pooled / freedom if freedom else math.nan), freedom, item, len(item_parts)


def plan(encoders: list[significance.Encoder], config: PlanSeedsConfig) -> list[TaskPlan]:
    tasks = [t for t in significance._all_tasks() if any(t in e.items for e in encoders)]
    family = config.family or len(tasks)
    alpha = (1 - config.confidence) / max(1, family)
    wanted = config.difference.strip().lower()
    in_sds = wanted.endswith("sd")
    try:
        amount = float(wanted.removesuffix("sd"))
    except ValueError:
        raise UserError(f"difference={config.difference}: give points (2) or seed sds (2sd)") from None
    if not amount > 0 or not math.isfinite(amount):
        raise UserError(f"difference={config.difference}: give a difference above 0 (2, or 2sd)")
    plans = []
    against = config.baseline_seeds or None
    if against == 1:
        raise UserError(
            "baseline_seeds=1: one seed has no seed variance to test with; give 2 or more (0: as many)"
        )
    for task in tasks:
        variance, freedom, item, pairs = task_variances(encoders, task, config)
        if not freedom:
            continue
        if not (math.isfinite(variance) and math.isfinite(item)):  # a plan from NaN is no plan
            raise UserError(
                f"{task}: the pilot's seed variance is not finite: check its runs' transfer scores"
            )
        difference = amount * math.sqrt(variance) if in_sds else amount
        plans.append(
            TaskPlan(
                task,
                variance,
                freedom,
                item,
                difference,
                seeds_needed(difference, variance, item, alpha, config.power, config.most, against),
                seeds_needed(
                    difference,
                    upper_variance(variance, freedom),
                    item,
                    alpha,
                    config.power,
                    config.most,
                    against,
                ),
                pairs,
                seeds_needed(difference, variance, item, alpha, 0.9, config.most, against),
            )
        )
    if not plans:
        raise UserError(
            "no transfer task has per-item results from two seeds of one configuration in the pilot"
        )
    return plans


def _seeds(count: int | None, most: int) -> str:
    return str(count) if count is not None else f"over {most}"


def markdown(plans: list[TaskPlan], config: PlanSeedsConfig, encoders: list[significance.Encoder]) -> str:
    family = config.family or len(plans)
    pilot = ", ".join(f"{e.name} ({len(e.runs)} seed{'s' * (len(e.runs) > 1)})" for e in encoders)
    wanted = config.difference.strip().lower()
    said = f"{wanted.removesuffix('sd')} seed sds" if wanted.endswith("sd") else f"{wanted} points"
    arms = (
        f"seeds of the new arm against a baseline of {config.baseline_seeds}"
        if config.baseline_seeds
        else "seeds per arm"
    )
    level = f"{100 * config.power:g}%"
    lines = [
        f"{arms[0].upper() + arms[1:]} to detect a difference of {said} at {100 * config.confidence:g}% "
        f"confidence, Bonferroni over {family} comparisons (report {config.report}; pilot: {pilot}); the power "
        "of just compare's own test, simulated (its guarded degrees of freedom included). Points: accuracy "
        "in %, Pearson r x 100.",
        "",
        f"| transfer task | seed sd | item sd of a difference | difference | {level} power | 90% power | "
        f"{level}, the seed sd at its {100 * UPPER_BOUND:g}% upper bound |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for p in plans:
        item = f"{math.sqrt(p.item_variance):.2f}" if p.compared_pairs else "0 (assumed)"
        if p.compared_pairs and math.sqrt(p.item_variance) < 0.005:  # what 0.00 would show
            item = "0.00 (within the seeds')"
        lines.append(
            f"| {p.task} | {math.sqrt(p.seed_variance):.2f} ({p.freedom} df) | {item} | {p.difference:.2f} | "
            f"{_seeds(p.seeds, config.most)} | {_seeds(p.seeds_at_90, config.most)} | "
            f"{_seeds(p.seeds_if_upper, config.most)} |"
        )
    needed = [p.seeds for p in plans]
    most = max((n for n in needed if n is not None), default=None)
    lines += [
        "",
        "The plan: "
        + (f"over {config.most} seeds for some task" if None in needed else f"{most} {arms}")
        + f" at {level} power (the most any task needs); a study with fewer warns (plan=<this .json>).",
    ]
    if any(p.compared_pairs and math.sqrt(p.item_variance) < 0.005 for p in plans):
        lines.append(
            "An item sd of 0.00 (within the seeds'): the paired items' variance of a difference came out no "
            "larger than what each seed's own item noise already adds to the seeds' spread, so nothing is "
            "left to count apart from the seeds; the plan rests on the seed variance alone."
        )
    if not any(p.compared_pairs for p in plans):
        lines.append(
            "The pilot has one configuration: the paired items' variance of a difference between two "
            "configurations is unknown and taken as 0, so these counts are a floor; a pilot of two "
            "configurations measures it."
        )
    lines.append(
        f"A pilot's seed variance is itself uncertain ({min(p.freedom for p in plans)} df): the last column "
        "is the count if the truth is at its upper bound; choose it when a missed effect is costly "
        "(RESULTS.md, `just bench-verdicts synthetic_only=true`, measures what plans from a 3-seed pilot reach)."
    )
    return "\n".join(lines) + "\n"


def read_plan(path: str) -> dict:
    """A plan-seeds .json, checked: {seeds: {task: K or None}, most: N}."""
    where = Path(path).expanduser()
    try:
        record = schemas.read_json(where, SeedPlan, "run `just plan-seeds` on the pilot again")
    except schemas.DamagedFile as error:
        raise UserError(f"plan={path}: {error}") from None
    if record is None:
        raise UserError(f"plan={path}: no such file; give the .json `just plan-seeds` wrote")
    return record


def warn_below(plan_path: str | None, seeds: int) -> str | None:
    """The warning a study says when its seeds per arm are fewer than a plan's, or None."""
    if not plan_path:
        return None
    record = read_plan(plan_path)
    short = {task: k for task, k in record["seeds"].items() if k is None or k > seeds}
    if not short:
        return None
    said = ", ".join(
        f"{task} {'over ' + str(record.get('most')) if k is None else k}" for task, k in short.items()
    )
    return (
        f"warning: {seeds} seed{'s' * (seeds > 1)} per arm is below the plan ({said} per arm, {plan_path}): "
        "a real difference of the planned size would often get no verdict"
    )


def command(args: Sequence[str]) -> None:
    paths, keys = paths_and_keys(args)
    config = apply_overrides(PlanSeedsConfig(), keys)
    if not paths:
        raise UserError("just plan-seeds needs a pilot: run folders or a sweep folder (seeds=3 at least)")
    folders = find_runs(paths, None)
    encoders = pilot_encoders(folders, config.report)
    plans = plan(encoders, config)
    text = markdown(plans, config, encoders)
    out = (
        Path(config.out).expanduser()
        if config.out
        else atomic.fresh_path(beside(folders), "plan-seeds", ".md")
    )
    record = {
        "config": config.__dict__,
        "pilot": {e.name: [str(r) for r in e.runs] for e in encoders},
        "tasks": [p.__dict__ for p in plans],
        "seeds": {p.task: p.seeds for p in plans},
        "most": config.most,
    }
    atomic.write_text(out, text, "seed plan")
    atomic.write_text(out.with_suffix(".json"), jsonfile.dumps(record, indent=2) + "\n", "seed plan")
    print(text + f"\nwritten to {out} and {out.with_suffix('.json')}")
