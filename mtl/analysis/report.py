"""`just report`: one self-contained HTML page (plots embedded) from run folders, no account needed.

    just report runs/sweeps/fig2                  # a sweep folder: all its runs
    just report runs/a runs/b out=report.html
    just report group=fig2                        # every run under runs/ in that W&B group

One chart per metric with every run overlaid (a colour per run): each task's training loss
and dev metric against the task's own step, the loss and dev charts of a task sharing their
x-axis, the task's blocks shaded when the runs share them; the loss recovery after each
block switch; Figure 2 (best dev metric against one task's steps per block) when the runs
differ in that key alone (else the page says which other keys differ); and a table of the
runs' swept keys, dev, test and every transfer report (standard, fast, other poolings) side
by side, the best value of each column in bold. Plots are SVG: sharp at any zoom.
"""

from __future__ import annotations

import html
import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mtl import metrics
from mtl.analysis import multitask, reproduce, significance

# Its command's config lives in configs.py (for --help without torch); importable from here too.
from mtl.analysis.configs import ReportConfig as ReportConfig
from mtl.analysis.decompose import DecomposeConfig, accuracy_cell, decomposition
from mtl.analysis.page import STYLE, integer_ticks, pyplot, smoothed, svg_base64
from mtl.config import apply_overrides, flattened, paths_and_keys
from mtl.console import say
from mtl.errors import UserError
from mtl.eval.contamination import seen_test_sets
from mtl.files import atomic
from mtl.formats.transfer_report import ITEMS_SUFFIX, short_note
from mtl.runs import NOT_COMPARED, Run, differing_keys, find_runs, is_baseline_folder
from mtl.transfer_tasks.registry import TRANSFER_TASKS, ordered


def build(every: list[Run]) -> str:
    """The HTML page. A baseline's folder (`just transfer baseline=...`) is a row of the results
    table and of the significance table; the figures are the trained runs'."""
    runs = [run for run in every if not run.is_baseline]
    figures: list[tuple[str, str]] = (
        [("Training loss and dev metric per task, every run", _curves(runs))] if runs else []
    )
    if any(_recovery_rows(run) for run in runs):
        figures.append(("Loss recovery after each block switch", _recovery(runs)))
    notes = []
    if (axis := _swept_task(runs)) is not None:
        swept = f"tasks.{axis}.steps"
        if others := sorted(differing_keys([run for run in runs if run.summary]) - {swept}):
            notes.append(
                f"No Figure 2: the finished runs differ in {swept} but also in {', '.join(others)}; "
                f"report runs that differ in {swept} alone."
            )
        else:
            title = f"Figure 2: best dev metric against {runs[0].title(axis)} steps per block"
            figures.append((title, _figure2(runs, axis)))
    if (curve := _learning_curves(runs)) is not None:
        figures.append(("Transfer against the share of each task's training data (train_fraction=)", curve))
    if (widths := _width_curves(runs)) is not None:
        title = "Transfer against the embedding's first dimensions (truncate_dim=; Matryoshka training keeps it up)"
        figures.append((title, widths))
    if (sized := _size_curves(runs, notes)) is not None:
        figures.append(("Transfer against embedding dimension (InferSent Figure 4, micro average)", sized))
    if (monitored := multitask.monitor_figure(runs, run_colours(runs))) is not None:
        figures.append(("Transfer during training (monitor=, fast mode on a fixed subsample)", monitored))
    for run in runs:
        if run.affinity:
            image, said = multitask.affinity_figure(run)
            figures.append((f"Task affinity of {run.name} (lookahead, Fifty et al. 2021): {said}", image))
            if (toward := multitask.target_figure(run)) is not None:
                figures.append((f"Affinity of {run.name} toward its watching tasks: {toward[1]}", toward[0]))
        if (mixing := multitask.mixing_figure(run)) is not None:
            kind = run.config.get("schedule", {}).get("schedule", "")
            figures.append(
                (f"Online mixing of {run.name} (schedule={kind}): the shares over the run", mixing)
            )
        if (balance := multitask.balance_figure(run)) is not None:
            balancer = run.config.get("schedule", {}).get("balancer", "sum")
            figures.append((f"Balancer of {run.name} (schedule=mixed, balancer={balancer})", balance))
    compared = _comparisons(every)
    significance = _significance(compared)
    affinity = [
        line
        for run in runs
        if run.affinity
        for line in [
            *multitask.affinity_table(run.name, run.affinity),
            *multitask.target_table(run.name, run.affinity),
        ]
    ]
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8"><title>mtl report</title>',
        f"<style>{STYLE}</style></head><body>",
        "<h1>mtl report</h1>",
        f"<p>{len(runs)} run(s){f' and {len(every) - len(runs)} baseline(s)' if len(every) > len(runs) else ''}, "
        f"written {html.escape(time.strftime('%Y-%m-%d %H:%M'))}.</p>",
        "<h2>Results</h2>",
        _results_table(every, _undecided(compared)),
        *(f'<p class="note">{html.escape(note)}</p>' for note in notes),
    ]
    for title, image in figures:
        parts += [
            f"<h2>{html.escape(title)}</h2>",
            f'<img src="data:image/svg+xml;base64,{image}" alt="{html.escape(title)}">',
        ]
    parts += [*affinity, *significance, *_decomposition(every), *_maxpool_links(every), "</body></html>"]
    return "\n".join(parts) + "\n"


