"""A transfer report in SentEval's own layout, and InferSent's micro and macro averages.

SentEval's `engine.eval()` returns a dict keyed by its task names (`SICKEntailment`,
`SICKRelatedness`, `STSBenchmark`, ...): accuracies in percent with `devacc`, `ndev` and
`ntest`; relatedness as Pearson, Spearman and MSE with `devpearson`; each STS subset's
Pearson and Spearman as (r, p-value) with `nsamples`, and their `all` means (plain and
weighted). Writing the same layout (`<report>.senteval.json`) lets scripts and tables
built for SentEval read mtl's results unchanged.

InferSent (Conneau et al. 2017, Section 5) aggregates the transfer tasks scored by accuracy
with the "macro" average of their dev accuracies and the "micro" average weighted by their
numbers of dev samples.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mtl.correlation import correlation_p_value, rank_correlation_p_value

SENTEVAL_NAMES = {"SICK-E": "SICKEntailment", "SICK-R": "SICKRelatedness", "STS-B": "STSBenchmark"}


def _percent(value: Any) -> float | None:
    return None if value is None else round(100 * float(value), 2)


def senteval_results(results: dict[str, dict], items: dict[str, dict[str, np.ndarray]]) -> dict[str, Any]:
    """`results` (mtl's report) as SentEval's result dict; `items` gives STS subsets' p-values and sizes."""
    shaped: dict[str, Any] = {}
    for task, result in results.items():
        sizes = {key: result[key] for key in ("ndev", "ntest") if key in result}
        if "acc" in result:
            entry = {"devacc": _percent(result.get("dev_acc")), "acc": _percent(result["acc"]), **sizes}
            if task == "MRPC":
                entry["f1"] = _percent(result.get("f1"))
        elif "all/pearson" in result:
            entry = _sts(result, items.get(task, {}))
        else:
            entry = {
                "devpearson": result.get("dev_pearson"),
                "pearson": result.get("pearson"),
                "spearman": result.get("spearman"),
                "mse": result.get("mse"),
                **sizes,
            }
            if "predicted" in items.get(task, {}):
                entry["yhat"] = items[task]["predicted"].tolist()
        shaped[SENTEVAL_NAMES.get(task, task)] = entry
    return shaped


def _sts(result: dict, items: dict[str, np.ndarray]) -> dict[str, Any]:
    subsets = [
        key.removesuffix("/pearson") for key in result if key.endswith("/pearson") and key != "all/pearson"
    ]
    entry: dict[str, Any] = {}
    for subset in subsets:
        r, rho = result[f"{subset}/pearson"], result[f"{subset}/spearman"]
        gold = items.get(f"{subset}/gold")
        # a report without per-item results (mode=senteval) has no sizes: no p-values to give
        count = len(gold) if gold is not None and f"{subset}/predicted" in items else None
        entry[subset] = {
            "pearson": (r, correlation_p_value(r, count) if count else None),
            "spearman": (rho, rank_correlation_p_value(rho, count) if count else None),
            "nsamples": count,
        }
    entry["all"] = {
        metric: {"mean": result[f"all/{metric}"], "wmean": result.get(f"all/{metric}_weighted")}
        for metric in ("pearson", "spearman")
    }
    return entry


def micro_macro(results: dict[str, dict]) -> dict[str, Any] | None:
    """InferSent's micro and macro averages of the dev accuracies (%), over the tasks that have one."""
    scored = {
        task: (float(r["dev_acc"]), int(r["ndev"]))
        for task, r in results.items()
        if "acc" in r and r.get("dev_acc") is not None and r.get("ndev")
    }
    if not scored:
        return None
    macro = 100 * float(np.mean([acc for acc, _ in scored.values()]))
    micro = 100 * sum(acc * n for acc, n in scored.values()) / sum(n for _, n in scored.values())
    return {"micro": round(micro, 2), "macro": round(macro, 2), "tasks": list(scored)}
