"""`just report`: one self-contained HTML page (plots embedded) from run folders, no account needed.

    just report runs/sweeps/fig2                  # a sweep folder: all its runs
    just report runs/a runs/b out=report.html
    just report group=fig2                        # every run under runs/ in that W&B group

Per run: each task's training loss (raw and smoothed) and dev accuracy against the task's
own step, with the task's blocks shaded; for all runs: the loss recovery after each block
switch, Figure 2 (best dev accuracy against one task's steps per block) when the runs differ
in it, and a table of their dev, test and transfer results side by side.
"""

from __future__ import annotations

import base64
import html
import io
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtl import atomic, metrics
from mtl.errors import UserError
from mtl.runs import RunFolder
from mtl.tasks import task_title
from mtl.train.config import upgrade
from mtl.train.phases import WINDOW
from mtl.train.runlog import read_metrics


@dataclass
class ReportConfig:
    group: str | None = None  # every run under `runs` whose W&B group is this (e.g. fig2)
    runs: str = "runs"  # where group= looks for run folders
    out: str | None = (
        None  # the HTML file; None: report.html in the sweep folder, else runs/report-<time>.html
    )


@dataclass
class Run:
    """What a run folder holds: config, metrics, summary, transfer results."""

    folder: Path
    config: dict[str, Any]
    records: list[dict[str, Any]]
    summary: dict[str, Any]
    transfer: dict[str, str]  # task -> its headline score

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def tasks(self) -> list[str]:
        return list(self.config["tasks"])

    def title(self, task: str) -> str:
        """The task's dataset name (`SNLI`), or the task's name."""
        return task_title(task, self.config["tasks"][task])

    def block_steps(self, task: str) -> int | None:
        entry = self.config["tasks"].get(task)
        return entry.get("steps") if isinstance(entry, dict) else None

    def dev_metric(self, task: str) -> str | None:
        """The key of the task's dev metric (`nli/dev/acc`), as its records hold it."""
        prefix = f"{task}/dev/"
        return next((k for r in self.records for k in r if k.startswith(prefix)), None)

    @classmethod
    def read(cls, folder: Path) -> Run:
        run = RunFolder(folder)
        record_path = run.record
        if not record_path.is_file() or not run.metrics.is_file():
            raise UserError(
                f"{folder} is not a run folder (no config.json and metrics.jsonl): pass runs/<run>"
            )
        try:
            config = upgrade(json.loads(record_path.read_text(encoding="utf-8"))["config"])
            records = read_metrics(run.metrics)
            summary_path = run.summary
            summary = json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.is_file() else {}
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as error:
            raise UserError(f"{folder} cannot be read ({error}): is it a complete run folder?") from None
        return cls(folder, config, records, summary, _transfer_results(folder))


def _transfer_results(folder: Path) -> dict[str, str]:
    """Task -> the number Table 2 shows, from the run's standard transfer report."""
    from mtl.eval.transfer.suite import headline

    path = folder / "transfer.json"
    try:
        results = json.loads(path.read_text(encoding="utf-8"))["results"] if path.is_file() else {}
        return {task: headline(task, values) for task, values in results.items()}
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return {}


def find_runs(paths: list[str], group: str | None, root: Path = Path("runs")) -> list[Path]:
    """Run folders from `paths` (a sweep folder stands for its runs) and from `group`."""
    folders: list[Path] = []
    for text in paths:
        path = Path(text).expanduser()
        if (path / "sweep.json").is_file():
            folders += _sweep_members(path / "sweep.json")
        elif path.is_dir():
            folders.append(path)
        else:
            raise UserError(f"{path} is not a folder: pass run folders (runs/<run>) or a sweep folder")
    if group:
        for record in sorted(root.glob("**/config.json")):
            try:
                run = json.loads(record.read_text(encoding="utf-8"))["config"]["run"]
            except (OSError, ValueError, KeyError, TypeError, RecursionError):
                continue
            if (run.get("group") or run.get("name")) == group:
                folders.append(record.parent)
    if not folders:
        raise UserError("no runs to report: pass run folders, a sweep folder, or group=NAME")
    return list(dict.fromkeys(folders))


def _sweep_members(record: Path) -> list[Path]:
    """The run folders a sweep's record lists that have started training."""
    try:
        members = json.loads(record.read_text(encoding="utf-8"))["members"]
        folders = [Path(p) for p in members.values()]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
        raise UserError(
            f"{record} is damaged ({type(error).__name__}): pass the sweep's run folders themselves"
        ) from None
    return [folder for folder in folders if RunFolder(folder).metrics.is_file()]


