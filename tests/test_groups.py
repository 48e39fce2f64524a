"""`just train-groups`: a task grouping (named, or TAG's selection from a run's affinity) trained
against all tasks in one network and each alone, every network at the budget with seeds."""

import json

import numpy as np
import pytest

from mtl.cli import main
from mtl.errors import UserError
from mtl.studies import groups, study

from .conftest import FIXTURES, args_for


def _train(tiny_data, tmp_path, out):
    noise = tmp_path / "noise.toml"
    noise.write_text(f'kind = "nli"\nsource = "{FIXTURES / "snli_tiny"}"\nshuffle_labels = true\nbatch = 8\n')
    return [
        a
        for a in args_for(tiny_data, out, f"tasks=nli,squad,{noise}")
        if not a.startswith(("out=", "max_steps="))
    ]


def test_a_named_grouping_trains_against_all_in_one_and_alone_and_resumes(tiny_data, tmp_path, capsys):
    out = tmp_path / "groups"
    train = _train(tiny_data, tmp_path, out)
    command = ["train-groups", *train, "groups=nli+squad,noise", "budget=steps:3", "seeds=2", f"out={out}"]
    assert main(command) == 0, capsys.readouterr().err
    result = json.loads((out / "groups.json").read_text())
    assert result["groups"] == [["nli", "squad"], ["noise"]] and result["networks"] == {
        "grouping": 2,
        "all": 1,
        "alone": 3,
    }
    runs = {p.name for p in out.iterdir() if p.is_dir()}
    assert runs == {f"{arm}-seed{s}" for arm in ("nli", "squad", "noise", "nli+squad", "all") for s in (1, 2)}
    trained = json.loads((out / "nli+squad-seed1" / "summary.json").read_text())
    assert trained["global_step"] == 3 and "steps/noise" not in trained
    assert result["serving"] == {"nli": "nli+squad", "squad": "nli+squad", "noise": "noise"}
    rows = {(r["task"], r["against"]): r for r in result["verdicts"]}
    assert rows[("noise", "noise")]["same"] and rows[("noise", "noise")]["verdict"] == "the same network"
    compared = [r for r in rows.values() if not r["same"]]
    assert len(compared) == 5 and {r["family"] for r in compared} == {5}  # Holm over the study's 5
    for row in compared:
        assert row["low"] <= row["difference"] <= row["high"]
        assert (row["verdict"] == "no evidence") == (row["low"] <= 0 <= row["high"])
        assert len(row["scores"][0]) == len(row["scores"][1]) == 2
    text = (out / "groups.md").read_text()
    assert all(r["split"] == ("dev" if r["task"] == "squad" else "test") for r in result["verdicts"])
    assert "| squad (dev: no test split) |" in text
    assert "| nli | nli+squad |" in text and "all-in-one 1" in text and "Holm over all 5" in text
    stamps = {p: p.stat().st_mtime_ns for p in out.glob("*/summary.json")}
    assert main(command) == 0  # resumed: nothing trains again
    assert {p: p.stat().st_mtime_ns for p in out.glob("*/summary.json")} == stamps


