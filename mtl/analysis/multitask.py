"""The report's multitask sections: the online task affinity of a run (affinity_every=), as
heatmaps per block and the run's mean with a one-line reading, and a mixed run's balancer
(each task's loss weight and the cosine of the tasks' encoder gradients against steps)."""

from __future__ import annotations

from typing import Any

import numpy as np

from mtl import metrics
from mtl.analysis.page import pyplot, smoothed, svg_base64
from mtl.runs import Run

MOST_BLOCKS = 6  # heatmaps per run besides its mean: the first, the last and evenly between


def mean_matrix(rows: list[dict[str, Any]]) -> np.ndarray:
    return np.mean([np.array(row["matrix"], dtype=float) for row in rows], axis=0)


def reading(tasks: list[str], mean: np.ndarray) -> str:
    """One line on a run's mean affinity: the pair where one task helps another most, and the
    one where it hurts most (`squad helps nli: +0.012 mean; nli hurts squad: -0.003 mean`)."""
    pairs = [(mean[i, j], a, b) for i, a in enumerate(tasks) for j, b in enumerate(tasks) if i != j]
    if not pairs:
        return "one training task: no pair to measure"
    best, worst = max(pairs), min(pairs)
    parts = [f"{best[1]} {'helps' if best[0] > 0 else 'hurts'} {best[2]}: {_signed(best[0])} mean"]
    if worst is not best and worst[0] < 0 < best[0]:
        parts.append(f"{worst[1]} hurts {worst[2]}: {_signed(worst[0])} mean")
    return "; ".join(parts)


def _signed(value: float) -> str:
    """+0.012; a value too small for three decimals keeps two significant digits (+1.5e-05)."""
    return f"{value:+.3f}" if abs(value) >= 0.001 or value == 0 else f"{value:+.2g}"


def by_block(rows: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The measurements grouped by the block they fell in, each labelled `block 3 (squad)`."""
    groups: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(int(row.get("block", 0)), []).append(row)
    return [(f"block {block} ({members[0].get('task', '')})", members) for block, members in groups.items()]


def affinity_figure(run: Run) -> tuple[str, str]:
    """(SVG as base64, the reading) of one run: its mean matrix first, then some of its blocks'."""
    rows = run.affinity
    tasks = list(rows[0]["tasks"])
    blocks = by_block(rows)
    if len(blocks) > MOST_BLOCKS:
        chosen = np.linspace(0, len(blocks) - 1, MOST_BLOCKS).round().astype(int)
        blocks = [blocks[i] for i in dict.fromkeys(chosen.tolist())]
    panels = [(f"mean of {len(rows)} measurements", rows), *blocks]
    matrices = [mean_matrix(members) for _, members in panels]
    limit = max(1e-6, max(float(np.abs(m).max()) for m in matrices))
    plt = pyplot()
    columns = min(4, len(panels))
    rows_of_panels = -(-len(panels) // columns)
    size = 1.6 + 0.8 * len(tasks)
    figure, axes = plt.subplots(
        rows_of_panels,
        columns,
        figsize=(size * columns + 1.2, size * rows_of_panels),
        squeeze=False,
        layout="constrained",
    )
    flat = axes.flatten().tolist()
    for axis in flat[len(panels) :]:
        axis.set_visible(False)
    for axis, (title, _), matrix in zip(flat, panels, matrices, strict=False):
        image = axis.imshow(matrix, cmap="RdBu", vmin=-limit, vmax=limit)
        axis.set_xticks(range(len(tasks)), tasks, fontsize=8)
        axis.set_yticks(range(len(tasks)), tasks, fontsize=8)
        axis.set_xlabel("helped task (j)", fontsize=8)
        axis.set_ylabel("stepped task (i)", fontsize=8)
        axis.set_title(title, fontsize=9)
        for i in range(len(tasks)):
            for j in range(len(tasks)):
                axis.text(j, i, f"{matrix[i, j]:+.2g}", ha="center", va="center", fontsize=8)
    figure.colorbar(image, ax=flat, shrink=0.8, label="Z(i → j)")
    return svg_base64(figure), reading(tasks, matrices[0])


def balance_figure(run: Run) -> str | None:
    """A mixed run's loss weights and gradient cosines against steps (means of
    `metrics.LOSS_WINDOW` steps); None when the run logged none."""
    steps = [r for r in run.records if any(k.startswith("balance/") for k in r)]
    keys = sorted({k for r in steps for k in r if k.startswith("balance/")})
    if not keys:
        return None
    plt = pyplot()
    figure, (weights, cosines) = plt.subplots(1, 2, figsize=(11, 3.6))
    for key in keys:
        points = [(r[metrics.GLOBAL_STEP], r[key]) for r in steps if key in r]
        name = key.removeprefix("balance/")
        axis = cosines if name.startswith("cosine/") else weights
        label = name.removeprefix("cosine/").removesuffix("/weight")
        axis.plot([s for s, _ in points], smoothed([v for _, v in points]), label=label)
    weights.set_title(f"loss weight per task (mean of {metrics.LOSS_WINDOW} steps)", fontsize=10)
    cosines.set_title(
        f"cosine of task gradients on the encoder (mean of {metrics.LOSS_WINDOW} steps)", fontsize=10
    )
    cosines.axhline(0, color="grey", linewidth=0.8)
    for axis in (weights, cosines):
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    return svg_base64(figure)


def monitor_figure(runs: list[Run], colours: dict[str, Any]) -> str | None:
    """monitor=: each transfer task's score against steps, a panel per metric, every run
    overlaid; None when no run monitored any."""
    keys = sorted(
        {k for run in runs for r in run.records for k in r if k.startswith("monitor/") and k.count("/") == 2}
    )
    if not keys:
        return None
    plt = pyplot()
    columns = min(3, len(keys))
    rows = -(-len(keys) // columns)
    figure, axes = plt.subplots(
        rows, columns, figsize=(4.6 * columns, 3.2 * rows), squeeze=False, layout="constrained"
    )
    flat = axes.flatten().tolist()
    for axis in flat[len(keys) :]:
        axis.set_visible(False)
    for axis, key in zip(flat, keys, strict=False):
        for run in runs:
            points = [
                (r["global_step"], r[key])
                for r in run.records
                if key in r and r.get("phase/event") == "evaluation"
            ]
            if points:
                axis.plot(
                    *zip(*points, strict=True),
                    marker="o",
                    markersize=3,
                    color=colours[run.name],
                    label=run.name,
                )
        axis.set_title(key.removeprefix("monitor/"), fontsize=10)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
    flat[0].legend(fontsize=8)
    return svg_base64(figure)
