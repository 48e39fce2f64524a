"""`just compare-objectives`: transfer each member of a sweep over objectives, then one table and
one page: transfer score against minutes of training and examples seen (Quick-Thoughts,
Appendix C, compares objectives at equal training time this way).

    just sweep objectives max_minutes=20 seeds=3   # the members (experiments/sweeps/objectives.toml)
    just compare-objectives                        # transfer each, then comparison.md and comparison.html

A member already transferred with the same protocol is not transferred again. The seeds of an
objective (`just sweep ... seeds=3`) are one row, each score their mean ± sd; below the table,
`just compare`'s verdicts between every two objectives (studentized over seeds and test
items, Holm over every comparison: pairs x transfer tasks).
"""

from __future__ import annotations

import html
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtl import metrics
from mtl.analysis import significance

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from mtl.analysis.configs import CompareConfig as CompareConfig
from mtl.analysis.page import STYLE, pyplot, svg_base64
from mtl.config import apply_overrides
from mtl.errors import UserError
from mtl.eval.transfer import suite
from mtl.files import atomic
from mtl.formats.transfer_report import read_report
from mtl.runs import Run, RunFolder, RunStatus


@dataclass
class Member:
    name: str
    tasks: list[str]
    minutes: float
    examples: dict[str, int]
    transfer: dict[str, float]  # task -> accuracy (%) or Pearson x 100

    @property
    def mean(self) -> float:
        return sum(self.transfer.values()) / len(self.transfer) if self.transfer else float("nan")

    @property
    def starved(self) -> list[str]:
        """Its objectives that saw no training example within the budget: it is not that mixture."""
        return [task for task in self.tasks if self.examples.get(task, 0) == 0]

    @property
    def label(self) -> str:
        """Its name, marked when an objective got no examples (then it ranks after the rest)."""
        if not self.starved:
            return self.name
        return f"{self.name} (no {', '.join(self.starved)} examples: not this mixture)"


def compare(config: CompareConfig) -> Path:
    sweep = Path(config.out).expanduser()
    folders = sorted(p for p in sweep.iterdir() if (p / "config.json").is_file()) if sweep.is_dir() else []
    finished = [f for f in folders if RunFolder(f).status() is RunStatus.FINISHED]
    if not finished:
        raise UserError(f"out={sweep} holds no finished run: train the sweep first (just sweep objectives)")
    members = [_member(folder, config) for folder in finished]
    text = markdown(members, config) + "\n" + verdicts(finished, config)
    atomic.write_text(sweep / "comparison.md", text, "comparison table")
    atomic.write_text(sweep / "comparison.html", page(members, config), "comparison page")
    print(text)
    return sweep / "comparison.html"


def verdicts(folders: list[Path], config: CompareConfig) -> str:
    """`just compare`'s table between the objectives (their seeds grouped), or why there is none."""
    transfer = suite.TransferConfig(tasks=config.transfer_tasks, mode=config.mode)
    settings = significance.SignificanceConfig(report=suite.report_name(transfer), family="all")
    try:
        encoders = significance.group_runs(folders, settings.report)
        return significance.markdown(encoders, significance.compare(encoders, settings), settings)
    except UserError as error:
        return f"No verdicts: {error}\n"


def _member(folder: Path, config: CompareConfig) -> Member:
    transfer = suite.TransferConfig(
        run=str(folder),
        tasks=config.transfer_tasks,
        mode=config.mode,
        data=config.data,
        device=config.device,
        wandb="disabled",
    )
    report = read_report(folder / f"{suite.report_name(transfer)}.json", damaged_is_missing=True)
    results = report["results"] if report is not None else {}
    if any(task not in results for task in transfer.task_names):
        results = suite.run(transfer)[1]["results"]
    run = Run.read(folder)
    # the tasks that trained (a train=false task only watched)
    summary = run.summary
    tasks = [
        t
        for t in run.tasks
        if not isinstance(run.config["tasks"][t], dict) or run.config["tasks"][t].get("train", True)
    ]
    return Member(
        name=" + ".join(tasks),
        tasks=tasks,
        minutes=summary.get("train_seconds", float("nan")) / 60,
        examples={task: summary.get(metrics.examples(task), 0) for task in tasks},
        transfer={task: _score(results[task]) for task in transfer.task_names},
    )