def _results_table(runs: list[Run], undecided: set[tuple[str, str]] = frozenset()) -> str:
    """One row a run: its name, then its results (dev and test of each task, every transfer
    report), then how it was trained and the keys the runs differ in, and last the verdict
    against a paper's row (a sentence, the widest cell: before the keys it pushed them out of
    view). Results come first so a page of many differing keys still shows them without
    scrolling. `undecided`: the (report, task) columns where `just compare` tells no run from the
    first: no bold there, as a bold best would claim what the test does not."""
    reports = sorted({report for run in runs for report in run.transfer}, key=lambda r: (r != "transfer", r))
    transfer = [
        (report, task)
        for report in reports
        for task in _transfer_order({t for run in runs for t in run.transfer.get(report, {})})
    ]
    tasks = list(dict.fromkeys(task for run in runs for task in run.tasks))
    titles = {task: next(run.title(task) for run in runs if task in run.tasks) for task in tasks}
    evaluations = [
        (task, split)
        for task in tasks
        for split in ("dev", "test")
        if any(_best(run, task, split) is not None for run in runs)
    ]
    trained = [run for run in runs if not run.is_baseline]  # a baseline differs in every training key
    swept = sorted(differing_keys(trained)) if len(trained) > 1 else []
    results = [
        *(f"{titles[task]} {split}" for task, split in evaluations),
        *(
            task if report == "transfer" else f"{task} ({report.removeprefix('transfer-')})"
            for report, task in transfer
        ),
    ]
    # A run of a paper-* or infersent-* preset: its verdict against the paper's row (just reproduce)
    paper = {run.name: reproduce.verdict_line(run.folder) for run in runs}
    # the same sentence for every run (a sweep of one preset): said once under the table
    said_once = len(runs) > 1 and len(set(paper.values())) == 1 and next(iter(paper.values()))
    against_paper = ["vs paper"] if any(paper.values()) and not said_once else []
    columns = ["run", *results, "encoder", "steps per block", "steps", "stopped by", *swept, *against_paper]
    rows = []
    for run in runs:
        s, flat = run.summary, flattened(run.config)
        rows.append(
            [
                run.name,
                *(_evaluation_cell(run, task, split) for task, split in evaluations),
                *(_transfer_cell(run, report, task) for report, task in transfer),
                run.encoder,
                *(
                    ["–", "–", "baseline (just transfer)"]
                    if run.is_baseline
                    else [
                        run.schedule_cell,  # (mixed: "mixed: a + b")
                        str(s.get(metrics.GLOBAL_STEP, _last_step(run))),
                        s.get("stop_reason") or _unfinished_state(run),
                    ]
                ),
                *(str(flat.get(key, "–")) for key in swept),
                *([paper[run.name] or "–"] if against_paper else []),
            ]
        )
    seeds = _seed_groups(runs)
    rows = [_seeds_row([rows[i] for i in members], len(results)) for members in seeds]
    directions = [
        *(
            metrics.higher_is_better(next(r.metric(t) for r in runs if t in r.tasks) or "")
            for t, _ in evaluations
        ),
        *(True for _ in transfer),  # every transfer headline: accuracy or a correlation
    ]
    may_bold = [True] * len(evaluations) + [(report, task) not in undecided for report, task in transfer]
    best = {
        column: _best_value([row[column] for row in rows], higher)
        for column, higher, allowed in zip(range(1, 1 + len(results)), directions, may_bold, strict=True)
        # a column where every run scores the same has no best run to point at
        if len({row[column] for row in rows}) > 1 and allowed
    }
    # Tables narrow enough to read whole on a laptop (one table of everything once ran past the
    # window's edge): the training tasks' results, the transfer tasks' by kind (classification;
    # relatedness and similarity, as SentEval's papers split them), then how each run was trained.
    first = 1 + len(results)
    kinds = [_transfer_kind(report, task) for report, task in transfer]
    groups = [("Training tasks", list(range(1, 1 + len(evaluations))))] + [
        (title, [1 + len(evaluations) + i for i, kind in enumerate(kinds) if kind == title])
        for title in dict.fromkeys(kinds)
    ]
    tables = [
        (title, part)
        for title, indices in groups
        for part in (indices[at : at + TABLE_COLUMNS] for at in range(0, len(indices), TABLE_COLUMNS))
        if part
    ]
    results_html = "".join(
        (f"<h3>{html.escape(title)}</h3>" if len(tables) > 1 else "")
        + _html_table([columns[0], *(columns[i] for i in indices)],
                      [[(row[0], False), *((row[i], best.get(i) == row[i]) for i in indices)] for row in rows])
        for title, indices in tables
    )  # fmt: skip
    trained_table = _html_table(
        [columns[0], *columns[first:]],
        [[(value, False) for value in [row[0], *row[first:]]] for row in rows],
        results=False,
    )
    legend = (
        "<p>Bold: the best run of a column (the lowest perplexity or loss, the highest other score); "
        "whether the difference is real: the significance table below, where there is one"
        + ("; no bold where it tells no run from the first" if not all(may_bold) else "")
        + ".</p>"
        if len(rows) > 1
        else ""
    )
    if any(len(members) > 1 for members in seeds):
        legend += (
            "<p>A row of several seeds (runs that differ in seed= alone): each score the mean ± sample "
            "standard deviation over its seeds (of a headline's first number); bold goes by the mean.</p>"
        )
    stale = [
        f"{html.escape(run.name)} {html.escape(report)}: {html.escape(reason)}"
        for run in runs
        for report, reason in run.stale.items()
    ]
    if said_once:
        legend += f"<p>Against the paper's row, every run: {html.escape(str(said_once))}.</p>"
    shown = {f"{task}/{split}": f"{titles[task]} {split}" for task, split in evaluations}
    sampled: dict[tuple[str, str], list[str]] = {}  # (split, how) -> the runs that scored it so
    for run in runs:
        for split, how in _sampled(run).items():
            if split in shown:
                sampled.setdefault((shown[split], how), []).append(run.name)
    if sampled:
        parts = [
            f"{split}: {how}" + ("" if len(names) == len(runs) else f" ({', '.join(names)})")
            for (split, how), names in sampled.items()
        ]
        legend += (
            f'<p class="note">{SAMPLED_MARK} scored on a part of the split (the run\'s <code>max_eval=</code>), '
            f"not the whole dev or test set: {html.escape('; '.join(parts))}.</p>"
        )
    seen = {run.name: seen_test_sets(run.summary.get("contamination") or {}) for run in runs if run.summary}
    if any(task in seen.get(run.name, {}) for run in runs for _, task in transfer):
        legend += (
            f'<p class="note">{SEEN_MARK} the run\'s training data holds sentences of this test set '
            "(exact or near duplicates; summary.json's <code>contamination</code>): not a zero-shot score. "
            "<em>unseen</em>: the score on the test items that hold none of them (points: accuracy %, "
            "Pearson x 100), where the transfer report kept it.</p>"
        )
    if stale:
        legend += (
            f'<p class="note">{STALE_MARK} '
            + "; ".join(stale)
            + ". Run <code>just transfer run=&lt;run&gt;</code> again for the final encoder's result.</p>"
        )
    return f"{results_html}{legend}<h3>How each run was trained</h3>{trained_table}"