def build(runs: list[Run]) -> str:
    """The HTML page."""
    figures: list[tuple[str, str]] = [
        (f"{run.name}: training loss and dev accuracy per task", _curves(run)) for run in runs
    ]
    if any(_recovery_rows(run) for run in runs):
        figures.append(("Loss recovery after each block switch", _recovery(runs)))
    if (axis := _swept_task(runs)) is not None:
        title = f"Figure 2: best dev accuracy against {runs[0].title(axis)} steps per block"
        figures.append((title, _figure2(runs, axis)))
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8"><title>mtl report</title>',
        f"<style>{STYLE}</style></head><body>",
        "<h1>mtl report</h1>",
        f"<p>{len(runs)} run(s), written {html.escape(time.strftime('%Y-%m-%d %H:%M'))}.</p>",
        "<h2>Results</h2>",
        _results_table(runs),
    ]
    for title, image in figures:
        parts += [
            f"<h2>{html.escape(title)}</h2>",
            f'<img src="data:image/png;base64,{image}" alt="{html.escape(title)}">',
        ]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
    "th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}img{max-width:100%}"
)


def _results_table(runs: list[Run]) -> str:
    transfer_tasks = sorted({task for run in runs for task in run.transfer})
    tasks = list(dict.fromkeys(task for run in runs for task in run.tasks))
    titles = {task: next(run.title(task) for run in runs if task in run.tasks) for task in tasks}
    evaluations = [
        (task, split)
        for task in tasks
        for split in ("dev", "test")
        if any(_best(run, task, split) is not None for run in runs)
    ]
    columns = [
        "run",
        "encoder",
        "steps per block",
        "steps",
        "stopped by",
        *(f"{titles[task]} {split}" for task, split in evaluations),
        *transfer_tasks,
    ]
    rows = []
    for run in runs:
        model, s = run.config["model"], run.summary
        rows.append(
            [
                run.name,
                f"{model['encoder']} {model['hidden']}",
                " / ".join(f"{task} {run.block_steps(task)}" for task in run.tasks),
                str(s.get(metrics.GLOBAL_STEP, _last_step(run))),
                s.get("stop_reason") or _unfinished_state(run),
                *(_percent(_best(run, task, split)) for task, split in evaluations),
                *(run.transfer.get(task, "–") for task in transfer_tasks),
            ]
        )
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _best(run: Run, task: str, split: str) -> Any:
    """The best checkpoint's value of the task's metric on `split`, from the summary."""
    prefix = metrics.best(f"{task}/{split}/")
    return next((v for k, v in run.summary.items() if k.startswith(prefix)), None)


def _percent(value: Any) -> str:
    return f"{100 * value:.2f}" if isinstance(value, int | float) else "–"


def _unfinished_state(run: Run) -> str:
    """How a run without a summary stands: `diverged` (its loss became NaN or inf), else not finished."""
    events = [r.get(metrics.EVENT) for r in run.records if metrics.EVENT in r]
    return "diverged" if events and events[-1] == "diverged" else "not finished"


def _last_step(run: Run) -> int:
    return max((r[metrics.GLOBAL_STEP] for r in run.records), default=0)


def _swept_task(runs: list[Run]) -> str | None:
    """The task whose steps per block differ between the finished runs (Figure 2's axis), if one does."""
    finished = [run for run in runs if run.summary]
    for task in dict.fromkeys(task for run in finished for task in run.tasks):
        if (
            all(task in run.tasks for run in finished)
            and len({run.block_steps(task) for run in finished}) > 1
        ):
            return task
    return None


def _smoothed(values: list[float]) -> list[float]:
    return [statistics.fmean(values[max(0, i - WINDOW + 1) : i + 1]) for i in range(len(values))]


def _curves(run: Run) -> str:
    plt = pyplot()
    tasks = run.tasks
    figure, axes = plt.subplots(2, len(tasks), figsize=(5.5 * len(tasks), 6), squeeze=False)
    for column, task in enumerate(tasks):
        steps = [r[metrics.of_task(task, "step")] for r in run.records if metrics.train(task, "loss") in r]
        losses = [r[metrics.train(task, "loss")] for r in run.records if metrics.train(task, "loss") in r]
        loss_axis, dev_axis = axes[0][column], axes[1][column]
        loss_axis.plot(steps, losses, color="#9ecae1", linewidth=0.8, label="loss")
        loss_axis.plot(steps, _smoothed(losses), color="#08519c", linewidth=1.6, label=f"mean of {WINDOW}")
        dev = run.dev_metric(task)
        evaluations = [r for r in run.records if dev in r]
        dev_axis.plot(
            [r[metrics.of_task(task, "step")] for r in evaluations],
            [100 * r[dev] for r in evaluations],
            marker="o",
            color="#a63603",
        )
        for axis in (loss_axis, dev_axis):
            _shade_blocks(axis, _task_blocks(run, task))
            axis.xaxis.set_major_locator(_integer_ticks())
            axis.grid(alpha=0.3)
        loss_axis.set_title(f"{run.title(task)}: training loss")
        loss_axis.legend(loc="upper right", fontsize=8)
        dev_axis.set_title(f"{run.title(task)}: dev {(dev or '/acc').rsplit('/', 1)[1]} (%)")
        dev_axis.set_xlabel(f"{task} step (its blocks shaded)")
    figure.tight_layout()
    return png_base64(figure)