def test_tags_selection_from_a_runs_affinity_picks_the_groups(tmp_path):
    """groups=from:<run>: the run's affinity.jsonl, TAG's selection with `networks` groups."""
    folder = tmp_path / "run"
    folder.mkdir()
    tasks = ["a", "b", "c"]
    per_batch = np.array([[[0.1, 0.1, -0.3], [0.5, 0.2, 0.5], [-0.3, 0.1, 0.1]]] * 8)
    per_batch = per_batch + np.random.default_rng(0).normal(0, 0.001, per_batch.shape)
    row = {"step": 2, "block": 0, "task": "a", "tasks": tasks, "matrix": per_batch.mean(axis=0).tolist(),
           "batches": 8, "unit": "per_lr", "per_batch": per_batch.tolist()}  # fmt: skip
    (folder / "affinity.jsonl").write_text(json.dumps(row) + "\n")
    config = groups.TrainGroupsConfig(groups=f"from:{folder}", networks=2, budget="steps:3")
    chosen = groups.grouping(config, tasks)
    assert sorted(chosen.groups) == [["a", "b"], ["b", "c"]] and chosen.served["c"] == ["b", "c"]
    with pytest.raises(UserError, match="its affinity is over a, b, c"):
        groups.grouping(config, ["a", "b"])
    with pytest.raises(UserError, match="has no affinity measurements"):
        groups.grouping(groups.TrainGroupsConfig(groups=f"from:{tmp_path}", budget="steps:3"), tasks)


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (["groups=nli+squad,noise", "budget=steps:3", "max_steps=4"], "train-groups sets it"),
        (["groups=nli+squad,noise", "budget=steps:3", "stop=patience"], "equal compute"),
        (["budget=steps:3"], "groups= is missing"),
        (["groups=nli+squad,noise", "budget=3"], "budget="),
        (["groups=nli+qt,noise", "budget=steps:3"], "qt is not a training task"),
        (["groups=nli,noise", "budget=steps:3"], "squad is in no group"),
        (["groups=nli+nli,squad,noise", "budget=steps:3"], "names a task twice"),
    ],
)
def test_bad_train_groups_arguments_are_one_line(tiny_data, tmp_path, keys, message):
    train = _train(tiny_data, tmp_path, tmp_path / "out")
    with pytest.raises(UserError, match=message):
        config, rest = study.parse(groups.TrainGroups(), [*train, *keys])
        groups.grouping(config, ["nli", "squad", "noise"])


def _members_with_scores(tmp_path, scores: dict[str, list[float]]) -> list:
    """Finished-looking members of each arm, one per seed, with `nli`'s test accuracy."""
    from mtl.jobs.member import Member

    members = []
    for arm, accuracies in scores.items():
        for seed, accuracy in enumerate(accuracies, start=1):
            folder = tmp_path / f"{arm}-seed{seed}"
            folder.mkdir(parents=True)
            (folder / "summary.json").write_text(json.dumps({"best/nli/test/acc": accuracy}))
            members.append(Member(f"{arm}-seed{seed}", [], folder, arm, seed))
    return members


def test_one_seed_a_side_is_no_test_not_a_zero_width_interval(tmp_path):
    """train-groups keeps no per-item test outputs of its training tasks: with one seed a side
    nothing varies, so the row says "no test" (it once read `+1.56 [+1.56, +1.56] helps`); with
    seeds, the same test as just compare's, Holm over what was tested."""
    one = _members_with_scores(tmp_path / "one", {"nli+squad": [0.3281], "all": [0.3125], "nli": [0.30]})
    rows = groups.verdicts(one, {"nli": "nli+squad"}, ["nli"])
    assert [r["verdict"] for r in rows] == ["no test (1 seed: train seeds=2 or more)"] * 2
    assert rows[0]["difference"] == pytest.approx(1.56) and "low" not in rows[0]
    text = groups.markdown({"groups": [["nli", "squad"]], "tasks": ["nli"], "source": "groups=", "budget": "steps:3",
                            "seeds": [1], "family": 0, "verdicts": rows})  # fmt: skip
    assert "| +1.56 | - | no test (1 seed" in text
    three = _members_with_scores(
        tmp_path / "three",
        {"nli+squad": [0.331, 0.322, 0.335], "all": [0.312, 0.318, 0.309], "nli": [0.31, 0.33, 0.30]},
    )
    rows = groups.verdicts(three, {"nli": "nli+squad"}, ["nli"])
    assert {r["family"] for r in rows} == {2} and all(r["low"] < r["difference"] < r["high"] for r in rows)


