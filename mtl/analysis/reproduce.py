"""`just reproduce run=R`: a run of a paper-* or infersent-* preset beside the figures its paper
publishes for that row (experiments/published/figures.toml), each marked reproduced, not
reproduced, or not comparable, with every reason it is not: a run is set against a published
figure only when its encoder has the paper's size (trainable parameters), its word vectors are
the paper's file (dimension and content, whatever the file is called), it trained on the whole
training split and was scored on whole evaluation sets, it ran to its stopping rule, and an
average is over the paper's task set.

A run records the figures of its preset when it starts (config.json, "published"); a run of
an older mtl is matched by the preset its recorded command names.
"""

from __future__ import annotations

import math
import shlex
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtl import metrics
from mtl.config import apply_overrides
from mtl.errors import UserError
from mtl.files import schemas
from mtl.formats import run_files
from mtl.formats.transfer_report import read_report
from mtl.published import comparability, figures_file, published_for_command, row_model
from mtl.runs import RunFolder, upgrade

PAPER_VECTORS = "glove.840B.300d"  # every row of the two papers' tables used these vectors


@dataclass
class ReproduceConfig:
    run: str = ""  # a run folder of a paper-* or infersent-* preset


def read_record(folder: Path) -> dict[str, Any]:
    record = schemas.read_json(RunFolder(folder).record, run_files.RunRecord, schemas.RESTORE)
    if record is None:
        raise UserError(f"{folder} is not a run folder (no config.json): pass runs/<run>")
    try:
        run_files.RecordedConfig.model_validate(upgrade(record["config"]))
    except (schemas.ValidationError, KeyError, TypeError, AttributeError) as error:
        why = schemas.described(error) if isinstance(error, schemas.ValidationError) else type(error).__name__
        raise schemas.DamagedFile(f"{RunFolder(folder).record}, config: {why}: {schemas.RESTORE}") from None
    return record


def recorded_figures(folder: Path, record: dict[str, Any]) -> dict[str, Any] | None:
    """The figures `record` (the run's config.json) holds, else those of the preset its command names."""
    if "published" in record:
        if not well_formed(record["published"]):
            raise UserError(
                f"{RunFolder(folder).record}: its published figures are damaged: restore the file, or "
                "remove the entry to take them from the preset its command names"
            )
        return record["published"]
    command = record.get("command", "")
    return published_for_command(shlex.split(command)[2:]) if isinstance(command, str) else None


def well_formed(figures: object) -> bool:
    """A run's recorded figures as `published` gives them: numbers (STS: a pair) by key, the preset and its cite,
    and the tolerances."""

    def number(value: object) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)

    if not isinstance(figures, dict) or not all(isinstance(figures.get(k), str) for k in ("cite", "preset")):
        return False
    tolerance = figures.get("tolerance")
    if not isinstance(tolerance, dict) or not all(
        number(tolerance.get(k)) and math.isfinite(tolerance[k]) and tolerance[k] >= 0
        for k in ("points", "correlation")
    ):
        return False
    for group in ("nli", "squad", "transfer"):
        values = figures.get(group, {})
        if not isinstance(values, dict):
            return False
        for task, value in values.items():
            # a pair (Pearson, Spearman) for the STS tasks alone; one number everywhere else
            pair = group == "transfer" and str(task).startswith("STS") and isinstance(value, list)
            if not (number(value) or (pair and len(value) == 2 and all(map(number, value)))):
                return False
    return True


def not_comparable(
    record: dict[str, Any], summary: dict[str, Any] | None, figures: dict[str, Any] | None = None
) -> list[str]:
    """Why the run's numbers (`record`: its config.json, `summary`: its summary.json, None before
    it finishes) cannot be set against the paper's (`figures`), whatever they are."""
    config = record.get("config", {})
    figures = figures or {}
    rules = comparability_of(figures)
    inputs = record.get("inputs") if isinstance(record.get("inputs"), dict) else {}
    reasons = _vector_reasons(config, inputs.get("vectors") or {}, rules)
    for name, task in config.get("tasks", {}).items():
        if task.get("kind") == "nli" and task.get("train_split", "train") != "train":
            reasons.append(f"{name} trained on the {task['train_split']} split, the paper on all of train")
        if task.get("max_train"):
            reasons.append(f"{name} trained on its first {task['max_train']:,} examples")
        if isinstance(task.get("subsample"), int | float) and task["subsample"] < 1:
            reasons.append(
                f"{name} trained on a random {100 * task['subsample']:.1f}% of its examples (subsample=)"
            )
    snli = inputs.get("snli")  # the SNLI data's fingerprint, with its splits' sizes since mtl records them
    sizes = snli.get("sizes") if isinstance(snli, dict) else None
    if isinstance(sizes, dict):
        for split, full in rules.get("nli_sizes", {}).items():
            if isinstance(sizes.get(split), int) and sizes[split] != full:
                reasons.append(
                    f"SNLI's {split} split as read holds {sizes[split]:,} pairs, the whole {full:,}"
                )
    scored = metrics.scored_on(config, summary or {})
    if parts := [f"{split} on {how}" for split in scored if (how := metrics.sample_of(scored, split))]:
        reasons.append(f"scored on parts of their splits (max_eval=): {'; '.join(parts)}")
    if summary is None:
        reasons.append("the run has not finished")
    else:
        if (
            summary.get("stop_reason") in ("max_steps", "max_minutes")
            and config.get("optim", {}).get("stop") != "max_steps"
        ):
            reasons.append(f"stopped by {summary['stop_reason']} before its stopping rule")
        paper, params = figures.get("params"), summary.get("params/trainable")
        if paper and isinstance(params, int | float) and abs(params - paper) > rules["params"] * paper:
            reasons.append(f"{params / 1e6:.1f}M trainable parameters, the paper's model {paper / 1e6:.3g}M")
    return reasons