TABLE_COLUMNS = 9  # result columns in one table: nine of the widest cells (82.00/80.00) fit 1280 px


def _html_table(columns: list[str], rows: list[list[tuple[str, bool]]], results: bool = True) -> str:
    """A table in a box that scrolls should it ever be wider than the window; each row's cells
    (value, bold), the first the run's name. A table of results (class `results`) lets a cell
    wrap between its parts (`43.52 ±` / `1.36 ‡`): a wide table then fits rather than scrolls."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(_cell(value, bold) for value, bold in row) + "</tr>" for row in rows)
    kind = ' class="results"' if results else ""
    return f'<div class="wide"><table{kind}><tr>{head}</tr>{body}</table></div>'


def _transfer_kind(report: str, task: str) -> str:
    """The table a transfer column goes to, per transfer report: classification (accuracy) or
    relatedness and similarity (correlations, the task's registered headline)."""
    suffix = "" if report == "transfer" else f" ({report})"
    headline = TRANSFER_TASKS[task].metrics if task in TRANSFER_TASKS else ("acc",)
    correlated = headline[0] in ("pearson", "spearman", "all/pearson", "all/spearman")
    return f"Transfer{suffix}: " + (
        "relatedness and similarity (correlations x 100)" if correlated else "classification (accuracy, %)"
    )


STALE_MARK = "†"
SEEN_MARK = "‡"  # the run trained on sentences of this test set (its contamination ledger)
SAMPLED_MARK = "§"  # a dev or test score on a part of the split (max_eval=)
MARKS = (SAMPLED_MARK, SEEN_MARK, STALE_MARK)  # what a seeds row keeps of its seeds' cells


def _seed_groups(runs: list[Run]) -> list[list[int]]:
    """The runs (by index, in order of first appearance) whose configs differ in `run.seed` alone:
    the seeds of one configuration, one row of the table."""
    groups: dict[str, list[int]] = {}
    for index, run in enumerate(runs):
        flat = flattened(run.config)
        same = {k: v for k, v in flat.items() if not k.startswith((*NOT_COMPARED, "run.seed"))}
        groups.setdefault(json.dumps(same, sort_keys=True, default=str), []).append(index)
    # two runs of one seed (a copy, a rerun) are one sample twice, not two seeds: rows of their own
    return [
        members
        for found in groups.values()
        for members in (
            [found]
            if len({runs[i].config.get("run", {}).get("seed") for i in found}) == len(found)
            else [[i] for i in found]
        )
    ]


def _seeds_name(names: list[str]) -> str:
    """A run's name; the seeds of one configuration as one (`lr1e-3 (3 seeds)`, from a `seeds=`
    sweep's `lr1e-3-seed1`, ...)."""
    if len(names) == 1:
        return names[0]
    stem = {re.sub(r"[-_]?seed[-_]?\d+$", "", name) for name in names}
    return (
        f"{stem.pop()} ({len(names)} seeds)"
        if len(stem) == 1
        else f"{names[0]} and {len(names) - 1} more seeds"
    )


def _seeds_row(rows: list[list[str]], results: int) -> list[str]:
    """The table's row of one configuration's seeds: its name, each result column's mean ± sd over
    the seeds (a mark any seed's cell carries kept), every other column as the seeds share it
    (differing values listed)."""
    if len(rows) == 1:
        return rows[0]
    merged = [_seeds_name([row[0] for row in rows])]
    for column in range(1, len(rows[0])):
        cells = [row[column] for row in rows]
        numbers = [_first_number(cell) for cell in cells]
        if column <= results and all(n is not None for n in numbers):
            marks = "".join(f" {mark}" for mark in MARKS if any(mark in cell for cell in cells))
            merged.append(f"{np.mean(numbers):.2f} ±\u00a0{np.std(numbers, ddof=1):.2f}{marks}")
        else:
            merged.append(", ".join(dict.fromkeys(cells)))
    return merged


def _cell(value: str, bold: bool) -> str:
    """A table cell; a path shows its last part (the whole path on hover), so a column of
    vectors files or data folders stays as narrow as their names."""
    shown = str(significance.short_value(value)) or value
    text = f"<strong>{html.escape(shown)}</strong>" if bold else html.escape(shown)
    hover = f' title="{html.escape(value)}"' if shown != value else ""
    return f"<td{hover}>{text}</td>"


def _transfer_cell(run: Run, report: str, task: str) -> str:
    value = run.transfer.get(report, {}).get(task, "–")
    if value != "–" and task in seen_test_sets(run.summary.get("contamination") or {}):
        value = f"{value} {SEEN_MARK}"
        entry = run.decontaminated.get(report, {}).get(task)
        if entry and entry["seen"] and entry["unseen_score"] is not None:
            value = f"{value} (unseen\u00a0{entry['unseen_score']:.2f}{short_note(entry)})"
    return f"{value} {STALE_MARK}" if report in run.stale and value != "–" else value


def _transfer_order(tasks: set[str]) -> list[str]:
    """SentEval's order (Table 2's columns), then any other task by name."""
    return ordered(tasks)


def _best_value(values: list[str], higher_is_better: bool = True) -> str | None:
    """The cell holding the best score of a column (its first number: MRPC's accuracy, STS's
    Pearson), when at least two runs have one."""
    scored = [(number, value) for value in values if (number := _first_number(value)) is not None]
    if len(scored) < 2:
        return None
    return (max if higher_is_better else min)(scored)[1]


def _sampled(run: Run) -> dict[str, str]:
    """ "task/split" -> how the run's scores of it were measured, for each split it scored on a part."""
    scored = metrics.scored_on(run.config, run.summary)
    return {split: how for split in scored if (how := metrics.sample_of(scored, split))}


def _evaluation_cell(run: Run, task: str, split: str) -> str:
    """A run's best score of a task on a split, § after one it measured on a part of the split."""
    value = _best(run, task, split)
    return _score(value, run.metric(task)) + (
        f" {SAMPLED_MARK}" if value is not None and f"{task}/{split}" in _sampled(run) else ""
    )


def _best(run: Run, task: str, split: str) -> Any:
    """The best checkpoint's value of the task's metric on `split`, from the summary."""
    metric = run.metric(task)
    return run.summary.get(metrics.best(metrics.evaluation(task, split, metric))) if metric else None


def _score(value: Any, metric: str | None) -> str:
    """A fraction (accuracy, a correlation) in %; a perplexity or loss as it is."""
    if not isinstance(value, int | float):
        return "–"
    return f"{100 * value:.2f}" if metrics.is_fraction(metric or "") else f"{value:.2f}"


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


def _curves(runs: list[Run]) -> str:
    """A column per task: its training loss (smoothed; raw too for one run) over its dev metric,
    every run overlaid in its own colour (a configuration's seeds as one: `_band`), the two charts
    sharing the task's step axis."""
    plt = pyplot()
    tasks = list(dict.fromkeys(task for run in runs for task in run.tasks))
    figure, axes = plt.subplots(2, len(tasks), figsize=(5.5 * len(tasks), 6.5), squeeze=False, sharex="col")
    colours = run_colours(runs)
    for column, task in enumerate(tasks):
        loss_axis, dev_axis = axes[0][column], axes[1][column]
        having = [run for run in runs if task in run.tasks]
        metric = "acc"
        # a run (or a configuration's seeds) -> its smoothed losses, to keep one diverged run
        # from flattening the rest
        drawn: dict[str, list[float]] = {}
        for members in _seed_groups(having):
            seeds = [having[i] for i in members]
            colour, label = colours[seeds[0].name], _seeds_name([run.name for run in seeds])
            # (a value logged as null was not finite: a diverged step's loss, say; not drawn)
            losses = [_loss_series(run, task) for run in seeds]
            if len(runs) == 1:
                loss_axis.plot(*losses[0], color=colour, alpha=0.3, linewidth=0.8)
            drawn[label] = _band(loss_axis, [(s, list(smoothed(v))) for s, v in losses], colour, label)[1]
            if (dev := seeds[0].dev_metric(task)) is None:
                continue
            metric = metrics.metric_name(dev)
            _band(dev_axis, [_dev_series(run, task, dev) for run in seeds], colour, label, marker="o")
        blocks = {tuple(_task_blocks(run, task)) for run in having}
        for axis in (loss_axis, dev_axis):
            if len(blocks) == 1:  # shade only blocks every run shares
                _shade_blocks(axis, list(next(iter(blocks))))
            axis.xaxis.set_major_locator(integer_ticks())
            axis.grid(alpha=0.3)
        title = having[0].title(task)
        watching = not any(run.trains(task) for run in having)
        never = not watching and not any(drawn.values())
        loss_axis.set_title(
            f"{title}: watches the run (train=false), no training loss"
            if watching
            else f"{title}: never trained in these runs (no step of it logged)"
            if never
            else f"{title}: training loss (mean of {metrics.LOSS_WINDOW} steps)",
            fontsize=10,
        )
        if off := _off_the_chart(drawn):
            (bottom, top), names = off
            loss_axis.set_ylim(bottom=bottom, top=top)
            loss_axis.text(0.99, 0.97, f"off the chart: {names}", transform=loss_axis.transAxes,
                           ha="right", va="top", fontsize=8, color="#a00")  # fmt: skip
        dev_axis.set_title(
            f"{title}: dev {metric}" + (" (%)" if metrics.is_fraction(metric) else ""), fontsize=10
        )
        if all(run.mixed for run in having):  # no blocks: every task, every step
            shaded = " (schedule=mixed: every task at every step)"
        else:
            shaded = (
                " (its blocks shaded)" if len(blocks) == 1 else " (blocks differ between runs: not shaded)"
            )
        dev_axis.set_xlabel(f"{task} step{shaded}")
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="upper center", ncol=min(len(runs), 4), fontsize=8, frameon=False)
    figure.tight_layout(rect=(0, 0, 1, 1 - 0.04 * ((len(runs) + 3) // 4)))
    return svg_base64(figure)


def _loss_series(run: Run, task: str) -> tuple[list[int], list[float]]:
    """(the task's steps, its training losses) of a run, the steps whose loss was finite."""
    trained = [
        r
        for r in run.records
        if r.get(metrics.train(task, "loss")) is not None and r.get(metrics.of_task(task, "step")) is not None
    ]
    return [r[metrics.of_task(task, "step")] for r in trained], [
        r[metrics.train(task, "loss")] for r in trained
    ]


def _dev_series(run: Run, task: str, dev: str) -> tuple[list[int], list[float]]:
    """(steps, the dev metric in % where it is a fraction) of a run's evaluations; a task that only
    watched (train=false) has no steps of its own: the run's steps."""
    scale = 100 if metrics.is_fraction(metrics.metric_name(dev)) else 1
    evaluations = [r for r in run.records if r.get(dev) is not None]
    steps = [r.get(metrics.of_task(task, "step"), r[metrics.GLOBAL_STEP]) for r in evaluations]
    return steps, [scale * r[dev] for r in evaluations]


def _band(
    axis: Any, series: list[tuple[list[int], list[float]]], colour: Any, label: str, marker: str = ""
) -> tuple[list[int], list[float]]:
    """One run's curve; several seeds' as their mean over the steps every seed logged, the band
    between the lowest and the highest seed shaded. The steps and values drawn."""
    if len(series) == 1:
        steps, values = series[0]
    else:
        by_step = [dict(zip(*one, strict=True)) for one in series]
        steps = sorted(set.intersection(*(set(values) for values in by_step)))
        table = np.array([[values[step] for step in steps] for values in by_step]).reshape(len(series), -1)
        values = list(table.mean(axis=0))
        axis.fill_between(steps, table.min(axis=0), table.max(axis=0), color=colour, alpha=0.2, linewidth=0)
    style = {"marker": marker, "markersize": 3} if marker else {"linewidth": 1.6}
    axis.plot(steps, values, color=colour, label=label, **style)
    return steps, values


def _off_the_chart(losses: dict[str, list[float]]) -> tuple[tuple[float, float], str] | None:
    """The loss axis's range and the runs above it, when one run's loss (a diverged one: ~400
    against ~1) would flatten every other curve to a line at the bottom; None when all fit."""
    typical = {name: float(np.percentile(values, 95)) for name, values in losses.items() if values}
    if len(typical) < 2:
        return None
    usual = float(np.median(list(typical.values())))
    high = {name: max(losses[name]) for name in typical if max(losses[name]) > 5 * usual}
    if not high or len(high) == len(typical):
        return None
    shown = ", ".join(f"{name} (up to {value:.3g})" for name, value in high.items())
    top = 2 * max(value for name, value in typical.items() if name not in high)
    low = min(min(values) for name, values in losses.items() if values and name not in high)
    return (low - 0.05 * (top - low), top), shown


def run_colours(runs: list[Run]) -> dict[str, Any]:
    """A colour per run, the same in every chart of the page."""
    import matplotlib  # as page.pyplot(): only when a page is drawn

    palette = matplotlib.colormaps["tab10" if len(runs) <= 10 else "tab20"]
    return {run.name: palette(index % palette.N) for index, run in enumerate(runs)}


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
    colours = run_colours(runs)
    markers = "os^Dv"
    for run in runs:
        for number, task in enumerate(run.tasks):
            rows = [r for r in _recovery_rows(run) if r[metrics.phase("task")] == task]
            if not rows:
                continue
            label = f"{run.name} {run.title(task)}"
            style = {"color": colours[run.name], "marker": markers[number % len(markers)], "label": label}
            blocks = [r[metrics.phase("block")] for r in rows]
            jumps.plot(blocks, [r[metrics.phase("jump")] for r in rows], **style)
            recovered = [(r[metrics.phase("block")], r[metrics.phase("recovery_steps")]) for r in rows]
            recoveries.plot(
                [b for b, s in recovered if s is not None],
                [s for _, s in recovered if s is not None],
                **style,
            )
    jumps.set_title("loss jump after a switch (smoothed)", fontsize=10)
    recoveries.set_title("steps until the loss is back (recovered blocks)", fontsize=10)
    for axis in (jumps, recoveries):
        axis.xaxis.set_major_locator(integer_ticks())
        axis.set_xlabel("block")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    figure.tight_layout()
    return svg_base64(figure)


def _figure2(runs: list[Run], swept: str) -> str:
    """Each task's best dev metric against the swept task's steps per block (Liu et al. 2018, Figure 2)."""
    plt = pyplot()
    finished = sorted((run for run in runs if run.summary), key=lambda run: run.block_steps(swept))
    tasks = [task for task in finished[0].tasks if all(task in run.tasks for run in finished)]
    figure, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 4), squeeze=False)
    for axis, task in zip(axes[0], tasks, strict=True):
        points = [(r.block_steps(swept), _best(r, task, "dev")) for r in finished]
        scale = 100 if metrics.is_fraction(finished[0].metric(task) or "") else 1
        points = [(x, scale * y) for x, y in points if isinstance(y, int | float)]
        axis.plot([x for x, _ in points], [y for _, y in points], marker="o", color="#08519c")
        for x, y in points:
            axis.annotate(
                f"{y:.1f}", (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8
            )
        axis.margins(x=0.08, y=0.2)  # room for the labels
        axis.set_xscale("log", base=2)
        axis.set_xticks([x for x, _ in points], [str(x) for x, _ in points])
        unit = " (%)" if scale == 100 else f" {finished[0].metric(task)}"
        axis.set_title(f"{finished[0].title(task)} dev{unit} of the best checkpoint")
        others = " and ".join(finished[0].title(t) for t in finished[0].tasks if t != swept)
        axis.set_xlabel(
            f"{finished[0].title(swept)} steps per block" + (f" of {others} steps" if others else "")
        )
        axis.grid(alpha=0.3)
    figure.tight_layout()
    return svg_base64(figure)


# compare's config, encoders, comparisons and its verdicts across tasks
Compared = tuple[significance.SignificanceConfig, list, list[significance.Comparison], list]


def _comparisons(runs: list[Run]) -> Compared | None:
    """`just compare` on the runs (seeds grouped), each encoder against the first, on the first
    transfer report they all keep per-item results of; None when there is no such report or
    fewer than two encoders."""
    if len(runs) < 2:
        return None
    shared = [
        report
        for report in ("transfer", "transfer-fast", *sorted({r for run in runs for r in run.transfer}))
        if all((run.folder / f"{report}{ITEMS_SUFFIX}").is_file() for run in runs)
    ]
    if not shared:
        return None
    # compare's own replicate count and seed: one pair gets one interval, on the page and from compare
    config = significance.SignificanceConfig(report=shared[0])
    try:
        encoders = significance.group_runs([run.folder for run in runs], config.report)
        significance.add_unseen(encoders)  # a row without the test items a run trained on, where any did
        return config, encoders, *significance.compare_with_means(encoders, config, against_first=True)
    except UserError:
        return None  # a single encoder (seeds only), or no task in common: nothing to test


def _undecided(compared: Compared | None) -> set[tuple[str, str]]:
    """(report, task) of each task where no comparison found a difference."""
    if compared is None:
        return set()
    config, _, comparisons, _ = compared
    tasks = {c.task for c in comparisons}
    decided = {c.task for c in comparisons if c.verdict != "no evidence"}
    return {(config.report, task) for task in tasks - decided}


def _significance(compared: Compared | None) -> list[str]:
    """`just compare`'s table for the runs; nothing when there was nothing to compare."""
    if compared is None:
        return []
    config, encoders, comparisons, means = compared
    head, rows = significance.table(encoders, comparisons, config)
    table = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in rows)
    labels = significance.table_labels(encoders)
    named = [f"{html.escape(label)} = {html.escape(name)}" for name, label in labels.items() if label != name]
    return [
        f"<h2>Is the difference real? ({html.escape(config.report)}, studentized: seeds, then test items)</h2>",
        f"<p>{html.escape(significance.explanation(comparisons, config))}</p>",
        f'<div class="wide"><table><tr>{table}</tr>{body}</table></div>',
        *([f"<p>{'; '.join(named)}.</p>"] if named else []),
        "<p>Each encoder against the first; points: accuracy in %, Pearson r x 100 (STS: mean over "
        "subsets); runs that differ only in seed= are one encoder. Every pair: <code>just compare</code> "
        f"(the same {config.resamples:,} replicates, so the same intervals).</p>",
        *_across(encoders, means, config),
    ]


def _across(encoders: list, means: list, config: significance.SignificanceConfig) -> list[str]:
    """compare's verdicts across tasks, below its per-task table."""
    if not means:
        return []
    intro, head, rows = significance.across_table(encoders, means, config)
    cells = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in rows)
    return [
        f"<p>{html.escape(intro)}</p>",
        '<div class="wide"><table><tr>'
        + "".join(f"<th>{html.escape(h)}</th>" for h in head)
        + f"</tr>{cells}</table></div>",
    ]


