"""Affinity toward targets: a watching task (`<task>.train=false`) is a column of its own,
measured on its dev split, with the noise floor of the training tasks' affinity."""

import json
from itertools import permutations

import numpy as np
import pytest
import torch
from scipy import stats

from mtl.train.loop import run
from tests.conftest import FIXTURES, args_for, start_run
from tests.test_training import exported_weights

# nli trains; sts (a cosine: its own loss) and squad (a classification: a fitted probe) watch
WATCHED = (
    "tasks=nli,sts,squad",
    f"sts.source={FIXTURES / 'sts_tiny'}",
    "sts.train=false",
    "squad.train=false",
)


def target_affinity(tiny_data, tmp_path, *keys: str):
    from mtl.train.callbacks.affinity import Affinity
    from mtl.train.loop.trainer import Trainer

    config = run.config_from_args(
        args_for(tiny_data, tmp_path / "run", "max_steps=1", "precision=fp32", "optim=adam", "lr=1e-3", *keys)
    )
    trainer = Trainer(config, tmp_path / "run", progress=False)
    return trainer, Affinity(
        trainer.run.data, trainer.run.setup, trainer.run.setup.scheduler.tasks, 0, trainer.run.device, 3, 5.0
    )


def test_watching_tasks_are_targets_measured_on_their_dev_split(tiny_data, tmp_path):
    trainer, affinity = target_affinity(tiny_data, tmp_path, *WATCHED)
    assert affinity.tasks == ["nli"] and affinity.targets == ["sts", "squad"]
    for target in affinity.targets:  # the dev split's pairs, never the training split's
        dev = {tuple(row) for row in trainer.run.data.examples[target]["dev"].sentences}
        train = {tuple(row) for row in trainer.run.data.examples[target]["train"].sentences}
        held = {tuple(row) for batch in affinity.held[target] for row in batch.sentences}
        assert held <= dev and not held & (train - dev)
    before = {k: v.clone() for k, v in trainer.run.model.state_dict().items()}
    measured = affinity.measure()
    assert measured.per_batch.shape == (3, 1, 1) and measured.toward.shape == (3, 1, 2)
    assert np.isfinite(measured.toward).all() and (measured.toward != 0).all()
    assert all(torch.equal(before[k], v) for k, v in trainer.run.model.state_dict().items())
    assert all(p.grad is None for p in trainer.run.model.parameters())
    again = affinity.measure()  # the same batches, probe and dropout masks: the same bits
    assert np.array_equal(measured.toward, again.toward)


def test_the_probe_is_scikit_learns_default_logistic_regression(tiny_data, tmp_path):
    """The classification target's probe: the fit scikit-learn's LogisticRegression() makes
    (C=1, L2), here by L-BFGS in float64 on the same features."""
    from sklearn.linear_model import LogisticRegression

    from mtl.train.data.probe import SEED_OFFSET, probe_features

    trainer, affinity = target_affinity(tiny_data, tmp_path, *WATCHED)
    weight, bias = affinity._fit_probe("squad")
    train = trainer.run.data.examples["squad"]["train"]
    count = min(len(train), trainer.run.data.tasks["squad"].config.probe_train)
    rows = np.sort(np.random.default_rng([0, SEED_OFFSET]).permutation(len(train))[:count])
    features = probe_features(
        trainer.run.model,
        trainer.run.model.heads["squad"],
        train.subset(rows),
        trainer.run.data.table,
        64,
        trainer.run.device,
    ).astype(np.float64)
    reference = LogisticRegression(C=1.0, tol=1e-10, max_iter=10_000).fit(features, train.labels[rows])
    ours = features @ weight.numpy().T + bias.numpy()
    # two classes: scikit-learn keeps one logit, the difference of our two
    np.testing.assert_allclose(
        ours[:, 1] - ours[:, 0], reference.decision_function(features), atol=1e-4, rtol=1e-4
    )