def comparability_of(figures: dict[str, Any]) -> dict[str, Any]:
    """The rules a run's recorded figures carry, else (recorded before they did, or damaged) the
    figures file's."""
    recorded = figures.get("comparable")
    current = comparability()
    if isinstance(recorded, dict) and all(type(recorded.get(k)) is type(v) for k, v in current.items()):
        return recorded
    return current


def _vector_reasons(config: dict[str, Any], vectors: dict[str, Any], rules: dict[str, Any]) -> list[str]:
    """Whether the run's word vectors are the paper's file, by their recorded dimension and content."""
    name = Path(str(config.get("data", {}).get("vectors") or "")).name or "the default vectors"
    if config.get("model", {}).get("encoder") == "hf":
        return []  # a pretrained transformer reads no word vectors (no paper row is one)
    if not isinstance(vectors, dict) or not isinstance(vectors.get("dim"), int):
        return [f"vectors {name}: the run recorded no dimension or content (trained before mtl checked them)"]
    reasons = []
    if vectors["dim"] != rules["vectors_dim"]:
        reasons.append(f"vectors of {vectors['dim']} dimensions ({name}), the paper's {rules['vectors_dim']}")
    the = vectors.get("the")
    numbers = isinstance(the, list) and all(isinstance(v, int | float) for v in the)
    if not numbers or any(abs(a - b) > 1e-4 for a, b in zip(the, rules["vectors_the"], strict=False)):
        reasons.append(
            f"vectors {name} are another file than {PAPER_VECTORS} (its vector for 'the' begins {the})"
        )
    return reasons


def _aggregate_reason(aggregate: dict[str, Any], rules: dict[str, Any]) -> str | None:
    tasks, wanted = aggregate.get("tasks") or [], rules["aggregate_tasks"]
    if sorted(tasks) != sorted(wanted):
        return f"averaged over {', '.join(tasks) or 'no task'}, the paper over {', '.join(wanted)}"
    return None


def rows(folder: Path) -> tuple[dict[str, Any], list[list[str]], list[str]]:
    """The figures, one row per published number (what, paper, run, verdict), and the reasons
    the run is not comparable."""
    record = read_record(folder)
    figures = recorded_figures(folder, record)
    if figures is None:
        raise UserError(
            f"{folder} is not a run of a preset with published figures: train one of "
            f"{', '.join(sorted(_presets()))} (just train-multitask preset=NAME)"
        )
    summary = schemas.read_json(RunFolder(folder).summary, run_files.Summary, schemas.RESTORE)
    source = f"{figures.get('report', 'transfer')}.json"  # the standard protocol's: the papers' tables
    report = read_report(folder / source) or {}
    transfer, aggregate = report.get("results", {}), report.get("aggregate") or {}
    reasons = not_comparable(record, summary, figures) + _model_reasons(record, figures, report)
    rules = comparability_of(figures)
    notes: list[str] = []  # why some rows alone are not comparable
    summary = summary or {}
    tolerance = figures["tolerance"]
    table = []
    for task in ("nli", "squad"):
        for split, paper in figures.get(task, {}).items():
            value = summary.get(metrics.best(metrics.evaluation(task, split, "acc")))
            measured = None if value is None else 100 * value
            table.append(
                _row(
                    f"{task} {split} accuracy",
                    paper,
                    measured,
                    tolerance["points"],
                    reasons,
                    "a finished run",
                )
            )
    for task, paper in figures.get("transfer", {}).items():
        counted = _count_reason(task, transfer.get(task, {}), rules)
        if task in ("micro", "macro"):
            measured = aggregate.get(task)
            averaged = [why] if aggregate and (why := _aggregate_reason(aggregate, rules)) else []
            table.append(
                _row(
                    f"transfer {task} (dev)", paper, measured, tolerance["points"], reasons + averaged, source
                )
            )
            notes += [why for why in averaged if why not in notes]
            continue
        result = transfer.get(task, {})
        if isinstance(paper, list):  # STS: Pearson/Spearman
            for metric, value in zip(("pearson", "spearman"), paper, strict=True):
                measured = result.get(f"all/{metric}")
                table.append(
                    _row(
                        f"{task} {metric}",
                        value,
                        measured,
                        tolerance["correlation"],
                        reasons + counted,
                        source,
                    )
                )
        elif paper < 1:  # a correlation (SICK-R)
            table.append(
                _row(
                    f"{task} pearson",
                    paper,
                    result.get("pearson"),
                    tolerance["correlation"],
                    reasons + counted,
                    source,
                )
            )
        else:
            measured = None if result.get("acc") is None else 100 * result["acc"]
            table.append(
                _row(f"{task} accuracy", paper, measured, tolerance["points"], reasons + counted, source)
            )
        notes += [why for why in counted if why not in notes]
    return figures, table, reasons + notes