def _task_blocks(run: Run, task: str) -> list[tuple[int, int]]:
    """The task's blocks as ranges of its own steps."""
    blocks, done = [], 0
    for record in run.records:
        if record.get(metrics.EVENT) == "block_end" and record.get(metrics.phase("task")) == task:
            steps = record[metrics.phase("steps")]
            blocks.append((done, done + steps))
            done += steps
    return blocks


def _shade_blocks(axis: Any, blocks: list[tuple[int, int]]) -> None:
    for index, (start, end) in enumerate(blocks):
        if index % 2:
            axis.axvspan(start, end, color="#eeeeee", zorder=0)
        if index:
            axis.axvline(start, color="#999999", linewidth=0.6, linestyle="--", zorder=0)


def _recovery_rows(run: Run) -> list[dict[str, Any]]:
    return [
        r
        for r in run.records
        if r.get(metrics.EVENT) == "block_end" and r.get(metrics.phase("jump")) is not None
    ]


def _recovery(runs: list[Run]) -> str:
    plt = pyplot()
    figure, (jumps, recoveries) = plt.subplots(1, 2, figsize=(11, 4))
    for run in runs:
        for task in run.tasks:
            rows = [r for r in _recovery_rows(run) if r[metrics.phase("task")] == task]
            if not rows:
                continue
            label = f"{run.name} {run.title(task)}"
            blocks = [r[metrics.phase("block")] for r in rows]
            jumps.plot(blocks, [r[metrics.phase("jump")] for r in rows], marker="o", label=label)
            recovered = [(r[metrics.phase("block")], r[metrics.phase("recovery_steps")]) for r in rows]
            recoveries.plot(
                [b for b, s in recovered if s is not None],
                [s for _, s in recovered if s is not None],
                marker="o",
                label=label,
            )
    jumps.set_title("loss jump after a switch (smoothed)", fontsize=10)
    recoveries.set_title("steps until the loss is back (recovered blocks)", fontsize=10)
    for axis in (jumps, recoveries):
        axis.xaxis.set_major_locator(_integer_ticks())
        axis.set_xlabel("block")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    figure.tight_layout()
    return png_base64(figure)


def _figure2(runs: list[Run], swept: str) -> str:
    """Each task's best dev metric against the swept task's steps per block (Liu et al. 2018, Figure 2)."""
    plt = pyplot()
    finished = sorted((run for run in runs if run.summary), key=lambda run: run.block_steps(swept))
    tasks = [task for task in finished[0].tasks if all(task in run.tasks for run in finished)]
    figure, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 4), squeeze=False)
    for axis, task in zip(axes[0], tasks, strict=True):
        points = [(r.block_steps(swept), _best(r, task, "dev")) for r in finished]
        points = [(x, 100 * y) for x, y in points if isinstance(y, int | float)]
        axis.plot([x for x, _ in points], [y for _, y in points], marker="o", color="#08519c")
        for x, y in points:
            axis.annotate(
                f"{y:.1f}", (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8
            )
        axis.margins(x=0.08, y=0.2)  # room for the labels
        axis.set_xscale("log", base=2)
        axis.set_xticks([x for x, _ in points], [str(x) for x, _ in points])
        axis.set_title(f"{finished[0].title(task)} dev (%) of the best checkpoint")
        others = " and ".join(finished[0].title(t) for t in finished[0].tasks if t != swept)
        axis.set_xlabel(
            f"{finished[0].title(swept)} steps per block" + (f" of {others} steps" if others else "")
        )
        axis.grid(alpha=0.3)
    figure.tight_layout()
    return png_base64(figure)


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    return plt


def _integer_ticks() -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def png_base64(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    pyplot().close(figure)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def run(paths: list[str], config: ReportConfig) -> Path:
    folders = find_runs(paths, config.group, Path(config.runs).expanduser())
    runs = [Run.read(folder) for folder in folders]
    if config.out:
        out = Path(config.out).expanduser()
    elif len(paths) == 1 and (Path(paths[0]) / "sweep.json").is_file():
        out = Path(paths[0]) / "report.html"
    else:
        out = Path("runs") / f"report-{time.strftime('%Y%m%d-%H%M%S')}.html"
    atomic.write_text(out, build(runs), "report")
    return out
