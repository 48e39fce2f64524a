"""Which checkpoint is the best: by the first task's dev metric (InferSent, Liu et al.), or by a
weighted mean of dev metrics, `select=nli/dev/acc,stsb/dev/spearman:0.5`.

Each term is turned so that larger is better (`metrics.signed`: a loss or perplexity counts
negated), then the terms are averaged with their weights (1 when not given). With one term the
choice is today's: a checkpoint is the best when its metric beats the best one's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mtl import metrics
from mtl.config import Range, comma_list, read_number
from mtl.errors import UserError


@dataclass(frozen=True)
class Selection:
    terms: tuple[tuple[str, float], ...]  # (metric key, weight)

    @property
    def expression(self) -> str:
        return ",".join(key if weight == 1 else f"{key}:{weight:g}" for key, weight in self.terms)

    def value(self, results: dict[str, float]) -> float:
        """The weighted mean of the terms, each signed so that larger is better."""
        total = sum(weight for _, weight in self.terms)
        return sum(weight * metrics.signed(key, results[key]) for key, weight in self.terms) / total

    def is_better(self, results: dict[str, float], best: dict[str, float] | None) -> bool:
        return best is None or self.value(results) > self.value(best)


POSITIVE = Range(0, low_open=True)


def parse_terms(text: str) -> tuple[tuple[str, float], ...]:
    """`key[:weight],...` as (key, weight) pairs; a one-line error for a malformed one."""
    terms = []
    for part in comma_list(text):
        key, _, weight_text = part.partition(":")
        # weights up to float32's range: their sum and the weighted mean stay finite
        weight = (
            read_number(
                "select", weight_text, float, POSITIVE, f"select={text}: the weight of {key}, {weight_text},"
            )
            if weight_text
            else 1.0
        )
        rest = key.partition("/")[2]
        # a task's dev metric, or what a callback adds to each evaluation (monitor=, a plugin's)
        dev_metric = metrics.is_evaluation(key) and key.split("/")[1] == "dev"
        added = rest and not metrics.is_evaluation(key) and rest.split("/")[0] not in ("train", "dev", "test")
        if not (dev_metric or added):
            raise UserError(
                f"select={text}: {key} is not a dev metric: name one as <task>/dev/<metric>, "
                "monitor/<transfer task>/<metric>, or <callback>/<metric> for a key a callback adds"
            )
        terms.append((key.strip(), weight))
    return tuple(terms)


def selection_for(
    text: str, tasks: dict[str, Any], main_task: str, monitored: list[str] | None = None
) -> Selection:
    """The run's selection: `text` (select=), else the main task's metric; every key must be one
    the run's evaluations log (`tasks`: name -> Task, whose `dev_metrics` say which; `monitored`:
    the monitor/<task>/<metric> keys of monitor=)."""
    if not text.strip():
        return Selection(((metrics.evaluation(main_task, "dev", tasks[main_task].metric), 1.0),))
    logged = [metrics.evaluation(name, "dev", m) for name, task in tasks.items() for m in task.dev_metrics()]
    logged += monitored or []
    for key, _ in (terms := parse_terms(text)):
        if key not in logged:
            raise UserError(f"select={text}: the run logs no {key}; its dev metrics are {', '.join(logged)}")
    return Selection(terms)
