"""What the analysis pages share: their style sheet and plots as embedded SVG."""

from __future__ import annotations

import base64
import io
import statistics
from typing import Any

from mtl import metrics

STYLE = (
    # tables and charts take a wide window's width; prose keeps a readable measure
    "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1800px;padding:0 1em;color:#222}"
    "p,ul,ol,h1,h2,h3,pre,.note{max-width:1100px}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
    "th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}img{max-width:100%}"
    ".note{background:#fff8e1;border-left:4px solid #f0b400;padding:6px 10px}"
    ".wide{overflow-x:auto}td{white-space:nowrap}"  # many transfer columns: the table scrolls, cells stay whole
    # a result wraps between its parts (mean, sd, marks) rather than widen its table past the window
    ".results td:not(:first-child){white-space:normal;min-width:4.5em}"
    # and the run's name stays in view while it does
    ".wide td:first-child,.wide th:first-child{position:sticky;left:0;background:#fff;z-index:1}"
    ".wide th:first-child{background:#f3f3f3}"
)


def smoothed(values: list[float]) -> list[float]:
    """Each value as the mean of the last `metrics.LOSS_WINDOW` (fewer at the start): a curve's line."""
    return [statistics.fmean(values[max(0, i - metrics.LOSS_WINDOW + 1) : i + 1]) for i in range(len(values))]


def pyplot() -> Any:
    # Imported when a page draws its first plot (a second of start-up otherwise), its backend first.
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    return plt


def integer_ticks() -> Any:
    from matplotlib.ticker import MaxNLocator  # as pyplot(): only when a plot is drawn

    return MaxNLocator(integer=True)


def svg_base64(figure: Any) -> str:
    """The figure as SVG (sharp at any zoom), base64 for a data: URI."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="svg")
    pyplot().close(figure)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def forest(verdicts: list[dict], names: list[str], name_key: str, baseline: str) -> str:
    """One panel per transfer task: each of `names` (its rows' `name_key`) minus `baseline`, its
    Holm interval, 0 marked; green where it is decided above, red below, grey no evidence."""
    plt = pyplot()
    tasks = list(dict.fromkeys(r["task"] for r in verdicts))
    figure, axes = plt.subplots(
        1,
        len(tasks),
        figsize=(2.6 * len(tasks) + 1.2, 0.45 * len(names) + 1.2),
        layout="constrained",
        squeeze=False,
    )
    for axis, task in zip(axes[0], tasks, strict=True):
        rows = {r[name_key]: r for r in verdicts if r["task"] == task}
        for y, name in enumerate(names):
            if (row := rows.get(name)) is None:
                continue
            decided = row["verdict"] != "no evidence"
            color = "tab:green" if decided and row["difference"] > 0 else "tab:red" if decided else "tab:grey"
            axis.plot([row["low"], row["high"]], [y, y], color=color, linewidth=2)
            axis.plot([row["difference"]], [y], "o", color=color)
        axis.axvline(0, color="black", linewidth=0.8)
        axis.set_yticks(range(len(names)), names if axis is axes[0][0] else [""] * len(names))
        axis.invert_yaxis()
        axis.set_title(task, fontsize=10)
        axis.set_xlabel(f"{name_key} - {baseline} (points)", fontsize=8)
    return svg_base64(figure)
