"""`just compare-mixing`: every arm with every seed at equal compute, a planted noise task, doremi
against the stratified run of its seed, verdicts against stratified; resumable."""

import functools
import json
import re

import numpy as np
import pytest

from mtl.cli import main
from mtl.errors import UserError
from mtl.studies import compare_mixing, study
from mtl.train.callbacks.online_mixing import aioli_update

from .browser import can_look, look_at
from .conftest import FIXTURES, args_for

LABELS = ("ENTAILMENT", "NEUTRAL", "CONTRADICTION")


def fake_sick(root):
    """SICK's three files in SentEval's layout under root/senteval/downstream (the noise task's
    source: $MTL_DATA_DIR), cut from the SNLI fixture."""
    first = (FIXTURES / "snli_tiny" / "s1.train").read_text().splitlines()
    second = (FIXTURES / "snli_tiny" / "s2.train").read_text().splitlines()
    folder = root / "senteval" / "downstream" / "SICK"
    folder.mkdir(parents=True)
    header = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
    for name, rows in (("SICK_train.txt", range(0, 24)), ("SICK_trial.txt", range(24, 32)),
                       ("SICK_test_annotated.txt", range(32, 40))):  # fmt: skip
        lines = [f"{i}\t{first[i]}\t{second[i]}\t3.0\t{LABELS[i % 3]}" for i in rows]
        (folder / name).write_text(header + "\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_the_authors_normalization_credits_a_harmful_task_and_abs_does_not():
    # columns: the task trained; the third lowers no loss and raises its own
    law = np.array([[0.4, 0.1, 0.0], [0.1, 0.3, 0.0], [0.0, 0.0, -0.5]])
    shift, _ = aioli_update(np.log(np.full(3, 1 / 3)), law, 0.5, "shift")
    kept, _ = aioli_update(np.log(np.full(3, 1 / 3)), law, 0.5, "abs")
    assert kept[2] < 1 / 3 < kept[0]  # its share falls
    assert shift[2] > kept[2]  # the shift moved its -0.5 to 0 and everything else up by 0.5


def test_a_benchmark_plants_noise_judges_every_arm_and_resumes_without_retraining(
    tiny_data, senteval, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("MTL_DATA_DIR", str(fake_sick(tmp_path / "data")))
    out = tmp_path / "bench"
    train = [a for a in args_for(tiny_data, out) if not a.startswith(("out=", "max_steps="))]
    command = [
        "compare-mixing", *train, "arms=stratified,doremi", "budget=steps:4", "seeds=2", "mix_every=2",
        "transfer_tasks=MR", f"transfer_data={senteval}", f"out={out}",
    ]  # fmt: skip
    assert main(command) == 0, capsys.readouterr().err
    result = json.loads((out / "bench-mixing.json").read_text())
    assert result["tasks"] == ["nli", "squad", "noise"] and list(result["arms"]) == ["stratified", "doremi"]
    assert result["arms"]["stratified"]["noise_mid_run"] == pytest.approx(1 / 3)
    assert all(0 <= row["noise_mid_run"] <= 1 for row in result["arms"].values())
    assert all(row["seeds"] == 2 and row["noise_steps"] is not None for row in result["arms"].values())
    assert result["arms"]["doremi"]["evidence_seconds"] > 0
    config = json.loads((out / "arms" / "doremi-seed2" / "config.json").read_text())["config"]
    assert (
        config["schedule"]["schedule_options"]["mix_reference"]
        == f"{out / 'arms' / 'stratified'}-seed{{seed}}"
    )
    assert config["tasks"]["noise"]["shuffle_labels"] is True
    # doremi's two seeds are one arm (their reference follows the seed), so one comparison each
    assert [(r["task"], r["arm"]) for r in result["verdicts"]] == [("MR", "doremi")]
    text = (out / "bench-mixing.md").read_text()
    assert "| stratified | 2 | 33.3% |" in text and "| MR | doremi |" in text
    page = (out / "bench-mixing.html").read_text()
    assert "noise's share in force" in page and "<td>MR</td><td>doremi</td>" in page
    if can_look():
        assert not (problems := look_at(out / "bench-mixing.html", "compare-mixing")), problems
    stamps = {p: p.stat().st_mtime_ns for p in out.glob("*/*/summary.json")}
    assert main(command) == 0
    assert {p: p.stat().st_mtime_ns for p in out.glob("*/*/summary.json")} == stamps


def test_aioli_target_answers_to_every_loss_but_the_planted_noise_tasks(tiny_data, tmp_path):
    out = tmp_path / "bench"
    train, tasks = compare_mixing.tasks_of(
        [a for a in args_for(tiny_data, out) if not a.startswith(("out=", "max_steps="))],
        compare_mixing.noise_task(out),
    )
    config = compare_mixing.BenchMixingConfig(arms="stratified,aioli-target")
    (_, judged) = compare_mixing.members(train, ["stratified", "aioli-target"], tasks, config, [1], out)
    assert tasks == ["nli", "squad", "noise"]
    assert "schedule=aioli" in judged.overrides and "mix_target=nli,squad" in judged.overrides
    assert not [key for key in judged.overrides if key.startswith("mix_eta=")]  # the authors' step size


def test_a_step_size_given_reaches_the_online_arms_only(tiny_data, tmp_path):
    out = tmp_path / "bench"
    config, train = study.parse(compare_mixing.CompareMixing(),
        [*[a for a in args_for(tiny_data, out) if not a.startswith(("out=", "max_steps="))],
         "arms=stratified,temperature,aioli,doremi", "mix_eta=1.5"]
    )  # fmt: skip
    train, tasks = compare_mixing.tasks_of(train, compare_mixing.noise_task(out))
    found = compare_mixing.members(train, compare_mixing.arms_of(config), tasks, config, [1], out)
    etas = {m.name: [k for k in m.overrides if k.startswith("mix_eta=")] for m in found}
    assert etas == {"stratified-seed1": [], "temperature-seed1": [], "aioli-seed1": ["mix_eta=1.5"],
                    "doremi-seed1": ["mix_eta=1.5"]}  # fmt: skip
    result = {"tasks": tasks, "budget": "steps:4", "mix_every": 10, "mix_eta": 1.5, "seeds": [1],
              "noise": "noise", "arms": {}, "verdicts": []}  # fmt: skip
    assert "update every 10 steps with step size mix_eta=1.5." in compare_mixing.markdown(result)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["arms=aioli,doremi"], "give stratified (the baseline)"),
        (["arms=stratified,aoili"], "aoili is no arm"),
        (["arms=stratified,searched"], "give mixture=<a just mixture-search folder>"),
        (["arms=stratified,aioli-target"], "aioli-target judges the tasks by every loss but the planted"),
        (["mix_target=nli"], "mix_target=nli: compare-mixing sets each arm's schedule"),
        (["schedule=aioli"], "schedule=aioli: compare-mixing sets each arm's schedule"),
        (["nli.prob=0.5"], "nli.prob=0.5: compare-mixing sets each arm's schedule"),
        (["max_steps=5"], "max_steps=5: compare-mixing sets it for each run"),
    ],
)
def test_bad_benchmark_arguments_are_one_line(tiny_data, tmp_path, args, message):
    train = [a for a in args_for(tiny_data, tmp_path / "b") if not a.startswith(("out=", "max_steps="))]
    with pytest.raises(UserError, match=re.escape(message)):
        study.run("compare-mixing", [*train, f"out={tmp_path / 'b'}", "budget=steps:2", "noise=false", *args])