def _count_reason(task: str, result: dict[str, Any], rules: dict[str, Any]) -> list[str]:
    """Why a task's score is no whole-test-set figure: the report counted fewer items than the
    task's test set holds (a copy of the data cut short, a subsample)."""
    whole, counted = rules.get("test_items", {}).get(task), result.get("ntest")
    if isinstance(whole, int) and isinstance(counted, int | float) and counted != whole:
        return [f"{task} scored on {counted:,.0f} test items, the whole test set {whole:,}"]
    return []


def _model_reasons(record: dict[str, Any], figures: dict[str, Any], report: dict[str, Any]) -> list[str]:
    """Why the run is not the row's model: another encoder or pooling than the row's preset sets
    (its size may match all the same), or a report scored with another pooling."""
    preset = row_model(str(figures.get("preset", "")))
    model = record.get("config", {}).get("model", {})
    reasons = []
    for key in ("encoder", "pooling"):
        wanted, used = preset.get(key), model.get(key)
        if wanted is not None and used is not None and str(used) != wanted:
            reasons.append(f"{key}={used}, the row's model {key}={wanted}")
    pooled = report.get("pooling")
    if pooled and preset.get("pooling", model.get("pooling")) not in (None, pooled):
        reasons.append(
            f"the transfer report pooled with {pooled}, the row's model with {preset.get('pooling', model.get('pooling'))}"
        )
    return reasons


def _row(
    what: str, paper: float, measured: float | None, tolerance: float, reasons: list[str], source: str
) -> list[str]:
    if measured is None:
        return [what, _number(paper), "–", f"not measured ({source} has none)"]
    if reasons:
        verdict = "not comparable"
    else:
        verdict = "reproduced" if abs(measured - paper) <= tolerance else "not reproduced"
    return [what, _number(paper), _number(measured), verdict]


def _number(value: float) -> str:
    """In points, as every page shows it: a correlation (a fraction: the paper's .885) x 100."""
    return f"{100 * value:.2f}" if abs(value) <= 1 else f"{value:.2f}"


def _presets() -> list[str]:
    table = tomllib.loads(figures_file().read_text(encoding="utf-8"))
    return [name for name in table if name not in ("tolerance", "comparable")]


def verdict_line(folder: Path) -> str | None:
    """One cell for `just report`: how many published numbers the run reproduces, or why it
    cannot; None for a run of no such preset."""
    try:
        figures, table, reasons = rows(folder)
    except UserError:
        return None
    measured = [row for row in table if not row[3].startswith("not measured")]
    comparable = [row for row in measured if row[3] != "not comparable"]
    if reasons and not comparable:
        return f"not comparable ({reasons[0]})"
    reproduced = sum(row[3] == "reproduced" for row in comparable)
    if not measured:
        return "nothing measured yet"
    left = len(measured) - len(comparable)
    return f"{reproduced} of {len(comparable)} reproduced" + (
        f"; {left} not comparable ({reasons[0]})" if left else ""
    )


def text(folder: Path) -> str:
    figures, table, reasons = rows(folder)
    width = max(len(row[0]) for row in table)
    lines = [
        f"{folder}: preset {figures['preset']}, {figures['cite']}",
        f"tolerance: {figures['tolerance']['points']:g} points, {figures['tolerance']['correlation']:g} in r",
        "",
        f"{'':<{width}}  {'paper':>8}  {'this run':>8}  verdict",
        *(f"{what:<{width}}  {paper:>8}  {run:>8}  {verdict}" for what, paper, run, verdict in table),
    ]
    if reasons:
        lines += ["", "not comparable: " + "; ".join(reasons) + "."]
    return "\n".join(lines)


def command(args: Sequence[str]) -> None:
    config = apply_overrides(ReproduceConfig(), args)
    if not config.run:
        raise UserError("just reproduce needs run=runs/<run of a paper-* or infersent-* preset>")
    print(text(Path(config.run).expanduser()))