# The Taskonomy affinities of TAG's released notebook (google-research/tag,
# network_selection/TAG_network_selection.ipynb, "TAG average inter-task affinities"), in its
# layout: ONTO[t][u] is what task u's step does to task t's loss (the notebook adds ONTO[t][u] to
# t's score in a group holding u), so mtl's matrix (row: the task stepped) is its transpose.
ONTO = {
    "ss_l": {"ss_l": 11.999321423965947, "norm_l": 0.04891036220837213, "depth_l": 0.11537429894122785,
             "key_l": 0.00454724706606927, "edge2d_l": 0.008776140044461892},
    "depth_l": {"ss_l": 0.41355850961858076, "norm_l": 0.2914147606289435, "depth_l": 7.3276368896443556,
                "key_l": 0.01353652075974951, "edge2d_l": 0.07395688217092156},
    "norm_l": {"ss_l": 0.13982367687578146, "norm_l": 1.070989344832557, "depth_l": 0.22096194178241185,
               "key_l": 0.010493772045577332, "edge2d_l": 0.07645966827511533},
    "key_l": {"ss_l": 0.021098526716001414, "norm_l": 0.010729013557423, "depth_l": 0.013365983131803236,
              "key_l": 0.7338844180545812, "edge2d_l": 0.6897358940641894},
    "edge2d_l": {"ss_l": 0.056692022190245474, "norm_l": 0.03600666458561003, "depth_l": 0.03668338077695892,
                 "key_l": 0.30372134710544996, "edge2d_l": 5.9661909882444615},
}  # fmt: skip


def test_tags_released_selection_reproduces_the_notebooks_taskonomy_groups():
    """The notebook's own selection on its own matrix (its groups, in its order): 2 networks
    {ss, depth, normal} + {keypoint, edge2d}; 3: {ss, depth} + {depth, normal} + {keypoint,
    edge2d}. mtl's self-affinity variant scores a task alone by its own lookahead, which the
    diagonal dominates: it serves ss alone, so it is labelled apart (selection=self)."""
    from mtl.analysis.multitask import AffinityMean, released_tag_selection, tag_selection

    tasks = list(ONTO)
    stepped = np.array([[ONTO[onto][task] for onto in tasks] for task in tasks])  # (stepped, onto)
    summary = AffinityMean(tasks, stepped, None, False)
    chosen, served, _ = released_tag_selection(summary, 2)
    assert chosen == [["ss_l", "depth_l", "norm_l"], ["key_l", "edge2d_l"]]
    assert served["ss_l"] == ["ss_l", "depth_l", "norm_l"] and served["edge2d_l"] == ["key_l", "edge2d_l"]
    chosen, _, _ = released_tag_selection(summary, 3)
    assert chosen == [["ss_l", "depth_l"], ["depth_l", "norm_l"], ["key_l", "edge2d_l"]]
    assert released_tag_selection(summary, 1)[0] == [tasks]  # one network: every task in it
    variant, _, _ = tag_selection(summary, 2)
    assert ["ss_l"] in variant  # the self-affinity variant serves ss alone
    config = groups.TrainGroupsConfig(groups="from:x", budget="steps:3")
    assert config.selection == "released"


def test_tags_selection_is_bounded_and_says_its_size(tmp_path):
    """8 tasks at networks=8 once searched for minutes with nothing said: refused in one line
    naming the networks= that fits; within the bound it runs."""
    folder = tmp_path / "run"
    folder.mkdir()
    tasks = [f"t{i}" for i in range(8)]
    matrix = np.random.default_rng(1).normal(0, 1, (8, 8)).tolist()
    row = {"step": 2, "block": 0, "task": "t0", "tasks": tasks, "matrix": matrix, "unit": "per_lr"}
    (folder / "affinity.jsonl").write_text(json.dumps(row) + "\n")
    config = groups.TrainGroupsConfig(groups=f"from:{folder}", networks=8, budget="steps:3")
    with pytest.raises(UserError, match=r"would try 410,032,402,903,456 sets of groups .* networks=3 tries"):
        groups.grouping(config, tasks)
    config = groups.TrainGroupsConfig(groups=f"from:{folder}", networks=2, budget="steps:3")
    assert len(groups.grouping(config, tasks).groups) <= 2


def test_a_study_is_not_written_into_a_runs_folder(tmp_path):
    """train-groups out=<a finished run> once wrote sweep.json into it, and just report of the
    run then said "no runs to report"."""
    from mtl.studies.arms import study_folder

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text("{}")
    with pytest.raises(UserError, match="is a run's folder .* give the study a folder of its own"):
        study_folder(str(tmp_path / "run"), "groups")
    assert study_folder(str(tmp_path / "new"), "groups") == tmp_path / "new"
