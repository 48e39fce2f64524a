"""`just compare`: is one encoder's transfer result really better than another's?

For each transfer task, the difference between encoders (or groups of runs that differ only
in their seed) with an interval and a verdict from one computation. Its variance has two
parts: which seeds training drew (often the larger: Reimers & Gurevych 2017) and which items
the test set holds (Koehn 2004; Berg-Kirkpatrick et al. 2012). The seed part is each group's
variance between its seeds' scores over its seed count, as Welch's test takes it; the item part
is the variance of the groups' difference over paired bootstrap resamples of the test items
(the same resampled items score every encoder, so what the test set happens to hold cancels
out), less what of it each seed's own item noise adds, which the seeds' variance already holds.
The difference over its standard error is referred to Student's t with Satterthwaite's degrees
of freedom, guarded where the arms have different seed counts (`guarded_df`): with 2 or 3 seeds
the seed variance is known to within a factor of several, and the t quantile widens the interval
by what that costs (a bootstrap over 2 seeds cannot see it, and called 9-18% of identical
configurations different where seeds dominate). Each replicate scores
the task's own metric: accuracy, Pearson r of the predicted relatedness, or the mean over STS
subsets of Pearson r of the cosine (each subset resampled on its own).

Several tasks compared at once are several tests: the verdicts are corrected over the tasks of
one pair of encoders (`family=all`: over every comparison of the table, as a study's are) by
Holm's step-down (family-wise error at 1 - confidence), and each task's
interval is at the level its step tested it (after the step-down stops, at the level it stopped
at), so an interval excludes 0 exactly when its verdict is one. A verdict: "A better" / "B
better", "no evidence" otherwise. With one seed in a group the variance between seeds is
unknown: its verdict says "(1 seed)" and speaks of these encoders, not of their
configurations. Differences are in points: percent for accuracy, r x 100. Comparisons made
before 2026-11-28 (a two-level bootstrap) say so in their `method`.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np

from mtl.config import AtLeast0, Range, apply_overrides, flattened, paths_and_keys
from mtl.errors import UserError
from mtl.eval.transfer.items import (  # noqa: F401  (pearson: its home before)
    Items,
    everything,
    item_counts,
    pearson,
    scores,
    seen_marks,
    short_subsets,
    without,
)
from mtl.files import atomic, jsonfile
from mtl.formats.comparison import METHOD, STUDENTIZED
from mtl.formats.merge_record import merge_record
from mtl.formats.transfer_report import ITEMS_SUFFIX, read_items, read_report, report_paths
from mtl.runs import Run, RunFolder, beside, differing_keys, find_runs, stale, wandb_group
from mtl.tracking.tracker import log_tables
from mtl.transfer_tasks.registry import TRANSFER_TASKS


@dataclass
class SignificanceConfig:
    report: str = (
        "transfer"  # which transfer report of each run: transfer, transfer-fast, transfer-fast-pool-mean, ...
    )
    resamples: Annotated[int, Range(100)] = (
        4000  # bootstrap replicates (Holm's smallest level needs thousands)
    )
    confidence: Annotated[float, Range(0.5, 0.999)] = 0.95  # of the interval and the verdict
    family: Literal["pair", "all"] = (
        "pair"  # Holm over each pair's tasks, or over every comparison of the table (a study's)
    )
    seed: AtLeast0 = 0  # of the resampling
    out: str | None = None  # a .md file (and .json beside it); None: compare-<time>.md beside the runs
    wandb: Literal["auto", "online", "offline", "disabled"] = (
        "auto"  # the table as a W&B run (job_type compare)
    )


@dataclass
class Comparison:
    task: str
    first: str
    second: str
    first_score: float  # points, on all the test items (mean over seeds)
    second_score: float
    low: float  # the interval of first - second, in points, at the comparison's level
    high: float
    first_seeds: int = 1
    second_seeds: int = 1
    first_deterministic: bool = False  # a baseline with nothing random in it: no seed variance to miss
    second_deterministic: bool = False
    p: float = 1.0  # two-sided bootstrap p-value of "no difference"
    holm_p: float | None = (
        None  # p corrected over the `family` tasks of this pair (Holm); None: not corrected
    )
    family: int = 1  # the tasks the correction is over
    confidence: float = 0.95
    differences: np.ndarray | None = field(default=None, repr=False)  # the replicates of first - second
    se: float | None = None  # the difference's standard error (seeds and items), points
    df: float = math.inf  # its degrees of freedom (guarded Satterthwaite; infinite: items alone)
    method: str = METHOD

    @property
    def difference(self) -> float:
        return self.first_score - self.second_score

    @property
    def seed_variance_known(self) -> bool:
        return (self.first_seeds > 1 or self.first_deterministic) and (
            self.second_seeds > 1 or self.second_deterministic
        )

    @property
    def verdict(self) -> str:
        return self.says(self.first, self.second)

    def says(self, first: str, second: str) -> str:
        """The verdict with the encoders called `first` and `second` (a table's A and B)."""
        decided = (
            (self.low > 0 or self.high < 0) if self.holm_p is None else self.holm_p <= 1 - self.confidence
        )
        if not decided:
            return "no evidence"
        ahead = first if self.difference > 0 else second
        return f"{ahead} better" if self.seed_variance_known else f"{ahead} ahead (1 seed)"

    def record(self) -> dict:
        """The comparison as the verdict file keeps it."""
        kept = {k: v for k, v in self.__dict__.items() if k != "differences"}
        return {**kept, "difference": self.difference, "verdict": self.verdict}


def resample(counts: dict[str, int] | int, resamples: int, rng: np.random.Generator):
    if isinstance(counts, dict):
        return {s: rng.integers(0, n, size=(resamples, n)) for s, n in sorted(counts.items())}
    return rng.integers(0, counts, size=(resamples, counts))


CHUNK = 500  # replicates resampled at once: (CHUNK, items) indices stay small for 10,000-item tasks


def compare_task(
    task: str,
    first: tuple[str, list[Items]],
    second: tuple[str, list[Items]],
    config: SignificanceConfig,
) -> Comparison:
    """`first` and `second`: a name and the task's items of each of its seeds. The interval at
    `config.confidence`, uncorrected (`correct` sets the family's)."""
    return scored_comparison(task, first, second, config)[0]


def scored_comparison(
    task: str,
    first: tuple[str, list[Items]],
    second: tuple[str, list[Items]],
    config: SignificanceConfig,
) -> tuple[Comparison, tuple[np.ndarray, list[float]]]:
    """`compare_task`, with the scores it was computed from (`task_scores`: both groups' seeds)."""
    (first_name, first_seeds), (second_name, second_seeds) = first, second
    counts = item_counts(first_seeds[0])
    for items in first_seeds + second_seeds:
        if item_counts(items) != counts or not _same_gold(items, first_seeds[0]):
            raise UserError(
                f"{task}: the runs were scored on different test items: evaluate them with the same "
                "transfer data and protocol (report=)"
            )
    per_seed, full = task_scores(task, first_seeds + second_seeds, config)
    comparison = from_scores(
        task,
        (first_name, per_seed[: len(first_seeds)], full[: len(first_seeds)]),
        (second_name, per_seed[len(first_seeds) :], full[len(first_seeds) :]),
        config,
    )
    return comparison, (per_seed, full)


def task_scores(task: str, seeds: list[Items], config: SignificanceConfig) -> tuple[np.ndarray, list[float]]:
    """Each seed's score on the task's shared item resamples ((K, B), drawn from the task's own
    generator: the same replicates for every pair) and on all its items (K values)."""
    rng = np.random.default_rng([config.seed, *task.encode()])
    full = everything(item_counts(seeds[0]))
    whole = [float(scores(i, full)) for i in seeds]
    if not all(math.isfinite(score) for score in whole):  # a NaN encoder's predictions: no verdict
        raise UserError(
            f"{task}: a compared run's score is not finite (its predictions hold NaN or inf): check its "
            "encoder (a merge that overflowed, a diverged run) and transfer it again"
        )
    return item_resampled_scores(seeds, config.resamples, rng), whole


def item_resampled_scores(seeds: list[Items], resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(K, B): each seed's score on the same B resamples of the test items (paired)."""
    counts = item_counts(seeds[0])
    chunks = []
    for start in range(0, resamples, CHUNK):
        indices = resample(counts, min(CHUNK, resamples - start), rng)
        chunks.append(np.stack([scores(items, indices) for items in seeds]))
    return np.concatenate(chunks, axis=1)


def from_scores(
    task: str,
    first: tuple[str, np.ndarray, list[float]],
    second: tuple[str, np.ndarray, list[float]],
    config: SignificanceConfig,
    guard: float | None = None,
) -> Comparison:
    """The comparison of two groups given each seed's scores on shared item resamples ((K, B))
    and on all the items (K values). `guard`: GUARD unless given (None); 0: plain Welch's df, which
    `just bench-verdicts` sets beside it."""
    (first_name, first_scores, first_full), (second_name, second_scores, second_full) = first, second
    difference = float(np.mean(first_full) - np.mean(second_full))
    se, df = standard_error(first_scores, first_full, second_scores, second_full, guard)
    p = t_p_value(difference, se, df)
    low, high = t_interval(difference, se, df, 1 - config.confidence)
    return Comparison(
        task,
        first_name,
        second_name,
        float(np.mean(first_full)),
        float(np.mean(second_full)),
        low,
        high,
        first_seeds=len(first_full),
        second_seeds=len(second_full),
        p=p,
        confidence=config.confidence,
        se=se,
        df=df,
    )


def from_seed_scores(
    task: str, first: tuple[str, list[float]], second: tuple[str, list[float]], config: SignificanceConfig
) -> Comparison | None:
    """The comparison of two groups known only by each seed's score (no per-item outputs: a
    training task's test score from its summary), by the same test with no item part, so its
    verdicts speak of this test set; None, no test, when a group has one seed: with neither
    items nor seeds to vary, no interval can be honest (before, such scores were tiled into
    identical "items", a variance of 0 that called every difference)."""
    if len(first[1]) < 2 or len(second[1]) < 2:
        return None
    constant = [np.tile(np.asarray(scores_, dtype=float)[:, None], (1, 2)) for _, scores_ in (first, second)]
    return from_scores(
        task,
        (first[0], constant[0], list(first[1])),
        (second[0], constant[1], list(second[1])),
        config,
    )


NO_TEST = "no test"  # a comparison with no variance to test with (`from_seed_scores`)


def standard_error(
    first_scores: np.ndarray,
    first_full: list[float],
    second_scores: np.ndarray,
    second_full: list[float],
    guard: float | None = None,
) -> tuple[float, float]:
    """(standard error, guarded degrees of freedom) of the difference of the groups' mean scores.
    Seeds: each group's variance between its seeds' whole-test-set scores over its seed count (a
    group of one seed has none to give). Items: the variance over the paired item resamples of the
    groups' mean difference, less each group's own item noise (the variance of its seeds'
    departures from their mean, over K - 1), which the seed part already counts."""
    item_part = float(np.var(first_scores.mean(axis=0) - second_scores.mean(axis=0), ddof=1))
    seed_parts = []
    for scores_, full in ((first_scores, first_full), (second_scores, second_full)):
        count = len(full)
        if count < 2:
            continue
        departures = scores_ - scores_.mean(axis=0)
        item_part -= float(departures.var(axis=1, ddof=1).mean()) / (count - 1)
        seed_parts.append((float(np.var(full, ddof=1)) / count, count - 1))
    variance = max(item_part, 0.0) + sum(part for part, _ in seed_parts)
    return math.sqrt(variance), guarded_df(max(item_part, 0.0), seed_parts, GUARD if guard is None else guard)


GUARD = 0.95  # the one-sided confidence of each arm's seed-variance bound in `guarded_df`


def guarded_df(item_part: float, seed_parts: list[tuple[float, int]], guard: float = GUARD) -> float:
    """Satterthwaite's degrees of freedom, each arm's seed variance (its part, its df) weighed
    at its one-sided GUARD upper confidence bound relative to the best-known arm's.

    Welch-Satterthwaite's df are estimated from the variances themselves: with 2 seeds against 8,
    whenever the 2 seeds happen to land close, the df jump toward the 8-seed arm's 7 exactly when
    the standard error is too small, and identical configurations are called different in 12-25%
    of families of three tasks (issue 100; plain SciPy's Welch: 9-11% a test). Hsu's df (fewest
    seeds - 1) hold the level but halve the power at 3 v 3. Weighing each seed part by
    (K - 1) / chi2_{1 - GUARD}(K - 1), over the smallest such factor of the two arms, leans the df
    toward the arm whose variance is least known, by how little it is known: at equal seed counts
    the factors are equal and cancel, so the df, and so the power, are Welch's exactly; at 2 v 8
    the 2 seeds' part counts 79 times, and the df go to about 1 unless those seeds are far
    quieter than the rest. The standard error is the estimate's, unchanged. Measured in
    `just bench-verdicts` (RESULTS.md): family-wise 0.5-4.8% at 2 v 5-8 and 3 v 8 with equal,
    4:1 either way, collapsing and heavy-tailed seeds. `guard` 0: plain Satterthwaite."""
    if not seed_parts:
        return math.inf
    factors = [freedom / _chi2_lower(freedom, guard) if guard else 1.0 for _, freedom in seed_parts]
    least = min(factors)
    guarded = [part * factor / least for (part, _), factor in zip(seed_parts, factors, strict=True)]
    denominator = sum(part**2 / freedom for part, (_, freedom) in zip(guarded, seed_parts, strict=True))
    if np.ndim(denominator):  # arrays of parts (plan-seeds' simulation): elementwise
        with np.errstate(divide="ignore", invalid="ignore"):
            df = (item_part + sum(guarded)) ** 2 / denominator
        return np.where(denominator > 0, df, np.inf)
    if denominator <= 0:
        return math.inf
    return (item_part + sum(guarded)) ** 2 / denominator


@functools.cache
def _chi2_lower(freedom: int, guard: float) -> float:
    from scipy import stats  # as in t_p_value

    return float(stats.chi2.ppf(1 - guard, freedom))


def t_p_value(difference: float, se: float, df: float) -> float:
    """Two-sided p of "no difference" under Student's t with `df` degrees of freedom."""
    from scipy import stats  # here: `just compare --help` stays free of SciPy (1.5 s to import)

    if se == 0:
        return 1.0 if difference == 0 else 0.0
    return float(min(1.0, 2 * stats.t.sf(abs(difference) / se, df)))


def t_interval(difference: float, se: float, df: float, alpha: float) -> tuple[float, float]:
    """The two-sided (1 - alpha) interval of the difference."""
    from scipy import stats  # as in t_p_value

    half = float(stats.t.ppf(1 - alpha / 2, df)) * se if se > 0 else 0.0
    return difference - half, difference + half


def seeds_resampled(per_seed: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(B,) a group's score on each item resample ((K, B) per seed), its seeds resampled too: the
    two-level bootstrap of comparisons made before 2026-11-28 (bench-verdicts sets it beside the
    studentized one)."""
    mean = per_seed.mean(axis=0)
    count = len(per_seed)
    if count == 1:
        return mean
    drawn = rng.integers(0, count, size=per_seed.shape)  # (K, B): seeds drawn per replicate
    resampled = np.take_along_axis(per_seed, drawn, axis=0).mean(axis=0)
    return mean + np.sqrt(count / (count - 1)) * (resampled - mean)


def bootstrap_p(differences: np.ndarray) -> float:
    """Two-sided p-value of "no difference": twice the smaller share of replicates on a side of 0
    (ties count on both), with the +1 of a Monte Carlo p-value (Davison & Hinkley 1997) so it is
    never 0."""
    count = len(differences)
    below = (np.count_nonzero(differences <= 0) + 1) / (count + 1)
    above = (np.count_nonzero(differences >= 0) + 1) / (count + 1)
    return float(min(1.0, 2 * min(below, above)))


def interval(differences: np.ndarray, alpha: float) -> tuple[float, float]:
    low, high = np.percentile(differences, [50 * alpha, 100 - 50 * alpha])
    return float(low), float(high)


def correct(family: list[Comparison]) -> None:
    """Holm's step-down over one pair's tasks: sorted by p, the r-th of m is tested at
    alpha / (m - r + 1) and testing stops at the first kept; each task's interval is set at the
    level its step used, and every task after the stop at the level it stopped at, so an interval
    excludes 0 exactly when its verdict is one; its p becomes Holm's adjusted p."""
    alpha = 1 - family[0].confidence if family else 0.05
    ordered = sorted(family, key=lambda c: c.p)
    running, stopped_at = 0.0, None
    for rank, comparison in enumerate(ordered):
        level = alpha / (len(family) - rank)
        running = max(running, min(1.0, comparison.p * (len(family) - rank)))
        comparison.holm_p, comparison.family = running, len(family)
        if stopped_at is None and comparison.p > level:
            stopped_at = level
        at = stopped_at if stopped_at is not None else level
        if comparison.se is not None:
            comparison.low, comparison.high = t_interval(
                comparison.difference, comparison.se, comparison.df, at
            )
        elif comparison.differences is not None:
            comparison.low, comparison.high = interval(comparison.differences, at)


def correct_study(records: list[dict]) -> bool:
    """Holm over every comparison a study draws its verdicts from (records as compare.json keeps
    them: a study's arms against each baseline, over every transfer task), in place: its holm_p,
    family and interval replaced as `correct` sets them. False, untouched, when a record predates
    the studentized method (its bootstrap replicates are not kept: its own pair's correction stands)."""
    if not records or any(r.get("se") is None or r.get("method") not in STUDENTIZED for r in records):
        return False
    family = [comparison_of(r) for r in records]
    correct(family)
    for record, comparison in zip(records, family, strict=True):
        record.update(
            holm_p=comparison.holm_p,
            family=comparison.family,
            low=comparison.low,
            high=comparison.high,
            verdict=comparison.verdict,
        )
    return True


def comparison_of(record: dict) -> Comparison:
    """A studentized comparison as compare.json keeps it, back as the Comparison that made it."""
    known = {f.name for f in dataclasses.fields(Comparison)}
    kept = {k: v for k, v in record.items() if k in known and k not in ("df", "differences")}
    return Comparison(**kept, df=_df(record.get("df")))


def _df(recorded: object) -> float:
    """Degrees of freedom as a record keeps them (infinite, items alone, is written null)."""
    return math.inf if recorded is None else float(recorded)  # type: ignore[arg-type]


def _same_gold(items: Items, reference: Items) -> bool:
    return all(np.array_equal(items[k], reference[k]) for k in items if k.endswith("gold"))


@dataclass
class Encoder:
    """One encoder: a run, or runs that differ only in their seed, or a baseline's report folder."""

    name: str
    runs: list[Path]
    items: dict[str, list[Items]]  # task -> per seed
    deterministic: bool = False  # a baseline with nothing random in it (glove-bow, sif, ...)
    baseline: bool = False  # a `just transfer baseline=` folder: no training run, so no ledger
    run_tasks: list[frozenset[str]] = field(default_factory=list)  # per run: the tasks it has items for


# Baselines whose embeddings hold nothing random: the same on every machine and seed.
DETERMINISTIC_BASELINES = ("glove-bow", "glove-bow-idf", "glove-positional", "sif")


def is_baseline_folder(folder: Path, report: str) -> bool:
    """A folder `just transfer baseline=...` wrote (runs/baseline-<name>): its report, no run."""
    return not RunFolder(folder).record.is_file() and (Path(folder) / f"{report}.json").is_file()


def baseline_encoder(folder: Path, report: str) -> Encoder:
    path = Path(folder) / f"{report}{ITEMS_SUFFIX}"
    if not path.is_file():
        raise UserError(
            f"{folder} has no per-item results for {report} ({path.name}): run its `just transfer "
            f"baseline=...` with the protocol of {report} again"
        )
    record = read_report(Path(folder) / f"{report}.json") or {}
    source = str(record.get("source", ""))
    items = {
        task: [arrays] for task, arrays in read_items(path, _all_tasks(), damaged_is_missing=False).items()
    }
    return Encoder(
        Path(folder).name,
        [Path(folder)],
        items,
        deterministic=source in DETERMINISTIC_BASELINES,
        baseline=True,
        run_tasks=[frozenset(items)],
    )


def seeds_of_merges(encoders: list[Encoder]) -> list[Encoder]:
    """Merged encoders (`just merge-encoders` folders) named `<arm>-seed<N>` as one encoder of
    those seeds, as the runs of a study's arm are; every other report folder stays its own. A
    merge is no baseline: it trained on its parents' data, and its items carry their ledgers' marks."""
    grouped: dict[str, Encoder] = {}
    for encoder in encoders:
        folder = encoder.runs[0]
        is_merge = is_merged_folder(folder)
        seeded = is_merge and re.fullmatch(r".+-seed\d+", folder.name)
        name = re.sub(r"-seed\d+$", "", folder.name) if seeded else encoder.name
        if name not in grouped:
            grouped[name] = Encoder(name, [], {}, encoder.deterministic, baseline=not is_merge)
        group = grouped[name]
        group.runs += encoder.runs
        group.run_tasks += encoder.run_tasks
        for task, seeds in encoder.items.items():
            group.items.setdefault(task, []).extend(seeds)
    return list(grouped.values())


def is_merged_folder(folder: Path) -> bool:
    """A folder `just merge-encoders` wrote (its encoder.json records the merge)."""
    return merge_record(Path(folder)) is not None


def group_runs(folders: list[Path], report: str) -> list[Encoder]:
    """Runs whose configs differ only in `run.seed` form one encoder, named by what sets it apart;
    a baseline's report folder is an encoder of its own, after them."""
    baselines = seeds_of_merges(
        [baseline_encoder(f, report) for f in folders if is_baseline_folder(f, report)]
    )
    folders = [f for f in folders if not is_baseline_folder(f, report)]
    if not folders:
        return baselines
    for folder in folders:  # reports of another protocol only (a baseline's transfer-fast): say which
        if not RunFolder(folder).record.is_file() and (others := report_paths(folder)):
            names = ", ".join(path.stem for path in others)
            raise UserError(
                f"{folder} holds transfer reports {names}, not {report}.json: give report={others[0].stem}"
            )
    runs = [Run.read(folder) for folder in folders]
    configs = [flattened(run.config) for run in runs]
    apart = sorted(differing_keys(runs, ignored=("run.seed",)))
    # Runs with other tasks differ in every key of the tasks one lacks: name them by their tasks.
    task_lists = [",".join(run.config["tasks"]) for run in runs]
    shared = set.intersection(*(set(run.config["tasks"]) for run in runs))
    if len(set(task_lists)) > 1:
        apart = [key for key in apart if not (key.startswith("tasks.") and key.split(".")[1] not in shared)]
    groups: dict[str, list[int]] = {}
    for index, config in enumerate(configs):
        # model.hidden=4 -> hidden=4, tasks.nli.steps=250 -> nli.steps=250: the key as typed
        keys = [f"{key.split('.', 1)[-1]}={short_value(config.get(key))}" for key in apart]
        label = (
            " ".join([f"tasks={task_lists[index]}"] * (len(set(task_lists)) > 1) + keys) or runs[index].name
        )
        groups.setdefault(label, []).append(index)
    if len(groups) == 1 and len(runs) > 1 and not apart:  # only seeds differ: nothing to compare but runs
        groups = {run.name: [i] for i, run in enumerate(runs)}
    encoders = []
    for label, members in groups.items():
        items: dict[str, list[Items]] = {}
        run_tasks = []
        for index in members:
            path = runs[index].folder / f"{report}{ITEMS_SUFFIX}"
            if not path.is_file() and report.startswith("transfer-mteb"):
                raise UserError(
                    f"report={report}: MTEB keeps no per-item outputs, so its scores cannot be "
                    "resampled; `just report` shows them beside the runs; compare a SentEval report"
                )
            if not path.is_file():
                raise UserError(
                    f"{runs[index].folder} has no per-item results for {report} ({path.name}): run "
                    f"`just transfer run={runs[index].folder}` with the protocol of {report} first "
                    "(reports of mode=senteval* or pooling=selfattn written by an older mtl keep none)"
                )
            found = read_items(path, _all_tasks(), damaged_is_missing=False)
            for task, arrays in found.items():
                items.setdefault(task, []).append(arrays)
            run_tasks.append(frozenset(found))
        check_distinct_seeds([runs[i] for i in members])
        encoders.append(Encoder(label, [runs[i].folder for i in members], items, run_tasks=run_tasks))
    return encoders + baselines


def check_distinct_seeds(runs: list[Run]) -> None:
    """Runs grouped as the seeds of one encoder must have been trained with different seeds: two
    runs of one seed are one sample twice, and would narrow the interval as if they were two."""
    seen: dict[Any, Run] = {}
    for run in runs:
        seed = run.config.get("run", {}).get("seed")
        if seed in seen:
            raise UserError(
                f"{shown(seen[seed].folder)} and {shown(run.folder)} were trained with the same seed ({seed}): "
                "they are one seed twice, not two seeds; compare one of them (or train another seed)"
            )
        seen[seed] = run


def missing_tasks(encoders: list[Encoder]) -> list[str]:
    """A line for each task some seeds of an encoder have per-item results for and others lack:
    it is left out of that encoder's comparisons, and said."""
    found = []
    for encoder in encoders:
        for task in sorted({t for tasks in encoder.run_tasks for t in tasks}):
            lacking = [
                shown(run)
                for run, tasks in zip(encoder.runs, encoder.run_tasks, strict=True)
                if task not in tasks
            ]
            if lacking:
                found.append(
                    f"{task} is left out for {encoder.name}: {', '.join(lacking)} "
                    f"{'lacks' if len(lacking) == 1 else 'lack'} it; transfer every seed with the same tasks"
                )
    return found


def stale_reports(encoders: list[Encoder], report: str) -> list[str]:
    """`<run>: <why>` for each run whose `report` did not evaluate its final encoder (a transfer
    run while it trained): its numbers are an early checkpoint's."""
    found = []
    for encoder in encoders:
        for folder in encoder.runs:
            path = Path(folder) / f"{report}.json"
            if (record := read_report(path)) is not None and (reason := stale(record, path, Path(folder))):
                found.append(f"{folder} ({report}): {reason}; run `just transfer run={folder}` again")
    return found


def _all_tasks() -> dict[str, None]:
    return dict.fromkeys(TRANSFER_TASKS)


UNSEEN = " unseen"  # `<task> unseen`: the task's test items no compared run trained on, a row of its own


SEEN = " seen"  # `<task> seen`: the items some compared run trained on (a leak against its control: memory)


def compared_tasks() -> list[str]:
    """The tasks in the registry's order, each followed by its rows without and with only the
    seen items."""
    return [name for task in TRANSFER_TASKS for name in (task, task + UNSEEN, task + SEEN)]


def is_part(task: str) -> bool:
    """A row of part of a task's items (`<task> unseen`, `<task> seen`), not the task itself."""
    return task.endswith((UNSEEN, SEEN))


def add_unseen(encoders: list[Encoder]) -> list[str]:
    """For each task some compared run trained on test items of (its ledger's marks in the items
    file), the items none of them did, as the task `<task> unseen` of every encoder that has the
    task: so the verdict on all items stands beside one no run's training can have inflated. Notes
    on what it did and could not do."""
    notes = []
    for task in _all_tasks():
        having = [encoder for encoder in encoders if task in encoder.items]
        # a baseline keeps no ledger (no training run of mtl's): it is scored on the runs' unseen items
        marks = [
            seen_marks(items) for encoder in having if not encoder.baseline for items in encoder.items[task]
        ]
        if len(having) < 2 or not any(m is not None and any(x.any() for x in m.values()) for m in marks):
            continue
        if any(m is None for m in marks):
            notes.append(
                f"{task}: a compared run trained on some of its test items, but not every run keeps marks "
                "of them (a ledger listing its seen sentences, and `just transfer` since): no row without them"
            )
            continue
        shapes = {prefix: mark.shape for prefix, mark in marks[0].items()}
        if any({p: m.shape for p, m in found.items()} != shapes for found in marks if found is not None):
            continue  # different test items: compare_task says so for the task itself
        dropped = {
            prefix: np.logical_or.reduce([m[prefix] for m in marks if m is not None]) for prefix in shapes
        }
        restricted = {
            encoder.name: [without(items, dropped) for items in encoder.items[task]] for encoder in having
        }
        if any(kept is None for kept_seeds in restricted.values() for kept in kept_seeds):
            notes.append(
                f"{task}: too few test items hold no sentence a compared run trained on: no row without them"
            )
            continue
        for encoder in having:
            encoder.items[task + UNSEEN] = restricted[encoder.name]  # type: ignore[assignment]
        # The seen items alone: a run that trained on them against a control that trained on as
        # much of the task's domain but none of its test items (a leak against its control)
        # differs there by what it memorised, where on the unseen items it differs by the domain.
        short = short_subsets(having[0].items[task][0], dropped)
        kept = [prefix for prefix in dropped if prefix not in short]
        total = sum(len(d) for d in dropped.values())
        left = sum(int((~dropped[prefix]).sum()) for prefix in kept)
        without_short = f"; subsets left out, too few unseen items: {', '.join(short)}" if short else ""
        notes.append(
            f"{task}{UNSEEN}: its {left:,} of {total:,} test items that hold no sentence any compared run "
            f"trained on (their contamination ledgers){without_short}"
        )
        seen_only = {prefix: ~mark for prefix, mark in dropped.items()}
        kept_seen = {
            encoder.name: [without(items, seen_only) for items in encoder.items[task]] for encoder in having
        }
        if all(kept is not None for kept_seeds in kept_seen.values() for kept in kept_seeds):
            for encoder in having:
                encoder.items[task + SEEN] = kept_seen[encoder.name]  # type: ignore[assignment]
            notes.append(
                f"{task}{SEEN}: its {sum(int(d.sum()) for d in dropped.values()):,} test items that hold a sentence some compared run trained "
                "on; against a control that trained on as much of the task's domain but none of its test "
                f"items, a run that trained on them differs here by what it memorised, and on {task}{UNSEEN} "
                "by the domain"
            )
    return notes


def compare(
    encoders: list[Encoder], config: SignificanceConfig, against_first: bool = False
) -> list[Comparison]:
    """Every pair of encoders (or each against the first: a page's short form) on every task both
    have, for every seed of each."""
    return compare_with_means(encoders, config, against_first)[0]


def compare_with_means(
    encoders: list[Encoder], config: SignificanceConfig, against_first: bool = False
) -> tuple[list[Comparison], list[AcrossTasks]]:
    """`compare`, and for each pair its verdict across the tasks (`across_tasks`)."""
    if len(encoders) < 2:
        raise UserError("just compare needs two encoders at least: pass two runs (or groups of seeds)")
    comparisons, means = [], []
    pairs = [(encoders[0], e) for e in encoders[1:]] if against_first else itertools.combinations(encoders, 2)
    for first, second in pairs:
        family, scored = [], {}
        for task in compared_tasks():
            if not (
                task in first.items
                and task in second.items
                and len(first.items[task]) == len(first.runs)
                and len(second.items[task]) == len(second.runs)
            ):
                continue
            comparison, scores_ = scored_comparison(
                task, (first.name, first.items[task]), (second.name, second.items[task]), config
            )
            family.append(
                dataclasses.replace(
                    comparison,
                    first_deterministic=first.deterministic,
                    second_deterministic=second.deterministic,
                )
            )
            if not is_part(task):
                scored[task] = scores_
        correct(family)
        comparisons += family
        if mean := across_tasks((first.name, second.name), len(first.runs), scored, family, config):
            mean.comparison.first_deterministic = first.deterministic
            mean.comparison.second_deterministic = second.deterministic
            means.append(mean)
    if config.family == "all":  # the study's every comparison one family (each pair's p kept)
        correct(comparisons)
    if not comparisons:
        raise UserError(
            "the runs share no transfer task with per-item results: transfer them with one protocol"
        )
    return comparisons, means


@dataclass
class AcrossTasks:
    """A pair's verdict across its tasks: the mean difference over them (`comparison`, task
    "mean over N tasks") and the share of tasks on which the first is ahead."""

    comparison: Comparison
    tasks: list[str]
    ahead: int  # tasks whose difference is above 0
    share_low: float  # the interval of the share of tasks the first is truly ahead on
    share_high: float

    def record(self) -> dict:
        return {
            **self.comparison.record(),
            "tasks": self.tasks,
            "ahead": self.ahead,
            "share_low": self.share_low,
            "share_high": self.share_high,
        }


def across_tasks(
    names: tuple[str, str],
    first_seeds: int,
    scored: dict[str, tuple[np.ndarray, list[float]]],
    family: list[Comparison],
    config: SignificanceConfig,
) -> AcrossTasks | None:
    """ "Is A better than B on these tasks?" as one test: each seed's mean score over the tasks
    (every seed has every task), its item replicates the mean of the tasks' own (independent
    resamples per task, so the item part is the tasks' over T^2), through the same studentized
    test as a task. The seed part is the spread of the seeds' task means, so a seed that lifts
    every task counts once, not T times as independent tasks would. The tasks are the ones
    compared, fixed: the question is about this suite, not tasks at large. The share of tasks on
    which A is truly ahead: each task's difference drawn from its own t interval (independently
    across tasks, `resamples` draws), the share's central interval at `confidence`. None with
    fewer than 2 tasks. `scored`: per task, both groups' seeds (the first's `first_seeds`, then
    the second's) as `task_scores` gives them; `family`: the pair's comparisons on them."""
    if len(scored) < 2:
        return None
    tasks = list(scored)
    count = first_seeds
    per_seed = np.mean([scored[t][0] for t in tasks], axis=0)  # (K_A + K_B, B)
    full = [float(x) for x in np.mean([scored[t][1] for t in tasks], axis=0)]
    mean = from_scores(
        f"mean over {len(tasks)} tasks",
        (names[0], per_seed[:count], full[:count]),
        (names[1], per_seed[count:], full[count:]),
        config,
    )
    on_tasks = [c for c in family if c.task in scored]
    rng = np.random.default_rng([config.seed, 0xACE])
    drawn = np.stack(
        [c.difference + (c.se or 0.0) * _t_draws(rng, c.df, config.resamples) for c in on_tasks]
    )  # (T, draws)
    shares = (drawn > 0).mean(axis=0)
    alpha = 1 - config.confidence
    low, high = np.quantile(shares, [alpha / 2, 1 - alpha / 2])
    ahead = sum(c.difference > 0 for c in on_tasks)
    return AcrossTasks(mean, tasks, ahead, float(low), float(high))


def _t_draws(rng: np.random.Generator, df: float, count: int) -> np.ndarray:
    return rng.standard_normal(count) if math.isinf(df) else rng.standard_t(df, count)


def per_seed(encoder: Encoder, task: str) -> list[float]:
    """The encoder's score on all of `task`'s test items, for each of its seeds."""
    return [float(scores(items, everything(item_counts(items)))) for items in encoder.items[task]]


def seed_spread(encoder: Encoder, task: str) -> str:
    """mean ± standard deviation over the seeds (one seed: its score alone)."""
    values = per_seed(encoder, task)
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.fmean(values):.2f} ± {statistics.stdev(values):.2f} ({len(values)} seeds)"


def table(
    encoders: list[Encoder], comparisons: list[Comparison], config: SignificanceConfig
) -> tuple[list[str], list[list[str]]]:
    """The comparison as a header and rows of text: what `just compare` prints and `just report` shows."""
    by_name = {e.name: e for e in encoders}
    label = table_labels(encoders)
    verdicts = {(c.task, c.first, c.second): c.says("A", "B") for c in comparisons}
    head = [
        "task",
        "encoder A",
        "encoder B",
        "A",
        "B",
        "A - B",
        f"{100 * config.confidence:g}% interval{holm_note(comparisons)}",
        "verdict",
    ]
    rows = [
        [
            c.task,
            label[c.first],
            label[c.second],
            seed_spread(by_name[c.first], c.task),
            seed_spread(by_name[c.second], c.task),
            f"{c.difference:+.2f}",
            f"[{c.low:+.2f}, {c.high:+.2f}]",
            c.says("A", "B") + disagreement(c, verdicts),
        ]  # fmt: skip
        for c in comparisons
    ]
    return head, rows


def disagreement(comparison: Comparison, verdicts: dict[tuple[str, str, str], str]) -> str:
    """A flag on a row without the seen items whose verdict is not the one on all items."""
    if not comparison.task.endswith(UNSEEN):
        return ""
    on_all = verdicts.get((comparison.task.removesuffix(UNSEEN), comparison.first, comparison.second))
    return f" (all items: {on_all})" if on_all is not None and on_all != comparison.says("A", "B") else ""


def holm_note(comparisons: list[Comparison]) -> str:
    families = {c.family for c in comparisons}
    if max(families, default=1) <= 1:
        return ""
    pairs = len({(c.first, c.second) for c in comparisons})
    return f" (Holm, {max(families)} {'comparisons' if pairs > 1 and max(families) == len(comparisons) else 'tasks'})"


def explanation(comparisons: list[Comparison], config: SignificanceConfig) -> str:
    """What the table's intervals hold and what its verdicts can say, above the table."""
    lines = [
        f"Studentized (report {config.report}): the variance between each encoder's seeds (Welch; "
        f"degrees of freedom guarded toward the arm with fewer seeds) plus the test items' "
        f"({config.resamples} paired resamples), "
        "an interval from Student's t. Points: accuracy in %, Pearson r x 100 (STS: mean over subsets)."
    ]
    if max((c.family for c in comparisons), default=1) > 1:
        lines.append(
            f"Verdicts at {100 * config.confidence:g}% corrected over "
            + ("every comparison of the table" if config.family == "all" else "each pair's tasks")
            + " (Holm): better "
            "means the corrected interval excludes 0; no evidence is not evidence of no difference."
        )
    lines += few_seeds_notes(comparisons)
    if any(not c.seed_variance_known for c in comparisons):
        lines.append(
            "An encoder of 1 seed: its interval holds the test items' variance only; the variance "
            "between training seeds is unknown, so '(1 seed)' speaks of these encoders, not of their "
            "configurations: train seeds=3 for a verdict on the configuration."
        )
    return "\n".join(lines)


def few_seeds_notes(comparisons: list[Comparison]) -> list[str]:
    """A line for each encoder of 2 seeds set against one of more: no test of a moderate
    difference at 2 seeds holds its level whatever the seeds' spreads (`guarded_df`), so its
    "no evidence" says little; the line names the seeds to add."""
    notes = {}
    for c in comparisons:
        for name, count, other, other_count, deterministic in (
            (c.first, c.first_seeds, c.second, c.second_seeds, c.second_deterministic),
            (c.second, c.second_seeds, c.first, c.first_seeds, c.first_deterministic),
        ):
            if count == 2 and (other_count > 2 or deterministic) and name not in notes:
                notes[name] = (
                    f"{name} has 2 seeds against {other}'s {'fixed score' if deterministic else other_count}: "
                    "the spread of 2 seeds rests on 1 degree of freedom, so its degrees of freedom lean "
                    "toward 1 and only a large difference can be called; train 1 more seed of it (3 at least) "
                    "for a test of a smaller one."
                )
    return list(notes.values())


LONGEST_LABEL = 24  # characters of an encoder's name in a table row; longer names go by number


def table_labels(encoders: list[Encoder]) -> dict[str, str]:
    """Each encoder's name in the table: itself when every name is short, else E1, E2, ... (the
    list above the table says which is which), so a row stays one line with real run names."""
    if all(len(encoder.name) <= LONGEST_LABEL for encoder in encoders):
        return {encoder.name: encoder.name for encoder in encoders}
    return {encoder.name: f"E{number}" for number, encoder in enumerate(encoders, start=1)}


def short_value(value: object) -> object:
    """A path as its last part (a vectors file, a data folder): the encoder's name stays readable."""
    if isinstance(value, str) and value.startswith(("/", "~", "./", "../")) and value.rstrip("/"):
        return Path(value.rstrip("/")).name
    return value


def shown(path: Path) -> str:
    """A run's folder as the user would type it: relative to the current folder when inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def markdown(encoders: list[Encoder], comparisons: list[Comparison], config: SignificanceConfig) -> str:
    head, rows = table(encoders, comparisons, config)
    label = table_labels(encoders)
    lines = [
        explanation(comparisons, config),
        "",
        *(
            f"- {e.name}: {', '.join(shown(r) for r in e.runs)}"
            if label[e.name] == e.name
            else f"- {label[e.name]} = {e.name}: {', '.join(shown(r) for r in e.runs)}"
            for e in encoders
        ),
        "",
        f"| {' | '.join(head)} |",
        "|---|---|---|---:|---:|---:|---:|---|",
        *(f"| {' | '.join(row)} |" for row in rows),
    ]
    return "\n".join(lines) + "\n"


def across_table(
    encoders: list[Encoder], means: list[AcrossTasks], config: SignificanceConfig
) -> tuple[str, list[str], list[list[str]]]:
    """The verdicts across tasks as a sentence, a header and rows of text (compare.md and the
    report's page show them)."""
    label = table_labels(encoders)
    level = f"{100 * config.confidence:g}%"
    intro = (
        f"Across tasks: the mean of A - B over the pair's tasks (each seed's mean over them; seeds and "
        f"items as above, one test at {level}, the tasks fixed), and the share of tasks on which A is "
        f"ahead (its {level} interval: each task's difference drawn from its own interval)."
    )
    head = [
        "encoder A",
        "encoder B",
        "tasks",
        "A - B (mean)",
        f"{level} interval",
        "verdict",
        "A ahead on",
        "share",
    ]
    rows = [
        [
            label[m.comparison.first],
            label[m.comparison.second],
            str(len(m.tasks)),
            f"{m.comparison.difference:+.2f}",
            f"[{m.comparison.low:+.2f}, {m.comparison.high:+.2f}]",
            m.comparison.says("A", "B"),
            f"{m.ahead} of {len(m.tasks)}",
            f"[{m.share_low:.2f}, {m.share_high:.2f}]",
        ]  # fmt: skip
        for m in means
    ]
    return intro, head, rows


def across_markdown(encoders: list[Encoder], means: list[AcrossTasks], config: SignificanceConfig) -> str:
    """The verdicts across tasks: a table below the per-task one (nothing when no pair has two tasks)."""
    if not means:
        return ""
    intro, head, rows = across_table(encoders, means, config)
    lines = [intro, "", f"| {' | '.join(head)} |", "|---|---|---:|---:|---:|---|---:|---:|"]
    return "\n".join([*lines, *(f"| {' | '.join(row)} |" for row in rows)]) + "\n"


def run(paths: list[str], config: SignificanceConfig) -> tuple[Path, str]:
    encoders = group_runs(find_runs(paths, None), config.report)
    unseen = add_unseen(encoders)
    comparisons, means = compare_with_means(encoders, config)
    text = markdown(encoders, comparisons, config)
    if means:
        text += "\n" + across_markdown(encoders, means, config)
    if unseen:
        text += "\n" + "\n".join(f"Seen and unseen items: {line}" for line in unseen) + "\n"
    if warnings := stale_reports(encoders, config.report):
        text += "\n" + "\n".join(f"Not the final encoder: {warning}" for warning in warnings) + "\n"
    if left_out := missing_tasks(encoders):
        text += "\n" + "\n".join(f"Left out: {line}" for line in left_out) + "\n"
    compared = [run for encoder in encoders for run in encoder.runs]
    out = (
        Path(config.out).expanduser() if config.out else atomic.fresh_path(beside(compared), "compare", ".md")
    )
    atomic.write_text(out, text, "comparison")
    record = {
        "config": config.__dict__,
        "encoders": {e.name: [str(r) for r in e.runs] for e in encoders},
        "comparisons": [c.record() for c in comparisons],
        "across_tasks": [mean.record() for mean in means],
        "seed_scores": {e.name: {task: per_seed(e, task) for task in e.items} for e in encoders},
    }
    atomic.write_text(out.with_suffix(".json"), jsonfile.dumps(record, indent=2) + "\n", "comparison")
    columns = ["task", "encoder A", "encoder B", "A", "B", "difference", "low", "high", "verdict"]
    rows = [
        [c.task, c.first, c.second, c.first_score, c.second_score, c.difference, c.low, c.high, c.verdict]
        for c in comparisons
    ]
    log_tables(
        job_type="compare",
        name=out.stem,
        config={**config.__dict__, "encoders": record["encoders"]},
        tables={"significance": (columns, rows)},
        directory=out.parent,
        mode=config.wandb,
        group=shared_group(compared),
    )
    return out, text


def shared_group(runs: Sequence[Path]) -> str | None:
    """The W&B group every compared run trained in (a sweep's), else none: a comparison across
    groups belongs to no one of them."""
    groups = {wandb_group(Path(run)) for run in runs}
    return groups.pop() if len(groups) == 1 else None


def command(args: Sequence[str]) -> None:
    """`just compare PATH ... key=value`."""
    paths, keys = paths_and_keys(args)
    out, text = run(paths, apply_overrides(SignificanceConfig(), keys))
    print(text)
    print(f"written to {shown(out)} and {shown(out.with_suffix('.json'))}")
