"""`just versus-single`: each training task alone and the mixture at one budget, transferred,
with the mixture's paired-bootstrap difference to the best single-task run per transfer task."""

import json

import pytest
import torch

from mtl.cli import main
from mtl.errors import UserError
from mtl.studies import study, versus
from mtl.studies.arms import short_of_budget
from tests.conftest import args_for


def test_every_task_alone_and_the_mixture_train_at_the_budget_with_each_seed_then_get_verdicts(
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
            "seeds=2",
            "transfer_tasks=MR,CR",
            f"transfer_data={senteval}",
            f"out={out}",
        ]
    )
    assert code == 0, capsys.readouterr().err
    runs = {
        f"{arm}-seed{seed}": json.loads((out / f"{arm}-seed{seed}" / "summary.json").read_text())
        for arm in ("nli", "squad", "mixture")
        for seed in (1, 2)
    }
    for seed in (1, 2):
        assert runs[f"nli-seed{seed}"]["steps/nli"] == runs[f"squad-seed{seed}"]["steps/squad"] == 4
        assert runs[f"mixture-seed{seed}"]["global_step"] == 4
        config = json.loads((out / f"nli-seed{seed}" / "config.json").read_text())["config"]
        assert config["run"]["seed"] == seed and config["optim"]["stop"] == "max_steps"  # no early stop
    assert "steps/squad" not in runs["nli-seed1"]  # squad.weight= went to the runs that have squad only
    record = json.loads((out / "versus.json").read_text())
    assert record["starved"] == [] and record["left_out"] == {}  # the mixture saw squad (blocks of 3, 2)
    assert record["seeds"] == [1, 2] and "whole budget" in record["equal_compute"]
    assert [row["task"] for row in record["verdicts"]] == ["MR", "CR"]
    for row in record["verdicts"]:
        assert row["best_single"] == max(("nli", "squad"), key=lambda r: row["scores"][r])
        assert row["low"] <= row["difference"] <= row["high"] and row["seeds"] == 2
        assert len(row["seed_scores"]["mixture"]) == 2
        assert row["scores"]["mixture"] == pytest.approx(sum(row["seed_scores"]["mixture"]) / 2)
        assert row["against"] in ("nli", "squad") and row["family"] == 4  # 2 single arms x 2 tasks
        decided = row["holm_p"] <= 0.05
        assert row["verdict"] == (
            ("helps" if row["difference"] > 0 else "hurts") if decided else "no evidence"
        )
    # the verdict across MR and CR, each pair of arms, named by arm (compare's computation)
    across = {(r["first"], r["second"]): r for r in record["across_tasks"]}
    assert {frozenset(pair) for pair in across} == {
        frozenset(p) for p in (("nli", "squad"), ("nli", "mixture"), ("squad", "mixture"))
    }
    assert all(
        r["tasks"] == ["MR", "CR"] and r["low"] <= r["difference"] <= r["high"] for r in across.values()
    )
    assert "Across the transfer tasks" in (out / "versus.md").read_text()
    printed = capsys.readouterr().out
    assert "| MR |" in printed and "± " in printed and "(Holm)" in printed
    assert all(row["method"].startswith("studentized") for row in record["verdicts"])
    assert not list(out.rglob("wandb"))  # wandb=disabled reached the study's transfers too
    # the same folder with another budget is refused, not resumed under the old one
    again = [
        "versus-single",
        *train,
        "budget=steps:5",
        "transfer_tasks=MR",
        f"transfer_data={senteval}",
        f"out={out}",
    ]
    assert main([*again, "seeds=2"]) == 2
    assert "other fixed keys (budget=steps:4, budget=steps:5)" in capsys.readouterr().err
    # a run that ended short of the budget is said and left out, never compared
    summary = out / "nli-seed2" / "summary.json"
    values = json.loads(summary.read_text())
    summary.write_text(json.dumps({**values, "global_step": 3, "stop_reason": "patience"}))
    member = next(m for m in versus.members(train, "steps:4", out, [1, 2]) if m.name == "nli-seed2")
    assert short_of_budget(member, "steps:4") == "trained 3 of its 4 steps (stopped by patience)"


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
        (["budget=steps:5", "seed=1,1"], "names a seed twice"),
        (["budget=steps:5", "seeds=3", "seed=1,2"], "not both"),
        (["budget=steps:5", "seeds=0"], "seeds=0"),
        (["budget=steps:5", "stop=patience"], "equal compute"),
    ],
)
def test_bad_versus_arguments_are_one_line(tiny_data, tmp_path, args, message):
    with pytest.raises(UserError, match=message):
        config, train = study.parse(versus.VersusSingle(), args)
        versus.members(train, config.budget, tmp_path)


