"""mixture-search's page (mtl/studies/mixture.py): the proxies' held-out predictions against their
scores, the mixtures' weights, and the verdicts at the target budget."""

from __future__ import annotations

import html

import numpy as np

from mtl.analysis.page import STYLE, pyplot, svg_base64


def page(result: dict, observed: np.ndarray, loo: np.ndarray, intro: str) -> str:
    """`intro`: the search's own account of itself (its .md's opening lines)."""
    plt = pyplot()
    figure, (scatter, bars) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    scatter.scatter(loo, observed, color="tab:blue")
    low, high = float(min(loo.min(), observed.min())), float(max(loo.max(), observed.max()))
    scatter.plot([low, high], [low, high], color="grey", linewidth=0.8)
    scatter.set_xlabel("predicted without the proxy (leave-one-out)")
    scatter.set_ylabel(f"observed ({result['score']})")
    gate = result.get("skill")
    said = f", Spearman {gate['spearman']:+.2f}" if gate else ""
    scatter.set_title(f"proxies: held-out error {result['fit']['loo_mae']:.4f}{said}", fontsize=10)
    names, tasks = list(result["mixtures"]), result["tasks"]
    width = 0.8 / len(tasks)
    spread = result.get("optimum_spread")
    for index, task in enumerate(tasks):
        shares = [result["mixtures"][name][index] for name in names]
        bars.bar(np.arange(len(names)) + index * width, shares, width, label=task)
        if spread and "predicted" in names:  # the optimum's 90% range over proxy resamples
            at, share = names.index("predicted"), shares[names.index("predicted")]
            below, above = max(0.0, share - spread["low"][index]), max(0.0, spread["high"][index] - share)
            bars.errorbar(at + index * width, share, yerr=[[below], [above]], color="black", capsize=3)
    bars.set_xticks(np.arange(len(names)) + 0.4 - width / 2, names, fontsize=8)
    bars.set_ylabel("share of steps")
    bars.set_title(
        "mixtures (predicted: its 90% range over proxy resamples; proportional, temperature: by size)",
        fontsize=10,
    )
    bars.legend(fontsize=8)
    image = svg_base64(figure)
    head = "<tr><th>transfer task</th><th>baseline</th><th>predicted - baseline</th><th>95% interval (Holm)</th><th>verdict</th></tr>"
    body = "".join(
        f"<tr><td>{html.escape(r['task'])}</td><td>{html.escape(r['baseline'])}</td><td>{r['difference']:+.2f}</td>"
        f"<td>[{r['low']:+.2f}, {r['high']:+.2f}]</td><td>{html.escape(r['verdict'])}</td></tr>"
        for r in result["verdicts"]
    )
    return "\n".join([
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8"><title>mtl mixture search</title>',
        f"<style>{STYLE}</style></head><body>", f"<h1>Mixture search: {html.escape(', '.join(tasks))}</h1>",
        *(f"<p>{html.escape(line)}</p>" for line in intro.splitlines() if line),
        f'<img src="data:image/svg+xml;base64,{image}" alt="proxies predicted against observed; the mixtures">',
        "<h2>Verdicts at the target budget</h2>",
        f'<div class="wide"><table>{head}{body}</table></div>' if result["verdicts"] else
        "<p>None: no predicted mixture was trained (see the skill above).</p>",
        "<p>helps / hurts: the Holm-corrected interval of the predicted mixture against that baseline excludes 0 "
        "(seeds and test items resampled); no evidence is not evidence of no difference.</p>",
        "</body></html>",
    ]) + "\n"  # fmt: skip
