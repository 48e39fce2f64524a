"""`just compare`: is one encoder's transfer result really better than another's?

For each transfer task, the difference between encoders (or groups of runs that differ only
in their seed) with a paired bootstrap confidence interval over the test items (Koehn
2004; Berg-Kirkpatrick et al. 2012): the same resampled items score every encoder, so what
the test set happens to hold cancels out. Each replicate scores the task's own metric:
accuracy, Pearson r of the predicted relatedness, or the mean over STS subsets of Pearson r
of the cosine (each subset resampled on its own). With several seeds in a group, a
replicate's score is the mean over the seeds, and their spread is reported beside it.

The verdict at the chosen confidence: better (the interval lies above 0), worse (below 0)
or not distinguishable (it holds 0). Differences are in points: percent for accuracy, r x 100.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import numpy as np

from mtl.config import AtLeast0, Range, apply_overrides, flattened, paths_and_keys
from mtl.errors import UserError
from mtl.eval.transfer.registry import TRANSFER_TASKS
from mtl.eval.transfer.report_file import ITEMS_SUFFIX, read_items, read_report
from mtl.files import atomic, jsonfile
from mtl.runs import Run, beside, differing_keys, find_runs, stale, wandb_group
from mtl.tracking.tracker import log_tables

Items = dict[str, np.ndarray]  # a task's arrays per test item: predicted, gold (STS: per subset)


@dataclass
class SignificanceConfig:
    report: str = (
        "transfer"  # which transfer report of each run: transfer, transfer-fast, transfer-fast-pool-mean, ...
    )
    resamples: Annotated[int, Range(100)] = 2000  # bootstrap replicates
    confidence: Annotated[float, Range(0.5, 0.999)] = 0.95  # of the interval and the verdict
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
    low: float  # the interval of first - second, in points
    high: float

    @property
    def difference(self) -> float:
        return self.first_score - self.second_score

    @property
    def verdict(self) -> str:
        if self.low > 0:
            return f"{self.first} better"
        if self.high < 0:
            return f"{self.second} better"
        return "not distinguishable"


def scores(items: Items, indices: dict[str, np.ndarray] | np.ndarray) -> np.ndarray:
    """The task's metric, in points, for each row of resampled item `indices` ((B, n); STS: per subset)."""
    subsets = sorted(key.removesuffix("/predicted") for key in items if key.endswith("/predicted"))
    if subsets:  # STS: each subset resampled apart, their Pearson r averaged, as the report's all/pearson
        return np.mean(
            [pearson(items[f"{s}/predicted"][indices[s]], items[f"{s}/gold"][indices[s]]) for s in subsets],
            axis=0,
        )
    predicted, gold = items["predicted"], items["gold"]
    if np.issubdtype(gold.dtype, np.floating):  # relatedness: a predicted score per pair
        return pearson(predicted[indices], gold[indices])
    return 100 * (predicted == gold)[indices].mean(axis=-1)


def pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson r x 100 along the last axis."""
    x = x - x.mean(axis=-1, keepdims=True)
    y = y - y.mean(axis=-1, keepdims=True)
    denominator = np.sqrt((x * x).sum(axis=-1) * (y * y).sum(axis=-1))
    return 100 * (x * y).sum(axis=-1) / np.where(denominator > 0, denominator, np.inf)


def item_counts(items: Items) -> dict[str, int] | int:
    subsets = [key.removesuffix("/predicted") for key in items if key.endswith("/predicted")]
    if subsets:
        return {s: len(items[f"{s}/gold"]) for s in subsets}
    return len(items["gold"])


def resample(counts: dict[str, int] | int, resamples: int, rng: np.random.Generator):
    if isinstance(counts, dict):
        return {s: rng.integers(0, n, size=(resamples, n)) for s, n in sorted(counts.items())}
    return rng.integers(0, counts, size=(resamples, counts))


def everything(counts: dict[str, int] | int):
    if isinstance(counts, dict):
        return {s: np.arange(n) for s, n in counts.items()}
    return np.arange(counts)


def compare_task(
    task: str,
    first: tuple[str, list[Items]],
    second: tuple[str, list[Items]],
    config: SignificanceConfig,
) -> Comparison:
    """`first` and `second`: a name and the task's items of each of its seeds."""
    (first_name, first_seeds), (second_name, second_seeds) = first, second
    counts = item_counts(first_seeds[0])
    for items in first_seeds + second_seeds:
        if item_counts(items) != counts or not _same_gold(items, first_seeds[0]):
            raise UserError(
                f"{task}: the runs were scored on different test items: evaluate them with the same "
                "transfer data and protocol (report=)"
            )
    rng = np.random.default_rng([config.seed, *task.encode()])
    indices = resample(counts, config.resamples, rng)
    replicates = [
        np.mean([scores(i, indices) for i in seeds], axis=0) for seeds in (first_seeds, second_seeds)
    ]
    tail = 100 * (1 - config.confidence) / 2
    low, high = np.percentile(replicates[0] - replicates[1], [tail, 100 - tail])
    full = everything(counts)
    return Comparison(
        task,
        first_name,
        second_name,
        float(np.mean([scores(i, full) for i in first_seeds])),
        float(np.mean([scores(i, full) for i in second_seeds])),
        float(low),
        float(high),
    )