def test_a_run_with_targets_trains_the_same_bits_and_logs_their_column(tiny_data, tmp_path):
    extra = (*WATCHED, "max_steps=4", "dropout=0.2", "eval_every=4")
    start_run(tiny_data, tmp_path / "off", *extra)
    start_run(tiny_data, tmp_path / "on", *extra, "affinity_every=2", "affinity_batches=2")
    off, on = exported_weights(tmp_path / "off"), exported_weights(tmp_path / "on")
    assert all(torch.equal(off[k], on[k]) for k in off)
    from mtl.runs import read_affinity, read_metrics

    rows = read_affinity(tmp_path / "on/affinity.jsonl")
    assert [r["step"] for r in rows] == [2, 4] and all(r["targets"] == ["sts", "squad"] for r in rows)
    assert all(np.allclose(np.mean(r["toward_per_batch"], axis=0), r["toward"]) for r in rows)
    logged = [r for r in read_metrics(tmp_path / "on/metrics.jsonl") if r.get("phase/event") == "affinity"]
    assert [r["affinity/nli>sts"] for r in logged] == [r["toward"][0][0] for r in rows]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"targets": ["sts"]}, "targets and toward come together"),
        ({"targets": ["sts"], "toward": [[0.1, 0.2]]}, "1 training tasks x 1 targets"),
        ({"targets": ["nli"], "toward": [[0.1]]}, "none of them a training task"),
    ],
)
def test_a_damaged_target_column_is_refused(tmp_path, change, message):
    from mtl.files.schemas import DamagedFile
    from mtl.runs import read_affinity

    row = {"step": 2, "tasks": ["nli"], "matrix": [[0.1]], "unit": "per_lr", **change}
    (tmp_path / "affinity.jsonl").write_text(json.dumps(row) + "\n")
    with pytest.raises(DamagedFile, match=message):
        read_affinity(tmp_path / "affinity.jsonl")


# ---- just affinity-check: the prediction against leaving each training task out ------------


def test_affinity_check_trains_all_and_each_left_out_and_compares_them(tiny_data, tmp_path, capsys):
    from mtl.cli import main

    out = tmp_path / "check"
    train = [
        a
        for a in args_for(tiny_data, out, WATCHED[1], "tasks=nli,squad,sts")
        if not a.startswith(("out=", "max_steps="))
    ]
    command = ["affinity-check", *train, "sts.train=false", "affinity_every=2", "affinity_batches=2",
               "budget=steps:4", "seeds=1", f"out={out}", "resamples=200"]  # fmt: skip
    assert main(command) == 0, capsys.readouterr().err
    result = json.loads((out / "affinity-check.json").read_text())
    assert (
        result["tasks"] == ["nli", "squad"]
        and result["targets"] == ["sts"]
        and result["splits"] == {"sts": "dev"}
    )
    runs = {p.name for p in out.iterdir() if p.is_dir()}
    assert runs == {
        "all",
        "without-nli",
        "without-squad",
    }  # one seed: a run per arm (the seeds' interval: below)
    assert (out / "all/affinity.jsonl").is_file() and not (out / "without-nli/affinity.jsonl").exists()
    pairs = {(p["task"], p["target"]): p for p in result["pairs"]}
    assert set(pairs) == {("nli", "sts"), ("squad", "sts")}
    from mtl.runs import read_affinity, read_summary

    # the prediction is the all-task run's mean; the effect, with minus without
    rows = read_affinity(out / "all/affinity.jsonl")
    assert pairs[("nli", "sts")]["predicted"] == [pytest.approx(np.mean([r["toward"][0][0] for r in rows]))]
    with_nli = read_summary(out / "all/summary.json")["best/sts/dev/pearson"]
    without_nli = read_summary(out / "without-nli/summary.json")["best/sts/dev/pearson"]
    assert pairs[("nli", "sts")]["measured"] == [pytest.approx(100 * (with_nli - without_nli))]
    assert sum(p["first_by_affinity"] for p in pairs.values()) == 1  # one first for the one seed
    assert (
        "Spearman's rho" in (out / "affinity-check.md").read_text()
        or "no Spearman" in (out / "affinity-check.md").read_text()
    )


def test_spearman_over_seeds_and_its_interval():
    from mtl.studies.affinity_check import firsts, spearman_over_seeds

    predictions = {s: np.array([[3.0], [2.0], [1.0]]) + 0.1 * s for s in (1, 2, 3)}
    effects = {s: np.array([[5.0], [1.0], [-2.0]]) * s for s in (1, 2, 3)}
    agreed = spearman_over_seeds(predictions, effects, 500)
    assert (
        agreed["rho"] == pytest.approx(1.0) and agreed["low"] == pytest.approx(1.0) and agreed["pairs"] == 3
    )
    reversed_effects = {s: -e for s, e in effects.items()}
    assert spearman_over_seeds(predictions, reversed_effects, 500)["high"] == pytest.approx(-1.0)
    assert (
        spearman_over_seeds({1: predictions[1]}, {1: effects[1]}, 500)["low"] is None
    )  # one seed: no interval
    tied = {s: np.ones((3, 1)) for s in (1, 2)}
    assert spearman_over_seeds(tied, effects, 500)["rho"] is None
    # the seeds' mean flat, one seed's not: no rho, and no interval (it read [1, 1])
    flat_mean = {1: np.array([[3.0], [2.0], [1.0]]), 2: np.array([[-3.0], [-2.0], [-1.0]])}
    no_rho = spearman_over_seeds(flat_mean, effects, 500)
    assert no_rho["rho"] is None and no_rho["low"] is None and no_rho["high"] is None
    assert firsts(effects, ["a", "b", "c"], ["t"]) == {"t": {"a": 3, "b": 0, "c": 0}}