def _decomposition(runs: list[Run]) -> list[str]:
    """For a one-run page, `just decompose`'s table of its first report with per-item results
    (nothing when the transfer data is not at hand: the page never needs it)."""
    if len(runs) != 1:
        return []
    run = runs[0]
    reports = [
        r for r in ("transfer", *sorted(run.transfer)) if (run.folder / f"{r}{ITEMS_SUFFIX}").is_file()
    ]
    if not reports:
        return []
    try:
        header, rows = decomposition(DecomposeConfig(run=str(run.folder), report=reports[0]))
    except UserError:
        return []
    tasks = list(dict.fromkeys(row[0] for row in rows))
    parts = list(dict.fromkeys((by, label) for _, by, label, _, _ in rows))
    parts.sort(key=lambda part: part[0] == "all")  # every task's classes before the whole set
    cell = {(task, by, label): (count, accuracy) for task, by, label, count, accuracy in rows}
    head = "".join(f"<th>{html.escape(h)}</th>" for h in ["by", "part", *tasks])
    body = "".join(
        f"<tr><td>{html.escape(by)}</td><td>{html.escape(label)}</td>"
        + "".join(
            f"<td>{'' if (value := cell.get((task, by, label))) is None or value[1] is None else accuracy_cell(value[1], value[0])}</td>"
            for task in tasks
        )
        + "</tr>"
        for by, label in parts
    )
    return [
        "<h2>Where the accuracy comes from (just decompose)</h2>",
        f"<p>{html.escape(header)}; each cell: accuracy [its 95% Wilson interval] (items).</p>",
        f'<div class="wide"><table><tr>{head}</tr>{body}</table></div>',
    ]


