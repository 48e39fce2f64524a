"""`just versus-single`: each training task alone and the mixture at one budget, transferred,
with the mixture's paired-bootstrap difference to the best single-task run per transfer task."""

import json

import pytest

from mtl.cli import main
from mtl.errors import UserError
from mtl.jobs import versus
from tests.conftest import args_for


def test_every_task_alone_and_the_mixture_train_at_the_budget_then_get_verdicts(
    tiny_data, senteval, tmp_path, capsys
):
    out = tmp_path / "versus"
    train = [
        a for a in args_for(tiny_data, out, "squad.weight=0.5") if not a.startswith(("out=", "max_steps="))
    ]
    code = main(
        [
            "versus-single",
            *train,
            "budget=steps:4",
            "transfer_tasks=MR,CR",
            f"transfer_data={senteval}",
            f"out={out}",
        ]
    )
    assert code == 0, capsys.readouterr().err
    runs = {
        name: json.loads((out / name / "summary.json").read_text()) for name in ("nli", "squad", "mixture")
    }
    assert runs["nli"]["steps/nli"] == runs["squad"]["steps/squad"] == runs["mixture"]["global_step"] == 4
    assert "steps/squad" not in runs["nli"]  # squad.weight= went to the runs that have squad only
    record = json.loads((out / "versus.json").read_text())
    assert record["starved"] == []  # blocks of 3 nli and 2 squad steps: the mixture saw squad
    assert [row["task"] for row in record["verdicts"]] == ["MR", "CR"]
    for row in record["verdicts"]:
        assert row["best_single"] == max(("nli", "squad"), key=lambda r: row["scores"][r])
        assert row["low"] <= row["difference"] <= row["high"]
        assert row["verdict"] == (
            "helps" if row["low"] > 0 else "hurts" if row["high"] < 0 else "no evidence"
        )
    assert "| MR |" in capsys.readouterr().out
    # the same folder with another budget is refused, not resumed under the old one
    again = [
        "versus-single",
        *train,
        "budget=steps:5",
        "transfer_tasks=MR",
        f"transfer_data={senteval}",
        f"out={out}",
    ]
    assert main(again) == 2 and "other fixed keys (budget=steps:4, budget=steps:5)" in capsys.readouterr().err


def test_an_examples_budget_gives_each_run_its_own_steps(tiny_data, tmp_path):
    train = [
        a for a in args_for(tiny_data, tmp_path, "schedule=mixed") if not a.startswith(("out=", "max_steps="))
    ]
    found = {m.name: m.overrides for m in versus.members(train, "examples:120", tmp_path / "v")}
    # batch_nli=8, batch_squad=4: 15 and 30 steps alone, 10 mixed steps of 12 examples
    assert (
        "max_steps=15" in found["nli"]
        and "max_steps=30" in found["squad"]
        and "max_steps=10" in found["mixture"]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["budget=hours:3"], "give steps:N, examples:N or minutes:N"),
        (["budget=steps:5", "max_steps=9"], "versus-single sets it for each run"),
        (["budget=steps:5", "tasks=nli"], "nli trains alone already"),
        (["budget=steps:5", "transfer_mode=slow"], "mode='slow' is not valid"),
    ],
)
def test_bad_versus_arguments_are_one_line(tiny_data, tmp_path, args, message):
    with pytest.raises(UserError, match=message):
        config, train = versus.parse(args)
        versus.members(train, config.budget, tmp_path)
