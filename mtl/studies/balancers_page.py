"""`just compare-balancers`: the benchmark (mtl/studies/balancer_bench.py), then its page: each method's
difference from the tuned sum on every transfer task with its Holm interval, and what each
method was given (its trials, space, seeds and seconds)."""

from __future__ import annotations

import html
from collections.abc import Sequence

from mtl.analysis.page import STYLE, forest
from mtl.files import atomic
from mtl.studies.balancer_bench import bench, markdown


def page(result: dict) -> str:
    parity = "".join(
        f"<tr><td>{html.escape(method)}</td><td>{row['trials']}</td><td>{row['space']}</td>"
        f"<td>{html.escape(', '.join(f'{k}={v}' for k, v in row['best'].items()))}</td>"
        f"<td>{row['best_score']:.4f}</td><td>{row['seeds']}</td><td>{row['tuning_seconds']:.1f}</td>"
        f"<td>{row['seed_seconds']:.1f}</td></tr>"
        for method, row in result["parity"].items()
    )
    verdicts = "".join(
        f"<tr><td>{html.escape(r['task'])}</td><td>{html.escape(r['method'])}</td><td>{r['difference']:+.2f}</td>"
        f"<td>[{r['low']:+.2f}, {r['high']:+.2f}]</td><td>{html.escape(r['verdict'])}</td></tr>"
        for r in result["verdicts"]
    )
    family = max((r["family"] for r in result["verdicts"]), default=0)
    intro = markdown(result).split("\n\n")[0]
    return "\n".join([
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8"><title>mtl balancer benchmark</title>',
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Balancers against a tuned weighted sum: {html.escape(', '.join(result['tasks']))}</h1>",
        f"<p>{html.escape(intro)}</p>",
        *([f'<img src="data:image/svg+xml;base64,{forest(result["verdicts"], result["methods"][1:], "method", "tuned sum")}" alt="each method minus the tuned sum, per transfer '
           'task, with its Holm interval">',
           f"<p>Each method minus the tuned sum (points: accuracy %, Pearson r x 100), its 95% interval over seeds "
           f"then test items, Holm over all {family} comparisons: green beats the sum, red is below it, grey is no "
           "evidence (which is not evidence of no difference).</p>"] if result["verdicts"] else []),
        "<h2>What each method was given</h2>",
        '<div class="wide"><table><tr><th>method</th><th>trials</th><th>space</th><th>best trial</th>'
        f"<th>dev score</th><th>seeds</th><th>tuning s</th><th>seeds s</th></tr>{parity}</table></div>",
        "<h2>Verdicts</h2>",
        '<div class="wide"><table><tr><th>transfer task</th><th>method</th><th>method - tuned sum</th>'
        f"<th>95% interval (Holm)</th><th>verdict</th></tr>{verdicts}</table></div>",
        "</body></html>",
    ]) + "\n"  # fmt: skip


def command(args: Sequence[str]) -> None:
    out, result = bench(args)
    atomic.write_text(out / "bench-balancers.html", page(result), "balancer benchmark page")
    print(markdown(result) + f"\nwritten to {out / 'bench-balancers.md'}, .json and .html")