def _pair(task, single, difference, se, first_is_mixture=True):
    """A studentized comparison record of the mixture and one single arm (as compare.json keeps it)."""
    from mtl.analysis.significance import t_interval, t_p_value
    from mtl.formats.comparison import METHOD

    sign = 1 if first_is_mixture else -1
    low, high = t_interval(sign * difference, se, 4.0, 0.05)
    first, second = ("mixture", single) if first_is_mixture else (single, "mixture")
    mixture, other = 70.0 + difference, 70.0
    return {
        "task": task, "first": first, "second": second,
        "first_score": mixture if first_is_mixture else other, "second_score": other if first_is_mixture else mixture,
        "low": low, "high": high, "first_seeds": 3, "second_seeds": 3, "p": t_p_value(difference, se, 4.0),
        "holm_p": None, "family": 1, "confidence": 0.95, "se": se, "df": 4.0, "method": METHOD,
    }  # fmt: skip


def test_the_mixture_helps_only_above_every_single_arm_with_holm_over_the_whole_study():
    # MR: the mixture is far above squad, and above nli (the best alone) by a noisy margin;
    # TREC: far above both; CR: below squad, which is clearly ahead
    compared = {
        "comparisons": [
            _pair("MR", "nli", 3.0, 0.2),
            _pair("MR", "squad", 0.8, 2.0, first_is_mixture=False),
            _pair("TREC", "nli", 5.0, 0.5),
            _pair("TREC", "squad", 6.0, 0.5),
            _pair("CR", "nli", 0.5, 1.0),
            _pair("CR", "squad", -4.0, 0.4),
        ]
    }
    scores = {
        task: {arm: c["first_score"] if c["first"] == arm else c["second_score"]
               for c in compared["comparisons"] if c["task"] == task for arm in (c["first"], c["second"])}
        for task in ("MR", "TREC", "CR")
    }  # fmt: skip
    rows = {row["task"]: row for row in versus.verdicts(compared, scores, ["nli", "squad"])}
    # MR: above nli beyond doubt, not above squad (the noisier arm): no evidence, shown against squad
    assert rows["MR"]["verdict"] == "no evidence" and rows["MR"]["against"] == "squad"
    assert rows["MR"]["low"] < 0 < rows["MR"]["high"]
    assert rows["TREC"]["verdict"] == "helps" and rows["TREC"]["against"] == "nli"  # the closer arm decides
    assert rows["CR"]["verdict"] == "hurts" and rows["CR"]["against"] == "squad"
    assert rows["CR"]["high"] < 0 and rows["TREC"]["low"] > 0
    assert {row["family"] for row in rows.values()} == {6}  # Holm over the study's 6 comparisons
    assert all(row["holm_p"] >= 0 for row in rows.values())
    # the interval shown agrees with the verdict
    for row in rows.values():
        assert (row["verdict"] == "no evidence") == (row["low"] <= 0 <= row["high"])


def test_merge_arms_merge_each_seeds_parts_at_the_same_total_and_meet_the_mixture(
    tiny_data, tmp_path, shared_data, capsys
):
    out = tmp_path / "versus"
    train = [a for a in args_for(tiny_data, out) if not a.startswith(("out=", "max_steps="))]
    data = shared_data / "senteval" / "downstream"
    args = ["budget=steps:4", "seeds=2", "transfer_tasks=STS16", f"transfer_data={data}", f"out={out}"]
    assert main(["versus-single", *train, *args, "merge=average,ties"]) == 0, capsys.readouterr().err
    for seed in (1, 2):
        for task in ("nli", "squad"):  # each part alone at half the budget: the merge's total is the budget
            summary = json.loads((out / f"{task}-part-seed{seed}" / "summary.json").read_text())
            assert summary["global_step"] == 2
        for method in ("average", "ties"):
            merged = json.loads((out / f"merge-{method}-seed{seed}" / "encoder.json").read_text())["merged"]
            parents = [p["path"] for p in merged["parents"]]  # relative to the merge: the study moves whole
            assert parents == [f"../{t}-part-seed{seed}/encoder.json" for t in ("nli", "squad")]
            assert (merged["dev_spearman"] is None) == (method == "average")  # ties: lam chosen on dev
    record = json.loads((out / "versus.json").read_text())
    merges = [row for row in record["verdicts"] if "merge" in row]
    assert [(row["merge"], row["task"]) for row in merges] == [
        ("merge-average", "STS16"),
        ("merge-ties", "STS16"),
    ]
    for row in record["verdicts"]:
        assert row["family"] == 4 and row["seeds"] == 2  # 2 singles + 2 merges against the mixture, 1 task
        assert set(row["scores"]) == {"nli", "squad", "mixture", "merge-average", "merge-ties"}
    for row in merges:
        assert row["difference"] == pytest.approx(
            row["scores"]["merge-" + row["merge"][6:]] - row["scores"]["mixture"]
        )
        assert row["low"] <= row["difference"] <= row["high"]
    assert set(record["merge_parts"]) == {f"{t}-part-seed{s}" for t in ("nli", "squad") for s in (1, 2)}
    assert (
        "Mix, train in another order, or merge, at the same total compute" in (out / "versus.md").read_text()
    )