def _maxpool_links(runs: list[Run]) -> list[str]:
    pages = [run for run in runs if (run.folder / "maxpool.html").is_file()]
    if not pages:
        return []
    links = "".join(
        f'<li><a href="{html.escape((run.folder / "maxpool.html").resolve().as_uri())}">{html.escape(run.name)}</a></li>'
        for run in pages
    )
    return ["<h2>What max pooling picks (just maxpool)</h2>", f"<ul>{links}</ul>"]


def _learning_curves(runs: list[Run]) -> str | None:
    """Per transfer task, its score against the share of training data the classifier saw
    (reports `<report>-frac<f>`, and `<report>` itself at 1), a line per run and report."""

    def share(run: Run, report: str) -> tuple[str, float] | None:
        base, _, fraction = report.rpartition("-frac")
        return (base, float(fraction)) if base else (report, 1.0)

    return _per_task_curves(runs, share, "share of training data", log_base=10)


def _width_curves(runs: list[Run]) -> str | None:
    """Per transfer task, its score against the width scored (reports `<report>-dim<N>`, and
    `<report>` itself at the encoder's full width), a line per run and report: how much of it
    the first dimensions keep (Kusupati et al. 2022's curve, for runs trained with
    `<task>.matryoshka=`, or any other)."""

    def width(run: Run, report: str) -> tuple[str, float] | None:
        base, _, dims = report.rpartition("-dim")
        if base and dims.isdigit():
            return base, int(dims)
        full = run.sizes.get(report, (0, 0.0))[0]
        return (report, full) if full else None  # a full-width report without its width: left out

    return _per_task_curves(runs, width, "dimensions scored", log_base=2, ticks=True)