def test_few_pairs_are_no_evidence_however_many_seeds_agree():
    """Three pairs have six orders: a perfect rho comes by chance one time in three (two-sided),
    so no seed count makes it a verdict; eight pairs in order, 2 / 8! of the time."""
    from mtl.studies.affinity_check import markdown, permutation_p, spearman_over_seeds

    assert permutation_p(np.array([1.0, 2, 3]), np.array([4.0, 5, 6])) == pytest.approx(1 / 3)
    assert permutation_p(np.arange(8.0), np.arange(8.0) ** 2) == pytest.approx(2 / 40_320)
    effects = np.array([2.0, 1, 4, 3])  # rho 0.6: every order of the effects, counted by scipy's rho
    as_far = [
        abs(stats.spearmanr(np.arange(4), effects[list(o)])[0]) >= 0.6 - 1e-12 for o in permutations(range(4))
    ]
    assert permutation_p(np.arange(4.0), effects) == pytest.approx(np.mean(as_far))
    predictions = {s: np.array([[3.0], [2.0], [1.0]]) for s in range(5)}
    check = spearman_over_seeds(predictions, predictions, 200)
    assert check["rho"] == pytest.approx(1.0) and check["low"] == pytest.approx(1.0)
    result = {"spearman": check, "targets": ["t"], "budget": "steps:2", "seeds": list(range(5)),
              "resamples": 200, "splits": {"t": "test"}, "pairs": []}  # fmt: skip
    said = "rho +1.00 [+1.00, +1.00] (95%, 200 seed resamples), permutation p 0.33 over 3 pairs: no evidence"
    assert said in markdown(result)


SOURCE = WATCHED[1]


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (["budget=steps:3"], "affinity-check needs a target"),
        (["tasks=nli,squad,sts", SOURCE, "sts.train=false", "budget=steps:3"], "give affinity_every=N"),
        (["tasks=nli,sts", SOURCE, "sts.train=false", "affinity_every=2", "budget=steps:3"], "trains alone already"),
        (["tasks=nli,squad,sts", SOURCE, "sts.train=false", "affinity_every=2", "budget=3"], "budget="),
        (["tasks=nli,squad,sts", SOURCE, "sts.train=false", "affinity_every=2", "budget=steps:3", "max_steps=3"],
         "sets it"),
    ],
)  # fmt: skip
def test_bad_affinity_check_arguments_are_one_line(tiny_data, tmp_path, keys, message):
    from mtl.errors import UserError
    from mtl.studies import study

    train = [a for a in args_for(tiny_data, tmp_path / "out") if not a.startswith(("out=", "max_steps="))]
    with pytest.raises(UserError, match=message):
        study.command(["affinity-check", *train, *keys, f"out={tmp_path / 'out'}"])


# ---- the other estimators toward the targets (affinity_estimators=) ---------------------------


def estimators_affinity(tiny_data, tmp_path, steps_ahead: int):
    from mtl.train.callbacks.affinity import Affinity

    trainer, _ = target_affinity(tiny_data, tmp_path, *WATCHED)
    run_ = trainer.run
    return trainer, Affinity(
        run_.data, run_.setup, run_.setup.scheduler.tasks, 0, run_.device, 3, 5.0,
        estimators=("scale_free", "lookahead_k", "alignment"), steps_ahead=steps_ahead,
    )  # fmt: skip


