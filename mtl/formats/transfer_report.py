"""The transfer report as a file format: its name, its headline numbers, its markdown table, and
the per-item arrays beside it; written by the suite, read by `just report`, `just compare` and
`just decompose` (which never load a protocol).

    <run>/<name>.json            encoder, source, mode, pooling, dim, results: task -> metrics
    <run>/<name>.md              Table 2's row of the encoder
    <run>/<name>.senteval.json   the same results in SentEval's layout
    <run>/<name>.items.npz       per test item: predictions and gold values (what compare resamples),
                                 and `seen` marks where the run's ledger lists a sentence of the item

`<name>` is `transfer`, then the protocol's settings: `transfer-fast-pool-mean`. The .json's
`decontaminated` holds each marked task's score on all items and on the unseen ones.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import field_validator

from mtl.files import atomic, jsonfile, schemas
from mtl.files.schemas import Count, Number, Record, is_number
from mtl.formats.senteval_format import micro_macro, senteval_results
from mtl.transfer_tasks.registry import headline_metrics, ordered

# The entries of a task's result that readers take as numbers (headlines, averages, compare).
NUMERIC_RESULTS = (
    "acc",
    "dev_acc",
    "ndev",
    "ntest",
    "seconds",
    "pearson",
    "spearman",
    "f1",
    "mse",
    "main_score",
)


class Aggregate(Record):
    micro: Number = None
    macro: Number = None
    tasks: list[str] = []


class Decontaminated(Record):
    """A task's score on all its test items and on those holding no sentence the run trained on."""

    items: Count
    seen: Count
    score: Number = None
    unseen_score: Number = None
    subsets_left_out: list[str] | None = None  # STS subsets with too few unseen items to score