def _per_task_curves(
    runs: list[Run],
    place: Callable[[Run, str], tuple[str, float] | None],
    xlabel: str,
    log_base: int,
    ticks: bool = False,
) -> str | None:
    """A panel per transfer task, its score against the x that `place(run, report)` gives a
    report (with the report's line: its base name), a line per run and base; None unless some
    line has two points. `ticks`: the x values themselves as ticks."""
    lines: dict[tuple[str, str], dict[str, list[tuple[float, float]]]] = {}
    for run in runs:
        for report, scores in run.transfer.items():
            if (placed := place(run, report)) is None:
                continue
            base, x = placed
            for task, headline in scores.items():
                if (value := _first_number(headline)) is not None:
                    lines.setdefault((run.name, base), {}).setdefault(task, []).append((x, value))
    curves = {
        key: {task: sorted(points) for task, points in tasks.items() if len(points) > 1}
        for key, tasks in lines.items()
    }
    tasks = sorted({task for by_task in curves.values() for task in by_task})
    if not tasks:
        return None
    plt = pyplot()
    columns = min(len(tasks), 4)
    rows = -(-len(tasks) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4 * columns, 3.2 * rows), squeeze=False)
    colours = run_colours(runs)
    for axis, task in zip(axes.flat, tasks, strict=False):
        for (name, base), by_task in sorted(curves.items()):
            if task in by_task:
                points = by_task[task]
                axis.plot(
                    *zip(*points, strict=True), marker="o", color=colours[name], label=f"{name} ({base})"
                )
        axis.set_xscale("log", base=log_base)
        if ticks:
            xs = sorted({x for by_task in curves.values() for x, _ in by_task.get(task, [])})
            axis.set_xticks(xs, [f"{x:g}" for x in xs])
        axis.set_title(task, fontsize=10)
        axis.set_xlabel(xlabel)
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(tasks) :]:
        axis.set_visible(False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="upper center", ncol=min(len(labels), 3), fontsize=8, frameon=False)
    figure.tight_layout(rect=(0, 0, 1, 0.92))
    return svg_base64(figure)