def test_each_estimator_is_what_it_says_and_touches_nothing(tiny_data, tmp_path):
    trainer, affinity = estimators_affinity(tiny_data, tmp_path, steps_ahead=1)
    model, optimizer = trainer.run.model, trainer.run.setup.optimizers["nli"]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    state = {
        id(p): {k: v.clone() if torch.is_tensor(v) else v for k, v in s.items()}
        for p, s in optimizer.state.items()
    }
    measured = affinity.measure()
    assert set(measured.estimates) == {"scale_free", "lookahead_k", "alignment"}
    assert all(
        values.shape == (3, 1, 2) and np.isfinite(values).all() for values in measured.estimates.values()
    )
    assert set(measured.seconds) == set(measured.estimates) and all(s >= 0 for s in measured.seconds.values())
    # one step ahead is the lookahead itself
    np.testing.assert_allclose(measured.estimates["lookahead_k"], measured.toward, rtol=1e-9, atol=1e-12)
    # the probed target (squad) is scale-free already: its loss's drop; the score target's is its r's
    np.testing.assert_array_equal(measured.estimates["scale_free"][:, :, 1], measured.toward[:, :, 1])
    assert not np.allclose(measured.estimates["scale_free"][:, :, 0], measured.toward[:, :, 0])
    # the alignment: the cosine of the two gradients over the shared encoder, computed here anew
    assert (np.abs(measured.estimates["alignment"]) <= 1 + 1e-9).all()
    gradients = {
        task: affinity._gradient(
            task, 0, affinity._trained(task), torch.float64, on=affinity.scored if task == "sts" else None
        )[0]
        for task in ("nli", "sts")
    }
    flat = [torch.cat([g.flatten() for _, g in sorted(gradients[t].items())]) for t in ("nli", "sts")]
    expected = float(flat[0] @ flat[1] / (flat[0].norm() * flat[1].norm()))
    assert measured.estimates["alignment"][0, 0, 0] == pytest.approx(expected, rel=1e-9)
    # nothing of the run moved: weights, gradients, the optimizer's state
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())
    assert all(
        all(
            torch.equal(v, state[id(p)][k]) if torch.is_tensor(v) else v == state[id(p)][k]
            for k, v in s.items()
        )
        for p, s in optimizer.state.items()
    )
    again = affinity.measure()
    assert all(np.array_equal(measured.estimates[n], again.estimates[n]) for n in measured.estimates)


def test_more_steps_ahead_look_further(tiny_data, tmp_path):
    _, one = estimators_affinity(tiny_data, tmp_path / "one", steps_ahead=1)
    _, three = estimators_affinity(tiny_data, tmp_path / "three", steps_ahead=3)
    first, further = one.measure(), three.measure()
    np.testing.assert_array_equal(first.toward, further.toward)  # the one-step lookahead is the same
    assert not np.allclose(first.estimates["lookahead_k"], further.estimates["lookahead_k"])


def test_a_run_logs_each_estimator_and_its_cost(tiny_data, tmp_path):
    from mtl.runs import read_affinity

    start_run(tiny_data, tmp_path / "on", *WATCHED, "max_steps=2", "affinity_every=2", "affinity_batches=2",
              "affinity_estimators=scale_free,alignment")  # fmt: skip
    (row,) = read_affinity(tmp_path / "on/affinity.jsonl")
    assert set(row["estimators"]) == set(row["estimator_seconds"]) == {"scale_free", "alignment"}
    assert np.shape(row["estimators"]["alignment"]) == np.shape(row["toward_per_batch"]) == (2, 1, 2)


def test_an_unknown_estimator_is_one_line(tiny_data, tmp_path):
    from mtl.errors import UserError

    with pytest.raises(UserError, match="affinity_estimators=influence: 'influence' is not one"):
        run.config_from_args(args_for(tiny_data, tmp_path / "run", "affinity_estimators=influence"))


def test_a_measurement_leaves_a_tied_tensor_as_it_was(tiny_data, tmp_path):
    """qt's output encoder shares the encoder's frozen vectors: torch's functional_call with
    tie_weights swapped the shared tensor once per name and restored the last, so the model kept
    the float64 copy and the next training step failed (Double and BFloat16)."""
    from mtl.train.callbacks.affinity import Affinity
    from tests.test_objectives import QT

    trainer, _ = target_affinity(tiny_data, tmp_path, *QT[1:], "tasks=nli,qt,sts", *WATCHED[1:3])
    run_ = trainer.run
    assert run_.model.encoder.embedding.weight is run_.model.heads["qt"].output_encoder.embedding.weight
    before = {
        k: (v.dtype, v.data_ptr(), type(v)) for k, v in run_.model.named_parameters(remove_duplicate=False)
    }
    affinity = Affinity(run_.data, run_.setup, run_.setup.scheduler.tasks, 0, run_.device, 2, 5.0,
                        estimators=("lookahead_k", "alignment"), steps_ahead=2)  # fmt: skip
    assert np.isfinite(affinity.measure().toward).all()
    after = {
        k: (v.dtype, v.data_ptr(), type(v)) for k, v in run_.model.named_parameters(remove_duplicate=False)
    }
    assert after == before
