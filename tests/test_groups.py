"""`just train-groups`: a task grouping (named, or TAG's selection from a run's affinity) trained
against all tasks in one network and each alone, every network at the budget with seeds."""

import json

import numpy as np
import pytest

from mtl.cli import main
from mtl.errors import UserError
from mtl.studies import groups

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
        config, rest = groups.parse([*train, *keys])
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
            members.append(Member(f"{arm}-seed{seed}", [], folder))
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