def _same_gold(items: Items, reference: Items) -> bool:
    return all(np.array_equal(items[k], reference[k]) for k in items if k.endswith("gold"))


@dataclass
class Encoder:
    """One encoder: a run, or runs that differ only in their seed."""

    name: str
    runs: list[Path]
    items: dict[str, list[Items]]  # task -> per seed


def group_runs(folders: list[Path], report: str) -> list[Encoder]:
    """Runs whose configs differ only in `run.seed` form one encoder, named by what sets it apart."""
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
        for index in members:
            path = runs[index].folder / f"{report}{ITEMS_SUFFIX}"
            if not path.is_file() and report == "transfer-mteb":
                raise UserError(
                    "report=transfer-mteb: MTEB keeps no per-item outputs, so its scores cannot be "
                    "resampled; `just report` shows them beside the runs; compare a SentEval report"
                )
            if not path.is_file():
                raise UserError(
                    f"{runs[index].folder} has no per-item results for {report} ({path.name}): run "
                    f"`just transfer run={runs[index].folder}` with the protocol of {report} first "
                    "(mode=senteval reports and pooling=selfattn keep none)"
                )
            for task, arrays in read_items(path, _all_tasks()).items():
                items.setdefault(task, []).append(arrays)
        encoders.append(Encoder(label, [runs[i].folder for i in members], items))
    return encoders


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


def compare(
    encoders: list[Encoder], config: SignificanceConfig, against_first: bool = False
) -> list[Comparison]:
    """Every pair of encoders (or each against the first: a page's short form) on every task both
    have, for every seed of each."""
    if len(encoders) < 2:
        raise UserError("just compare needs two encoders at least: pass two runs (or groups of seeds)")
    comparisons = []
    pairs = [(encoders[0], e) for e in encoders[1:]] if against_first else itertools.combinations(encoders, 2)
    for first, second in pairs:
        for task in [t for t in _all_tasks() if t in first.items and t in second.items]:
            if len(first.items[task]) == len(first.runs) and len(second.items[task]) == len(second.runs):
                comparisons.append(
                    compare_task(
                        task, (first.name, first.items[task]), (second.name, second.items[task]), config
                    )
                )
    if not comparisons:
        raise UserError(
            "the runs share no transfer task with per-item results: transfer them with one protocol"
        )
    return comparisons


def seed_spread(encoder: Encoder, task: str) -> str:
    """mean ± standard deviation over the seeds (one seed: its score alone)."""
    values = [float(scores(items, everything(item_counts(items)))) for items in encoder.items[task]]
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.fmean(values):.2f} ± {statistics.stdev(values):.2f} ({len(values)} seeds)"


def table(
    encoders: list[Encoder], comparisons: list[Comparison], config: SignificanceConfig
) -> tuple[list[str], list[list[str]]]:
    """The comparison as a header and rows of text: what `just compare` prints and `just report` shows."""
    by_name = {e.name: e for e in encoders}
    label = table_labels(encoders)
    head = [
        "task",
        "encoder A",
        "encoder B",
        "A",
        "B",
        "A - B",
        f"{100 * config.confidence:g}% interval",
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
            "A better" if c.low > 0 else "B better" if c.high < 0 else "not distinguishable",
        ]  # fmt: skip
        for c in comparisons
    ]
    return head, rows


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


def markdown(encoders: list[Encoder], comparisons: list[Comparison], config: SignificanceConfig) -> str:
    head, rows = table(encoders, comparisons, config)
    label = table_labels(encoders)
    lines = [
        f"Paired bootstrap over test items ({config.resamples} replicates, report {config.report}); "
        "points: accuracy in %, Pearson r x 100 (STS: mean over subsets).",
        "",
        *(
            f"- {e.name}: {', '.join(str(r) for r in e.runs)}"
            if label[e.name] == e.name
            else f"- {label[e.name]} = {e.name}: {', '.join(str(r) for r in e.runs)}"
            for e in encoders
        ),
        "",
        f"| {' | '.join(head)} |",
        "|---|---|---|---:|---:|---:|---:|---|",
        *(f"| {' | '.join(row)} |" for row in rows),
    ]
    return "\n".join(lines) + "\n"


def run(paths: list[str], config: SignificanceConfig) -> tuple[Path, str]:
    encoders = group_runs(find_runs(paths, None), config.report)
    comparisons = compare(encoders, config)
    text = markdown(encoders, comparisons, config)
    if warnings := stale_reports(encoders, config.report):
        text += "\n" + "\n".join(f"Not the final encoder: {warning}" for warning in warnings) + "\n"
    compared = [run for encoder in encoders for run in encoder.runs]
    out = (
        Path(config.out).expanduser()
        if config.out
        else beside(compared) / f"compare-{time.strftime('%Y%m%d-%H%M%S')}.md"
    )
    atomic.write_text(out, text, "comparison")
    record = {
        "config": config.__dict__,
        "encoders": {e.name: [str(r) for r in e.runs] for e in encoders},
        "comparisons": [
            {**c.__dict__, "difference": c.difference, "verdict": c.verdict} for c in comparisons
        ],
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
    print(f"written to {out} and {out.with_suffix('.json')}")