def test_regime_arms_train_the_mixtures_tasks_in_another_order_and_meet_the_mixture(
    tiny_data, tmp_path, shared_data, capsys
):
    out = tmp_path / "versus"
    train = [a for a in args_for(tiny_data, out) if not a.startswith(("out=", "max_steps="))]
    data = shared_data / "senteval" / "downstream"
    args = ["budget=steps:4", "transfer_tasks=STS16", f"transfer_data={data}", f"out={out}"]
    assert main(["versus-single", *train, *args, "regimes=sequential,two_stage"]) == 0, (
        capsys.readouterr().err
    )
    from mtl.runs import read_metrics

    def order(arm: str) -> list[str]:
        rows = [r for r in read_metrics(out / arm / "metrics.jsonl") if "phase/event" not in r]
        return [k.split("/")[0] for r in rows for k in r if k.endswith("/train/loss")]

    assert order("regime-sequential") == ["nli", "nli", "squad", "squad"]  # tiny: nli.steps = squad.steps
    assert order("regime-two_stage")[2:] == ["nli", "nli"]  # the second half: the first task alone
    config = json.loads((out / "regime-sequential" / "config.json").read_text())["config"]
    assert config["schedule"]["schedule"] == "sequential" and config["optim"]["max_steps"] == 4
    record = json.loads((out / "versus.json").read_text())
    regimes = [row for row in record["verdicts"] if "merge" in row]
    assert [row["merge"] for row in regimes] == ["regime-sequential", "regime-two_stage"]
    assert all(row["family"] == 4 for row in record["verdicts"])  # 2 singles + 2 regimes, 1 task
    assert "regime-sequential trains the tasks one after the other" in (out / "versus.md").read_text()
    capsys.readouterr()
    assert main(["versus-single", *train, *args, "regimes=curriculum"]) == 2
    assert "regimes=curriculum: curriculum is no regime" in capsys.readouterr().err


def test_regime_arms_of_a_mixed_step_mixture_leave_its_balancer_out(tiny_data, tmp_path):
    """A regime trains one task a step: the mixture's schedule=mixed and its balancer's keys are
    not the regime's (the staged schedules refused a balancer before any training)."""
    from mtl.studies.versus import members

    out = tmp_path / "versus"
    train = [a for a in args_for(tiny_data, out) if not a.startswith(("out=", "max_steps="))]
    mixed = [*train, "schedule=mixed", "balancer=gradnorm", "gradnorm_alpha=2"]
    found = members(mixed, "steps:4", out, (1,), regimes=["sequential", "two_stage"])
    regime = {m.arm: m.overrides for m in found if m.arm.startswith("regime-")}
    assert set(regime) == {"regime-sequential", "regime-two_stage"}
    for arm, keys in regime.items():
        assert f"schedule={arm.removeprefix('regime-')}" in keys
        assert not [k for k in keys if k.startswith(("balancer=", "gradnorm_alpha=", "schedule=mixed"))]
    mixture = next(m.overrides for m in found if m.arm == "mixture")
    assert "balancer=gradnorm" in mixture and "schedule=mixed" in mixture