def _first_number(headline: str) -> float | None:
    """A headline's first number (accuracy %, Pearson r, STS's Pearson in `.63/.61`), a mark after
    it (§ sampled, ‡ seen in training) aside."""
    try:
        return float(headline.split("/")[0].split()[0])
    except (ValueError, IndexError):
        return None


# What sets an encoder's size: a line of the size chart joins runs that differ in these alone.
SIZE_KEYS = (
    "model.hidden",
    "model.bottleneck",
    "model.options.transformer_ffn",
    "model.options.transformer_heads",
)


def _size_curves(runs: list[Run], notes: list[str] | None = None) -> str | None:
    """Per encoder (architecture and pooling), the micro average of transfer dev accuracies against
    the embedding dimension, one line per transfer report, joining runs that differ in their size
    alone (InferSent's Figure 4); None unless some encoder has two sizes. Runs left out, and why,
    go to `notes`: a line through runs that differ in more than size would draw a false trend."""
    notes = [] if notes is None else notes
    groups: dict[tuple[str, str], list[tuple[int, float, Run]]] = {}
    for run in runs:
        model = run.config["model"]
        label = f"{model['encoder']} {model.get('pooling', '')}".strip()
        for report, (dim, micro) in run.sizes.items():
            groups.setdefault((label, report), []).append((dim, micro, run))
    lines: dict[tuple[str, str], list[tuple[int, float]]] = {}
    alone = []  # said only where a chart (or its absence) is about sizes at all
    for (label, report), members in sorted(groups.items()):
        if len({dim for dim, _, _ in members}) < 2:
            names = ", ".join(f"{run.name} ({dim}-d)" for dim, _, run in members)
            alone.append(f"Not in the size chart ({report}): {names}, the only size of {label} here.")
            continue
        if others := sorted(differing_keys([run for _, _, run in members], ignored=SIZE_KEYS)):
            notes.append(
                f"No size line for {label} ({report}): its runs differ in {', '.join(others)} besides their "
                "size; report runs that differ in size alone."
            )
            continue
        lines[(label, report)] = sorted((dim, micro) for dim, micro, _ in members)
    sizes_compared = bool(lines) or any(note.startswith("No size line") for note in notes)
    notes.extend(alone if sizes_compared else [])
    if not lines:
        return None
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(7, 4.2))
    for (label, report), points in sorted(lines.items()):
        axis.plot([d for d, _ in points], [m for _, m in points], marker="o", label=f"{label} ({report})")
    axis.set_xscale("log", base=2)
    dims = sorted({d for points in lines.values() for d, _ in points})
    axis.set_xticks(dims, [str(d) for d in dims])
    axis.set_xlabel("embedding dimension")
    axis.set_ylabel("transfer: micro average of dev accuracy (%)")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    return svg_base64(figure)


def run(paths: list[str], config: ReportConfig) -> Path:
    folders = find_runs(paths, config.group, Path(config.runs).expanduser())
    runs = [Run.of_baseline(folder) if is_baseline_folder(folder) else Run.read(folder) for folder in folders]
    for why in (why for run in runs for why in run.damaged):
        say(f"left out of the report: {why}")
    if config.out:
        out = Path(config.out).expanduser()
    elif len(paths) == 1 and (Path(paths[0]) / "sweep.json").is_file():
        out = Path(paths[0]) / "report.html"
    else:
        out = atomic.fresh_path(Path("runs"), "report", ".html")
    atomic.write_text(out, build(runs), "report")
    return out


def command(args: Sequence[str]) -> None:
    """`just report PATH ... key=value`."""
    paths, keys = paths_and_keys(args)
    print(f"report written to {run(paths, apply_overrides(ReportConfig(), keys))}")