def _score(result: dict[str, Any]) -> float:
    """Accuracy in %, or a correlation x 100 (Pearson), so one mean covers both."""
    value = result.get("acc", result.get("pearson", result.get("all/pearson")))
    return float("nan") if value is None else 100 * value


def markdown(members: list[Member], config: CompareConfig) -> str:
    """A row per objective: its seeds' mean ± sd per transfer task when it has several."""
    tasks = config.transfer_tasks.split(",")
    lines = [
        f"| objective | seeds | train min | examples seen | {' | '.join(tasks)} | mean |",
        "|---" * (len(tasks) + 5) + "|",
    ]
    groups: dict[str, list[Member]] = {}
    for m in members:
        groups.setdefault(m.label, []).append(m)

    def cell(values: list[float]) -> str:
        if len(values) > 1:
            return f"{statistics.fmean(values):.1f} ± {statistics.stdev(values):.1f}"
        return f"{values[0]:.1f}"

    # A member whose objective got no examples is not that mixture: it ranks after the others.
    ordered = sorted(
        groups.items(), key=lambda g: (bool(g[1][0].starved), -statistics.fmean(m.mean for m in g[1]))
    )
    for label, runs in ordered:
        seen = ", ".join(f"{t} {n:,}" for t, n in runs[0].examples.items())
        scores = " | ".join(cell([m.transfer[t] for m in runs]) for t in tasks)
        minutes = statistics.fmean(m.minutes for m in runs)
        lines.append(
            f"| {label} | {len(runs)} | {minutes:.1f} | {seen} | {scores} | {cell([m.mean for m in runs])} |"
        )
    return "\n".join(lines) + "\n"


def page(members: list[Member], config: CompareConfig) -> str:
    plt = pyplot()
    figure, (by_time, by_examples) = plt.subplots(1, 2, figsize=(11, 4.2))
    for m in members:
        seen = sum(m.examples.values())
        for axis, x in ((by_time, m.minutes), (by_examples, seen)):
            axis.scatter([x], [m.mean], s=40)
            axis.annotate(m.label, (x, m.mean), textcoords="offset points", xytext=(5, 4), fontsize=9)
    by_time.set_xlabel("minutes of training steps")
    by_examples.set_xlabel("training examples seen (all tasks)")
    by_examples.xaxis.set_major_formatter(lambda value, _: f"{value / 1000:,.0f}k")
    for axis in (by_time, by_examples):
        axis.set_ylabel(f"mean transfer score ({config.transfer_tasks})")
        axis.grid(alpha=0.3)
    figure.tight_layout()
    image = svg_base64(figure)
    table = markdown(members, config).splitlines()
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")] for line in table if not line.startswith("|---")
    ]
    cells = "".join(
        "<tr>" + "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in row) + "</tr>"
        for tag, row in [("th", rows[0])] + [("td", r) for r in rows[1:]]
    )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>objectives compared</title>'
        f"<style>{STYLE}</style></head><body><h1>Objectives compared at equal training time</h1>"
        f"<p>{len(members)} run(s) of {html.escape(config.out)}, transfer protocol {config.mode}, "
        f"written {html.escape(time.strftime('%Y-%m-%d %H:%M'))}.</p><table>{cells}</table>"
        f'<h2>Transfer against training time and examples seen</h2><img src="data:image/svg+xml;base64,{image}" '
        'alt="mean transfer score against training minutes and examples seen"></body></html>\n'
    )


def command(args: Sequence[str]) -> None:
    """The command line's `key=value` arguments onto CompareConfig; run; print what it gives."""
    print(f"written to {compare(apply_overrides(CompareConfig(), args))}")