def test_a_merge_with_the_base_merges_each_seeds_mixture_with_its_start(
    tiny_data, tmp_path, shared_data, capsys
):
    """merge=with_base (LM-Cocktail's merge): the mixture's task vector from its initialisation,
    scaled by a lam in [0, 1] chosen on dev pairs; no single-task parts are trained for it."""
    out = tmp_path / "versus"
    train = [a for a in args_for(tiny_data, out) if not a.startswith(("out=", "max_steps="))]
    data = shared_data / "senteval" / "downstream"
    args = [
        "budget=steps:4",
        "transfer_tasks=STS16",
        f"transfer_data={data}",
        f"out={out}",
        "merge=with_base",
    ]
    assert main(["versus-single", *train, *args]) == 0, capsys.readouterr().err
    merged = json.loads((out / "merge-with_base" / "encoder.json").read_text())["merged"]
    assert merged["method"] == "task_arithmetic"
    assert [p["path"] for p in merged["parents"]] == ["../mixture/encoder.json"]
    assert not any(p.name.endswith("-part") for p in out.iterdir())
    record = json.loads((out / "versus.json").read_text())
    assert [row["merge"] for row in record["verdicts"] if "merge" in row] == ["merge-with_base"]


def test_a_bagging_merge_averages_each_seeds_bags_each_on_its_own_draw(
    tiny_data, tmp_path, shared_data, capsys
):
    """merge=bagging: per seed, bags= mixtures from the seed's initialisation, each at budget / bags
    on its own seeded 63.2% of every training set, averaged into merge-bagging and met with the
    mixture; a bag's draw differs from the others' and does not follow the run's seed."""
    out = tmp_path / "versus"
    train = [a for a in args_for(tiny_data, out) if not a.startswith(("out=", "max_steps="))]
    data = shared_data / "senteval" / "downstream"
    args = [
        "budget=steps:4",
        "transfer_tasks=STS16",
        f"transfer_data={data}",
        f"out={out}",
        "merge=bagging",
        "bags=2",
    ]
    assert main(["versus-single", *train, *args]) == 0, capsys.readouterr().err
    sizes = {}
    for bag in (1, 2):
        folder = out / f"mixture-bag{bag}"
        assert json.loads((folder / "summary.json").read_text())["global_step"] == 2  # budget / bags
        record = json.loads((folder / "config.json").read_text())
        assert record["config"]["tasks"]["nli"]["subsample"] == 0.632
        assert record["config"]["tasks"]["nli"]["subsample_seed"] == bag
        sizes[bag] = record["inputs"]
    full = json.loads((out / "mixture" / "config.json").read_text())["inputs"]
    for data in ("snli", "classifsquad"):  # nli's and squad's inputs
        whole = full[data]["sizes"]["train"]
        drawn = [sizes[b][data] for b in (1, 2)]
        assert [d["sizes"]["train"] for d in drawn] == [round(0.632 * whole)] * 2
        assert drawn[0]["sha256"] != drawn[1]["sha256"]  # each bag its own draw
    merged = json.loads((out / "merge-bagging" / "encoder.json").read_text())["merged"]
    assert merged["method"] == "average"
    assert [p["path"] for p in merged["parents"]] == [
        "../mixture-bag1/encoder.json",
        "../mixture-bag2/encoder.json",
    ]
    record = json.loads((out / "versus.json").read_text())
    assert [row["merge"] for row in record["verdicts"] if "merge" in row] == ["merge-bagging"]
    assert set(record["merge_parts"]) == {"mixture-bag1", "mixture-bag2"}
    assert "merge-bagging the average of the seed's bags" in (out / "versus.md").read_text()


