"""`just compare-balancers`: every method tuned with the same number of trials, its best with every
seed, judged against the tuned sum on transfer; resumable."""

import json
import re

import pytest

from mtl.cli import main
from mtl.errors import UserError
from mtl.jobs.configs import BenchBalancersConfig
from mtl.studies import compare_balancers, study

from .browser import can_look, look_at
from .conftest import args_for


def test_each_method_draws_its_trials_from_its_own_space_defaults_first():
    config = BenchBalancersConfig(trials=4, lr_factors="0.5,1,2", weights="0.5,1,2")
    summed = compare_balancers.space("sum", ["nli", "squad"], config, lr=0.1)
    assert len(summed) == 9 and summed[0] == {"lr": 0.1, "squad.weight": 1.0}
    famo = compare_balancers.space("famo", ["nli", "squad"], config, lr=0.1)
    assert len(famo) == 3 * 6 and famo[0] == {"lr": 0.1, "famo_w_lr": 0.025, "famo_gamma": 0.01}
    assert compare_balancers.space("pcgrad", ["nli", "squad", "qt"], config, lr=0.1) == [
        {"lr": 0.1}, {"lr": 0.05}, {"lr": 0.2}
    ]  # fmt: skip
    three = compare_balancers.space("sum", ["nli", "squad", "qt"], config, lr=0.1)
    assert len(three) == 3 * 9 and {"squad.weight", "qt.weight"} < three[0].keys()
    chosen = compare_balancers.drawn(famo, 4, seed=0, method="famo")
    assert chosen[0] == famo[0] and len({json.dumps(c, sort_keys=True) for c in chosen}) == 4
    assert chosen == compare_balancers.drawn(famo, 4, seed=0, method="famo")  # seeded
    assert (
        compare_balancers.drawn(summed[:2], 4, seed=0, method="sum") == summed[:2]
    )  # a small space: all of it


def test_a_benchmark_tunes_seeds_judges_and_resumes_without_retraining(tiny_data, senteval, tmp_path, capsys):
    out = tmp_path / "bench"
    train = [a for a in args_for(tiny_data, out) if not a.startswith(("out=", "max_steps="))]
    command = [
        "compare-balancers", *train, "methods=sum,famo", "trials=2", "budget=steps:3", "seeds=2",
        "score=best/nli/dev/acc", "transfer_tasks=MR", f"transfer_data={senteval}", f"out={out}",
    ]  # fmt: skip
    assert main(command) == 0, capsys.readouterr().err
    result = json.loads((out / "bench-balancers.json").read_text())
    assert result["methods"] == ["sum", "famo"]
    assert {m: (p["trials"], p["seeds"]) for m, p in result["parity"].items()} == {
        "sum": (2, 2),
        "famo": (2, 2),
    }
    assert result["parity"]["sum"]["tried"][0] == {"lr": 0.1, "squad.weight": 1.0}  # the defaults first
    assert all(p["tuning_seconds"] > 0 and p["seed_seconds"] > 0 for p in result["parity"].values())
    trial = json.loads((out / "trials" / "famo-trial2" / "config.json").read_text())["config"]
    assert trial["schedule"]["schedule"] == "mixed" and trial["schedule"]["balancer"] == "famo"
    assert trial["optim"]["stop"] == "max_steps" and trial["optim"]["max_steps"] == 3
    assert {p.name for p in (out / "arms").iterdir() if p.is_dir()} == {"sum-seed2", "famo-seed2"}
    assert [(r["task"], r["method"]) for r in result["verdicts"]] == [("MR", "famo")]
    assert result["verdicts"][0]["verdict"] in ("beats the tuned sum", "below the tuned sum", "no evidence")
    text = (out / "bench-balancers.md").read_text()
    assert "| famo | 2 | 30 |" in text and "| MR | famo |" in text
    page = (out / "bench-balancers.html").read_text()
    assert "What each method was given" in page and "<td>MR</td><td>famo</td>" in page
    if can_look():  # in a browser, as tests/test_pages.py looks at the other pages
        assert not (problems := look_at(out / "bench-balancers.html", "compare-balancers")), problems
    # again: nothing trains again
    stamps = {p: p.stat().st_mtime_ns for p in out.glob("*/*/summary.json")}
    assert main(command) == 0
    assert {p: p.stat().st_mtime_ns for p in out.glob("*/*/summary.json")} == stamps


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["methods=famo,upgrad"], "give sum (the tuned baseline)"),
        (["methods=sum,pcgard"], "pcgard is no balancer"),
        (["lr_factors=0,1"], "lr_factors=0,1: give positive numbers"),
        (["balancer=pcgrad"], "balancer=pcgrad: compare-balancers sets it for each trial"),
        (["max_steps=5"], "max_steps=5: compare-balancers sets it for each run"),
        (["tasks=nli"], "nli trains alone"),
    ],
)
def test_bad_benchmark_arguments_are_one_line(tiny_data, tmp_path, args, message):
    train = [a for a in args_for(tiny_data, tmp_path / "b") if not a.startswith(("out=", "max_steps="))]
    with pytest.raises(UserError, match=re.escape(message)):
        study.run("compare-balancers", [*train, f"out={tmp_path / 'b'}", "budget=steps:2", *args])
