"""Checkpoint selection (mtl.train.loop.selection): the first task's dev metric, or select= a weighted
mean of dev metrics, each turned so that larger is better."""

import json

import pytest

from mtl.errors import UserError
from mtl.runs import read_metrics
from mtl.train.loop import run
from mtl.train.loop.selection import Selection, parse_terms

from .conftest import args_for, start_run


def test_a_lower_is_better_metric_selects_its_lowest_value():
    by_perplexity = Selection((("st/dev/ppl", 1.0),))
    assert by_perplexity.is_better({"st/dev/ppl": 30.0}, {"st/dev/ppl": 40.0})
    assert not by_perplexity.is_better({"st/dev/ppl": 50.0}, {"st/dev/ppl": 40.0})
    assert by_perplexity.is_better({"st/dev/ppl": 99.0}, None)


def test_the_aggregate_is_the_weighted_mean_of_signed_terms():
    selection = Selection(parse_terms("nli/dev/acc,st/dev/ppl:0.5"))
    assert selection.expression == "nli/dev/acc,st/dev/ppl:0.5"
    assert selection.value({"nli/dev/acc": 0.6, "st/dev/ppl": 3.0}) == pytest.approx((0.6 - 0.5 * 3.0) / 1.5)
    # 0.05 more accuracy is worth less than 0.2 less perplexity at these weights
    assert selection.is_better(
        {"nli/dev/acc": 0.60, "st/dev/ppl": 2.8}, {"nli/dev/acc": 0.65, "st/dev/ppl": 3.0}
    )


@pytest.mark.parametrize(
    "text, message",
    [
        ("nli/dev/acc:0", "the weight of nli/dev/acc, 0, must be positive"),
        ("nli/dev/acc:x", "the weight of nli/dev/acc, x, is not a number"),
        ("nli/test/acc", "nli/test/acc is not a dev metric"),
        ("acc", "acc is not a dev metric"),
    ],
)
def test_a_malformed_select_is_one_line(text, message):
    with pytest.raises(UserError, match=message):
        parse_terms(text)


def test_select_names_only_tasks_and_metrics_of_the_run(tiny_data, tmp_path):
    with pytest.raises(
        UserError, match=r"select=sts/dev/pearson: sts is not a task of this run \(nli, squad\)"
    ):
        run.config_from_args(args_for(tiny_data, tmp_path / "a", "select=sts/dev/pearson"))
    with pytest.raises(
        UserError, match="the run logs no nli/dev/f1; its dev metrics are nli/dev/acc, nli/dev/loss"
    ):
        start_run(tiny_data, tmp_path / "b", "select=nli/dev/f1")


def test_the_best_checkpoint_is_the_one_the_expression_prefers(tiny_data, tmp_path):
    run_dir, summary = start_run(tiny_data, tmp_path / "run", "select=squad/dev/loss", "eval_every=2")
    evaluations = [r for r in read_metrics(run_dir / "metrics.jsonl") if r.get("phase/event") == "evaluation"]
    lowest = min(evaluations, key=lambda r: (r["squad/dev/loss"], r["global_step"]))
    assert summary["best/step"] == lowest["global_step"]
    assert summary["selection"] == {
        "step": lowest["global_step"],
        "by": "squad/dev/loss",
        "value": -lowest["squad/dev/loss"],
    }
    assert json.loads((run_dir / "summary.json").read_text())["selection"]["by"] == "squad/dev/loss"


def test_by_default_the_first_tasks_metric_chooses(tiny_data, tmp_path):
    _, summary = start_run(tiny_data, tmp_path / "run")
    assert (
        summary["selection"]["by"] == "nli/dev/acc"
        and summary["selection"]["value"] == summary["best/nli/dev/acc"]
    )
