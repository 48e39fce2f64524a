"""Tasks that watch a run without training (`<task>.train=false`): evaluated at every evaluation,
never scheduled, never updated; a classification task scored by a linear probe."""

import re

import pytest
import torch

from mtl.cli import main
from mtl.errors import UserError
from mtl.runs import read_metrics
from mtl.train.loop import run
from tests.conftest import FIXTURES, args_for, one_error_line, start_run

STS = ("tasks=nli,sts,squad", f"sts.source={FIXTURES / 'sts_tiny'}", "sts.train=false", "squad.train=false")


def test_watched_tasks_are_evaluated_at_every_evaluation_but_never_trained(tiny_data, tmp_path):
    out, summary = start_run(tiny_data, tmp_path / "run", *STS, "max_steps=9", "eval_every=3")
    assert summary["steps/nli"] == 9 and "steps/sts" not in summary and "steps/squad" not in summary
    records = read_metrics(out / "metrics.jsonl")
    assert not [r for r in records if "sts/train/loss" in r or "squad/train/loss" in r]
    evaluations = [r for r in records if r.get("phase/event") == "evaluation"]
    assert len(evaluations) == 3
    assert all(
        {"sts/dev/pearson", "sts/dev/spearman", "squad/dev/acc", "squad/dev/loss"} <= r.keys()
        for r in evaluations
    )
    # the probe is fitted on frozen features: the squad head keeps its initial weights
    first = torch.load(out / "checkpoints/best.pt", weights_only=True)["model"]
    last = torch.load(out / "checkpoints/latest.pt", weights_only=True)["model"]
    heads = [k for k in first if k.startswith("heads.squad.")]
    assert heads and all(torch.equal(first[k], last[k]) for k in heads)
    assert summary["selection"]["by"] == "nli/dev/acc"  # the first training task's, by default
    from mtl.cli import main

    assert main(["report", str(out), f"out={tmp_path / 'report.html'}"]) == 0  # its curves by the run's steps


def test_a_watched_task_can_pick_the_checkpoint_and_its_probe_is_deterministic(tiny_data, tmp_path):
    _, a = start_run(
        tiny_data, tmp_path / "a", *STS, "max_steps=6", "eval_every=3", "select=sts/dev/spearman"
    )
    _, b = start_run(
        tiny_data, tmp_path / "b", *STS, "max_steps=6", "eval_every=3", "select=sts/dev/spearman"
    )
    assert a["selection"]["by"] == "sts/dev/spearman"
    assert (
        a["best/squad/dev/acc"] == b["best/squad/dev/acc"]
        and a["best/sts/dev/spearman"] == b["best/sts/dev/spearman"]
    )


def test_a_probe_task_is_scored_on_at_most_probe_train_examples(tiny_data, tmp_path, monkeypatch):
    from sklearn.linear_model import LogisticRegression

    fitted = []
    real = LogisticRegression.fit
    monkeypatch.setattr(
        LogisticRegression, "fit", lambda self, x, y: fitted.append(len(x)) or real(self, x, y)
    )
    start_run(tiny_data, tmp_path / "run", *STS, "squad.probe_train=5", "max_steps=3", "eval_every=3")
    assert fitted and set(fitted) == {5}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("tasks=nli", "nli.train=false"), "every task has train=false"),
        (
            ("tasks=nli,qt", "qt.train=false", f"qt.corpus={FIXTURES / 'corpus_tiny.txt'}"),
            "qt.train=false: a qt task's head",
        ),
    ],
)
def test_what_cannot_be_watched_says_so(tiny_data, tmp_path, args, message):
    with pytest.raises(UserError, match=message):
        run.start(run.config_from_args(args_for(tiny_data, tmp_path / "run", *args)), progress=False)


def test_a_task_files_training_file_still_reads_from_train(tmp_path):
    """Before train= said whether a task trains, a pairs or sts task's training file was `train`."""
    from mtl.tasks import named_config
    from mtl.train.config.train_config import TrainConfig, recorded_config, with_overrides

    task_file = tmp_path / "sick.toml"
    task_file.write_text('kind = "sts"\nsource = "x"\ntrain = "SICK_train.txt"\n')
    assert named_config(str(task_file))[1].train_file == "SICK_train.txt"
    config = with_overrides(TrainConfig(), [f"tasks=nli,{task_file}", "sick.train=other.txt"])
    assert config.tasks["sick"].train_file == "other.txt" and config.tasks["sick"].train
    config = with_overrides(TrainConfig(), [f"tasks=nli,{task_file}", "sick.train=false"])
    assert config.tasks["sick"].train_file == "SICK_train.txt" and not config.tasks["sick"].train
    from mtl.config import to_dict

    recorded = to_dict(TrainConfig())
    recorded["tasks"]["sick"] = {"kind": "sts", "source": "x", "train": "old.txt"}
    assert recorded_config(recorded, "config.json").tasks["sick"].train_file == "old.txt"


# ---- monitor=: transfer tasks scored at every evaluation ------------------------------------


def test_monitored_transfer_tasks_are_logged_at_every_evaluation_without_changing_training(
    tiny_data, senteval, tmp_path
):
    extra = ("max_steps=10", "eval_every=5", "dropout=0.2")
    watched = (*extra, "monitor=MR,CR", f"monitor_data={senteval}", "monitor_examples=20")
    start_run(tiny_data, tmp_path / "off", *extra)
    _, summary = start_run(tiny_data, tmp_path / "on", *watched, "select=nli/dev/acc,monitor/MR/acc:0.5")
    from tests.conftest import exported_weights

    off, on = exported_weights(tmp_path / "off"), exported_weights(tmp_path / "on")
    evaluations = [
        r for r in read_metrics(tmp_path / "on/metrics.jsonl") if r.get("phase/event") == "evaluation"
    ]
    assert len(evaluations) == 2 and all(
        {"monitor/MR/acc", "monitor/CR/acc"} <= r.keys() for r in evaluations
    )
    assert all(0 <= r["monitor/MR/acc"] <= 1 for r in evaluations)
    assert summary["selection"]["by"] == "nli/dev/acc,monitor/MR/acc:0.5" and "best/monitor/CR/acc" in summary
    # the scoring copy's vocabulary grows, the trained model's does not: training is the same
    start_run(tiny_data, tmp_path / "on-default", *watched)
    on = exported_weights(tmp_path / "on-default")
    assert all(torch.equal(off[k], on[k]) for k in off)
    twice = [
        r["monitor/MR/acc"]
        for r in read_metrics(tmp_path / "on-default/metrics.jsonl")
        if "monitor/MR/acc" in r
    ]
    assert twice == [r["monitor/MR/acc"] for r in evaluations]  # a fixed subsample, a seeded protocol


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("monitor=STS41",), "unknown transfer task 'STS41'"),
        (("select=monitor/MR/acc",), "needs monitor=MR"),
    ],
)
def test_monitor_keys_are_checked_before_training(tiny_data, tmp_path, args, message):
    with pytest.raises(UserError, match=message):
        run.config_from_args(args_for(tiny_data, tmp_path / "run", *args))


def test_missing_watching_data_names_the_key_this_command_takes(tiny_data, tmp_path, capsys):
    args = args_for(tiny_data, tmp_path / "run", "monitor=MR", f"monitor_data={tmp_path / 'none'}")
    assert main(["train-multitask", *args]) == 2
    assert re.search(r"MR/rt-polarity.pos is missing: point monitor_data=PATH at", one_error_line(capsys))