class TransferReport(Record):
    """<run>/transfer*.json: the suite's results, task -> metric -> value."""

    results: dict[str, dict[str, Any]]
    dim: Count | None = None
    encoder: str = ""
    mode: str = ""
    pooling: str | None = None
    seconds: Number = None
    aggregate: Aggregate | None = None
    evaluated: list[dict[str, Any]] | None = None
    decontaminated: dict[str, Decontaminated] | None = None

    @field_validator("results")
    @classmethod
    def _metrics_are_numbers(cls, results: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for task, result in results.items():
            for key, value in result.items():
                if (key in NUMERIC_RESULTS or key.startswith("all/")) and not is_number(value):
                    raise ValueError(f"{task}.{key} is {value!r:.40}, not a number")
        return results


ITEMS_SUFFIX = ".items.npz"  # beside <report>.json: each task's predictions and gold values per test item


def report_name(
    mode: str,
    classifier: str,
    pooling: str | None,
    train_fraction: float,
    truncate_dim: int | None = None,
    features: str = "senteval",
    vocab_expansion: bool = False,
) -> str:
    """One report per protocol, features, pooling, width and vocabulary expansion, so runs with
    other settings never overwrite it."""
    parts = [] if mode == "standard" else [mode]
    parts += [] if features == "senteval" else [features]
    parts += ["mlp"] if classifier == "mlp" else []
    parts += [f"pool-{pooling}"] if pooling else []
    parts += [f"frac{train_fraction:g}"] if train_fraction < 1 else []
    parts += [f"dim{truncate_dim}"] if truncate_dim is not None else []
    parts += ["vocab-expansion"] if vocab_expansion else []
    return "-".join(["transfer", *parts])


def report_paths(folder: Path) -> list[Path]:
    """Every transfer report of a run folder (`transfer.json`, `transfer-fast.json`, ...)."""
    return [p for p in sorted(Path(folder).glob("transfer*.json")) if not p.name.endswith(".senteval.json")]


def read_report(path: Path, damaged_is_missing: bool = False) -> dict[str, Any] | None:
    """A report's record, checked (TransferReport); None when there is none. A damaged one
    is a one-line error, or with `damaged_is_missing` (what will be evaluated again anyway) None."""
    try:
        return schemas.read_json(path, TransferReport, "run just transfer again, or remove it")
    except schemas.DamagedFile:
        if damaged_is_missing:
            return None
        raise


# Every headline number in points, the scale `just compare`, the report's pages and MTEB's
# leaderboard use: accuracy in %, a correlation x 100 (Table 2 prints STS as .65 and SICK-R as
# .885; one page then showed one metric in two scales)
POINTS = ("acc", "f1", "main_score", "pearson", "spearman")


def _formatted(metric: str, value: float) -> str:
    if metric.startswith("all/") or metric in POINTS:  # all/: STS, the mean over subsets
        return f"{100 * value:.2f}"
    return f"{value:.4g}"


def headline(task: str, result: dict[str, float]) -> str:
    """The numbers Table 2 shows, in points: accuracy in %, Pearson x 100 for relatedness,
    Pearson/Spearman x 100 for STS (the task's registered metrics, joined by /)."""
    keys = headline_metrics(task, result)
    if any(result.get(key) is None for key in keys):
        return "n/a"  # a score that was not finite (e.g. a constant prediction's correlation)
    return "/".join(_formatted(key, float(result[key])) for key in keys)


def markdown(report: dict) -> str:
    tasks = ordered(report["results"])
    dim = report["dim"] if report["dim"] is not None else "-"
    return "\n".join(
        [
            f"| model | dim | {' | '.join(tasks)} |",
            f"|---|---:|{'---:|' * len(tasks)}",
            f"| {report['encoder']} | {dim} | {' | '.join(headline(t, report['results'][t]) for t in tasks)} |",
            "",
            f"mode {report['mode']}, pooling {report['pooling'] or 'as trained'}, {report['seconds']:.0f} s. "
            "Every number in points: accuracy (%) for classification (MRPC: accuracy/F1), Pearson x 100 "
            "for SICK-R and STS-B, Pearson/Spearman x 100 (mean over subsets) for STS12-16."
            + (
                f" Dev accuracy over {', '.join(aggregate['tasks'])}: micro {aggregate['micro']:.2f}, "
                f"macro {aggregate['macro']:.2f} (InferSent, Table 3)."
                if (aggregate := report.get("aggregate"))
                else ""
            ),
            *decontaminated_lines(report),
            "",
        ]
    )


def short_note(entry: dict) -> str:
    """The STS subsets an unseen score leaves out (too few of their items unseen)."""
    left_out = entry.get("subsets_left_out") or []
    return f" (without {', '.join(left_out)}: too few unseen)" if left_out else ""


def decontaminated_lines(report: dict) -> list[str]:
    """What each task scores without the test items holding a sentence the run trained on."""
    entries = {t: e for t, e in (report.get("decontaminated") or {}).items() if e["seen"]}
    checked = len(report.get("decontaminated") or {})
    if not checked:
        return []
    if not entries:
        return [
            "",
            f"No test item of the {checked} tasks checked holds a sentence the run trained on (its ledger).",
        ]
    parts = [
        f"{task} {entry['unseen_score']:.2f}{short_note(entry)}"
        if entry["unseen_score"] is not None
        else f"{task} (too few left)"
        for task, entry in entries.items()
    ]
    counts = "; ".join(
        f"{t}: {e['seen']:,} of {e['items']:,} items seen, all {e['score']:.2f}" for t, e in entries.items()
    )
    return [
        "",
        "Without the test items holding a sentence the run trained on (its contamination ledger; "
        f"points: accuracy %, Pearson x 100): {', '.join(parts)} ({counts}).",
    ]


def write(out: Path, name: str, report: dict, items: dict[str, dict[str, np.ndarray]]) -> None:
    """The report's four files, each atomically; the .json last (what readers look for)."""
    report = {**report, "results": {t: report["results"][t] for t in ordered(report["results"])}}
    report["aggregate"] = micro_macro(report["results"])
    text = jsonfile.dumps(report, indent=2) + "\n"
    shaped = jsonfile.dumps(senteval_results(report["results"], items), indent=2) + "\n"
    atomic.write_text(out / f"{name}.senteval.json", shaped, "transfer report")
    with (
        atomic.atomic_path(out / f"{name}{ITEMS_SUFFIX}", "transfer items") as partial,
        open(partial, "wb") as f,
    ):
        np.savez(
            f, **{f"{task}/{key}": values for task, arrays in items.items() for key, values in arrays.items()}
        )
    atomic.write_text(out / f"{name}.json", text, "transfer report")
    atomic.write_text(out / f"{name}.md", markdown(report), "transfer report")


def read_items(path: Path, tasks: dict, damaged_is_missing: bool = True) -> dict[str, dict[str, np.ndarray]]:
    """The per-item arrays of `tasks` from `path`, each task's checked: every `predicted` with its
    `gold` (per subset for STS), both 1-D numbers of one length, gold finite. A damaged file is a
    one-line error naming it (`just compare`, which resamples them), or with `damaged_is_missing`
    (what the suite will evaluate again anyway) no items."""
    try:
        return _checked_items(path, tasks)
    except FileNotFoundError:
        return {}
    except schemas.DamagedFile:
        if damaged_is_missing:
            return {}
        raise


def _checked_items(path: Path, tasks: dict) -> dict[str, dict[str, np.ndarray]]:
    fix = "run just transfer again for it, or remove it"
    items: dict[str, dict[str, np.ndarray]] = {}
    try:
        with np.load(path, allow_pickle=False) as saved:
            if not hasattr(saved, "files"):
                raise ValueError("one array, not a table of them")
            for key in saved.files:
                task, _, name = key.partition("/")
                if task in tasks:
                    items.setdefault(task, {})[name] = saved[key]
    except FileNotFoundError:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        raise schemas.DamagedFile(f"{path} is not an items file ({error}): {fix}") from None
    for task, arrays in items.items():
        if (why := items_problem(arrays)) is not None:
            raise schemas.DamagedFile(f"{path}, {task}: {why}: {fix}")
    return items


def items_problem(arrays: dict[str, np.ndarray]) -> str | None:
    """Why a task's items cannot be resampled, or None when they can."""
    subsets = sorted({name.rpartition("/")[0] for name in arrays})
    for subset in subsets:
        at = f"{subset}/" if subset else ""
        predicted, gold = arrays.get(f"{at}predicted"), arrays.get(f"{at}gold")
        if predicted is None or gold is None:
            return f"{at or ''}{'gold' if gold is None else 'predicted'} is missing"
        for name, values in ((f"{at}predicted", predicted), (f"{at}gold", gold)):
            if values.ndim != 1 or values.dtype.kind not in "biuf":
                return f"{name} is {values.dtype} of shape {values.shape}, not one number per item"
        if len(predicted) != len(gold) or len(gold) == 0:
            return f"{at}predicted has {len(predicted)} items and {at}gold {len(gold)}"
        seen = arrays.get(f"{at}seen")
        if seen is not None and (seen.dtype != np.bool_ or seen.shape != gold.shape):
            return f"{at}seen is {seen.dtype} of shape {seen.shape}, not a mark per item"
        for name, values in arrays.items():  # every array of the items is one row per item
            if name.rpartition("/")[0] == subset and (values.ndim == 0 or len(values) != len(gold)):
                return f"{name} has {values.shape[0] if values.ndim else 0} rows for {len(gold)} items"
        if gold.dtype.kind == "f" and not np.isfinite(gold).all():
            return f"{at}gold holds NaN or infinite values"
    return None


def earlier_results(path: Path, report: dict) -> dict[str, dict[str, float]]:
    """Results of tasks not re-run this time, from an earlier report of the same encoder and settings."""
    earlier = read_report(path, damaged_is_missing=True)
    if earlier is None:
        return {}
    keys = ("encoder", "source", "vectors", "mode", "pooling", "evaluated")  # the same weights, too
    same = all(earlier.get(key) == report.get(key) for key in keys)
    return dict(earlier["results"]) if same else {}
