"""One answer for which way a metric is better, used by selection, W&B and the report."""

from pathlib import Path

from mtl import metrics
from mtl.analysis.report import _results_table
from mtl.runs import Run


def test_a_perplexity_or_loss_is_better_lower_and_every_other_metric_higher():
    assert not metrics.higher_is_better("best/st/dev/ppl") and not metrics.higher_is_better("qt/dev/loss")
    assert metrics.higher_is_better("nli/dev/acc") and metrics.higher_is_better("sts/dev/pearson")
    assert metrics.is_better("st/dev/ppl", 30.0, 40.0) and not metrics.is_better("nli/dev/acc", 0.3, 0.4)
    assert metrics.is_better("st/dev/ppl", 99.0, None)
    assert (metrics.wandb_summary("st/dev/ppl"), metrics.wandb_summary("nli/dev/acc")) == ("min", "max")


def test_a_plugin_declares_the_direction_of_its_own_metric():
    assert metrics.higher_is_better("asr/dev/wer")
    metrics.register_direction("wer", higher_is_better=False)
    try:
        assert not metrics.higher_is_better("asr/dev/wer") and metrics.signed("wer", 0.2) == -0.2
    finally:
        metrics.register_direction("wer", higher_is_better=True)


def _run(folder: Path, ppl: float, acc: float, recorded: dict) -> Run:
    config = {
        "tasks": {"st": {"kind": "skipthought", "steps": 2}, "nli": {"kind": "nli", "steps": 3}},
        "model": {"encoder": "gru", "hidden": 8},
    }
    summary = {"best/st/dev/ppl": ppl, "best/nli/dev/acc": acc, "global_step": 5, "stop_reason": "max_steps"}
    return Run(folder, config, [], summary, {}, {}, {}, recorded)


def test_the_report_bolds_the_lowest_perplexity_and_shows_it_as_it_is(tmp_path):
    recorded = {"st": {"metric": "ppl", "higher_is_better": False}}
    runs = [
        _run(tmp_path / "a", 40.0, 0.61, recorded),
        _run(tmp_path / "b", 30.0, 0.52, {}),
    ]  # b: an older run
    table = _results_table(runs)
    assert "<strong>30.00</strong>" in table and "<td>40.00</td>" in table  # not 3000.00 (a percentage)
    assert "<strong>61.00</strong>" in table and "<td>52.00</td>" in table