def test_checkpoint_soups_average_the_mixtures_last_evaluations_uniformly_and_greedily(
    tiny_data, tmp_path, shared_data, capsys
):
    """merge=soup: the mixture keeps its last soup_checkpoints= evaluated models (its training
    unchanged: the same final weights as without), merged uniformly into merge-soup and greedily
    (Wortsman et al.: each kept only where the soup's dev score does not fall) into
    merge-greedy_soup; no other run trains for them."""
    out = tmp_path / "versus"
    train = [a for a in args_for(tiny_data, out) if not a.startswith(("out=", "max_steps="))]
    data = shared_data / "senteval" / "downstream"
    args = ["budget=steps:6", "transfer_tasks=STS16", f"transfer_data={data}", f"out={out}", "eval_every=1"]
    assert main(["versus-single", *train, *args, "merge=soup", "soup_checkpoints=3"]) == 0, (
        capsys.readouterr().err
    )
    kept = sorted(p.name for p in (out / "mixture" / "checkpoints").glob("evaluated-step-*.pt"))
    assert kept == ["evaluated-step-4.pt", "evaluated-step-5.pt", "evaluated-step-6.pt"]  # the last 3 of 6
    uniform = json.loads((out / "merge-soup" / "encoder.json").read_text())["merged"]
    assert uniform["method"] == "average" and uniform["greedy"] is None
    assert [p["path"] for p in uniform["parents"]] == [f"../mixture/checkpoints/{name}" for name in kept]
    greedy = json.loads((out / "merge-greedy_soup" / "encoder.json").read_text())["merged"]["greedy"]
    own = greedy["own_dev"]
    assert greedy["order"] == sorted(own, key=lambda source: -own[source])  # best alone first
    added = [greedy["order"][0], *(t["source"] for t in greedy["tried"] if t["kept"])]
    assert sorted(greedy["kept"]) == sorted(added)
    assert greedy["dev"] >= own[greedy["order"][0]]  # a greedy soup never scores below its best ingredient
    record = json.loads((out / "versus.json").read_text())
    assert [row["merge"] for row in record["verdicts"] if "merge" in row] == [
        "merge-soup",
        "merge-greedy_soup",
    ]
    assert not (out / "mixture-bag1").exists() and not any(p.name.endswith("-part") for p in out.iterdir())
    # the mixture trained as it would have without keeping its evaluations
    plain = tmp_path / "plain"
    config = json.loads((out / "mixture" / "config.json").read_text())
    assert config["config"]["run"]["keep_evaluated"] == 3
    from mtl.formats import checkpoint

    kept_last = checkpoint.load(out / "mixture" / "checkpoints" / "evaluated-step-6.pt", "cpu")["model"]
    assert (
        main(
            [
                "train-multitask",
                *args_for(tiny_data, plain, "max_steps=6", "eval_every=1", "stop=max_steps", "seed=1"),
            ]
        )
        == 0
    )
    final = checkpoint.load(plain / "checkpoints" / "latest.pt", "cpu")["model"]
    assert all(torch.equal(kept_last[k], final[k]) for k in final)


def test_an_incremental_update_adds_the_last_task_from_the_others_mixture_and_merges_back(
    tiny_data, tmp_path, shared_data, capsys
):
    """merge=incremental (BOOM): per seed, every training task but the last mixed for (n-1)/n of
    the budget, then the last alone from it (start_from=) for 1/n, the two averaged with the added
    one's share chosen on dev pairs; what the added task cost is recorded against retraining all."""
    out = tmp_path / "versus"
    train = [a for a in args_for(tiny_data, out) if not a.startswith(("out=", "max_steps="))]
    data = shared_data / "senteval" / "downstream"
    args = ["budget=steps:6", "seeds=2", "transfer_tasks=STS16", f"transfer_data={data}", f"out={out}"]
    assert main(["versus-single", *train, *args, "merge=incremental"]) == 0, capsys.readouterr().err
    for seed in (1, 2):
        base = json.loads((out / f"incremental-base-seed{seed}" / "config.json").read_text())["config"]
        added = json.loads((out / f"incremental-added-seed{seed}" / "config.json").read_text())["config"]
        assert [t for t, c in base["tasks"].items() if c.get("train", True)] == ["nli"] and base["optim"][
            "max_steps"
        ] == 3
        assert list(added["tasks"]) == ["squad"] and added["optim"]["max_steps"] == 3
        assert added["run"]["start_from"] == str(out / f"incremental-base-seed{seed}")
        merged = json.loads((out / f"merge-incremental-seed{seed}" / "encoder.json").read_text())["merged"]
        assert [p["path"] for p in merged["parents"]] == [
            f"../incremental-base-seed{seed}/encoder.json",
            f"../incremental-added-seed{seed}/encoder.json",
        ]
        assert merged["method"] == "average" and set(merged["dev_spearman"]) == {"0.2", "0.4", "0.6", "0.8"}
    record = json.loads((out / "versus.json").read_text())
    assert [row["merge"] for row in record["verdicts"] if "merge" in row] == ["merge-incremental"]
    assert (
        record["incremental"]["added_task"] == "squad" and record["incremental"]["share_of_retraining"] == 0.5
    )
    assert (
        "merge-incremental added squad to the others' mixture in steps:3: 50.0%"
        in (out / "versus.md").read_text()
    )
    capsys.readouterr()
    minutes = [a for a in args if not a.startswith(("budget=", "out="))] + [
        "budget=minutes:1",
        f"out={tmp_path / 'm'}",
    ]
    assert main(["versus-single", *train, *minutes, "merge=incremental"]) == 2
    assert "incremental divides the budget's steps" in capsys.readouterr().err
