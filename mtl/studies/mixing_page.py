"""`just compare-mixing`: the benchmark (mtl/studies/mixing_bench.py), then its page: the planted noise
task's share over the run for every arm, each arm's difference from stratified on every transfer
task with its Holm interval, and what each arm cost."""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np

from mtl.analysis.page import STYLE, forest, pyplot, svg_base64
from mtl.files import atomic
from mtl.studies.mixing_bench import STATIC, bench, markdown


def share_curves(result: dict) -> dict[str, tuple[list[int], list[float]]]:
    """Per online arm, the noise task's share in force at each update its seeds all logged, the
    mean over them (the benchmark's `noise_per_seed` curves)."""
    curves = {}
    for arm, row in result["arms"].items():
        logged = [dict(seed["curve"]) for seed in row["noise_per_seed"] if seed.get("curve")]
        steps = sorted(set.intersection(*(set(found) for found in logged))) if logged else []
        if steps:
            curves[arm] = (steps, [float(np.mean([found[s] for found in logged])) for s in steps])
    return curves


def noise_plot(result: dict) -> str | None:
    curves = share_curves(result)
    if not result["noise"] or not curves:
        return None
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(7.5, 3.6), layout="constrained")
    last = max(steps[-1] for steps, _ in curves.values())
    for arm, (steps, shares) in curves.items():
        axis.plot(steps, [100 * s for s in shares], marker=".", label=arm)
    for arm, row in result["arms"].items():
        if arm in STATIC and row["noise_mid_run"] is not None:
            axis.plot(
                [0, last],
                [100 * row["noise_mid_run"]] * 2,
                linestyle="--",
                linewidth=1,
                label=f"{arm} (fixed)",
            )
    axis.axhline(5, color="black", linewidth=0.6, linestyle=":")
    axis.axvline(last / 2, color="grey", linewidth=0.6)
    axis.set_xlabel("step")
    axis.set_ylabel(f"{result['noise']}'s share (%)")
    axis.set_ylim(bottom=0)
    axis.legend(fontsize=8, loc="upper right")
    return svg_base64(figure)


def page(result: dict) -> str:
    def share(value: float | None) -> str:
        return "n/a" if value is None else f"{100 * value:.1f}%"

    costs = "".join(
        f"<tr><td>{html.escape(arm)}</td><td>{row['seeds']}</td><td>{share(row['noise_mid_run'])}</td>"
        f"<td>{share(row['noise_steps'])}</td><td>{row['train_seconds']:.1f}</td><td>{row['evidence_seconds']:.1f}</td></tr>"
        for arm, row in result["arms"].items()
    )
    notes = "; ".join(
        f"{html.escape(arm)}: {html.escape(row['note'])}" for arm, row in result["arms"].items()
    )
    verdicts = "".join(
        f"<tr><td>{html.escape(r['task'])}</td><td>{html.escape(r['arm'])}</td><td>{r['difference']:+.2f}</td>"
        f"<td>[{r['low']:+.2f}, {r['high']:+.2f}]</td><td>{html.escape(r['verdict'])}</td></tr>"
        for r in result["verdicts"]
    )
    family = max((r["family"] for r in result["verdicts"]), default=0)
    intro = markdown(result).split("\n\n")[0]
    plotted = noise_plot(result)
    return "\n".join([
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8"><title>mtl mixing benchmark</title>',
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Mixing schedules at equal compute: {html.escape(', '.join(result['tasks']))}</h1>",
        f"<p>{html.escape(intro)}</p>",
        *([f'<img src="data:image/svg+xml;base64,{plotted}" alt="the noise task\'s share over the run, per arm">',
           f"<p>{html.escape(result['noise'])}'s share in force at each update (online arms, the mean over seeds; "
           "dashed: a static arm's fixed share). Dotted: 5%; the vertical line: mid-run.</p>"] if plotted else []),
        *([f'<img src="data:image/svg+xml;base64,{forest(result["verdicts"], list(result["arms"])[1:], "arm", "stratified")}" alt="each arm minus stratified, per transfer '
           'task, with its Holm interval">',
           f"<p>Each arm minus stratified (points: accuracy %, Pearson r x 100), its 95% interval over seeds then "
           f"test items, Holm over all {family} comparisons: green beats stratified, red is below it, grey is no "
           "evidence (which is not evidence of no difference).</p>"] if result["verdicts"] else []),
        "<h2>Arms</h2>",
        '<div class="wide"><table><tr><th>arm</th><th>seeds</th><th>noise share at mid-run</th><th>steps on noise</th>'
        f"<th>train s (mean)</th><th>evidence s (mean)</th></tr>{costs}</table></div>",
        f"<p>{notes}.</p>",


        "<h2>Verdicts</h2>",
        '<div class="wide"><table><tr><th>transfer task</th><th>arm</th><th>arm - stratified</th>'
        f"<th>95% interval (Holm)</th><th>verdict</th></tr>{verdicts}</table></div>",
        "</body></html>",
    ]) + "\n"  # fmt: skip


def command(args: Sequence[str]) -> None:
    out, result = bench(args)
    atomic.write_text(out / "bench-mixing.html", page(result), "mixing benchmark page")
    print(markdown(result) + f"\nwritten to {out / 'bench-mixing.md'}, .json and .html")