def test_every_study_opens_alike(tiny_data, tmp_path, capsys):
    """open_study: the launcher's keys apart, the study's parse, its seeds, and the seed plan's
    warning (said and kept for the study's .md); a study with no plan= key has no plan."""
    from mtl.studies import groups
    from mtl.studies.opening import open_study

    plan = tmp_path / "planned.json"
    plan.write_text(json.dumps({"seeds": {"MR": 5, "CR": 2}, "most": 100}))
    train = [a for a in args_for(tiny_data, tmp_path / "b") if not a.startswith(("out=", "max_steps="))]
    opened = open_study(
        [*train, "launcher=local", "seeds=3", f"plan={plan}"],
        functools.partial(study.parse, compare_mixing.CompareMixing()),
    )
    assert opened.seeds == [1, 2, 3] and opened.config.arms.startswith("stratified")
    assert opened.below_plan is not None and opened.below_plan.startswith(
        "warning: 3 seeds per arm is below the plan (MR 5 per arm"
    )
    assert opened.below_plan in capsys.readouterr().err and "launcher=local" not in opened.train
    opened = open_study(
        [*train, "seed=4", "seeds=2", "groups=nli+squad", "budget=steps:2"],
        functools.partial(study.parse, groups.TrainGroups()),
    )
    assert opened.seeds == [4, 5] and opened.below_plan is None
