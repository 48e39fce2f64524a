"""schedule=mixed and its balancers: each balancer's math on hand-made gradients with a known
answer, then whole runs (every task at every step, exact resume after a kill, loss weights)."""

import json
import math

import numpy as np
import pytest
import torch

from mtl.errors import UserError
from mtl.runs import read_metrics
from mtl.train.loop import run
from mtl.train.optim.balancers import BALANCERS, GradNormOptions
from mtl.train.optim.balancers.base import pairwise_cosines
from mtl.train.step.grad_buffer import GradientBuffer
from tests.conftest import start_run
from tests.test_training import deterministic_summary, exported_weights, without_timing


def balancer(name, weights=(1.0, 1.0), **kwargs):
    return BALANCERS[name](["a", "b"], list(weights), **kwargs)


def test_sum_adds_the_gradients_and_reports_the_loss_weights():
    combined = balancer("sum", (1.0, 0.5)).combine(torch.tensor([[1.0, 2.0], [3.0, -1.0]]), torch.ones(2), 0)
    assert combined.shared.tolist() == [4.0, 1.0]
    assert combined.weights.tolist() == [1.0, 0.5] and combined.head_scales.tolist() == [1.0, 1.0]
    assert balancer("sum", (1.0, 0.5)).task_loss(1, torch.tensor(4.0)).item() == 2.0


def test_pcgrad_projects_away_only_the_conflicting_component():
    # g_a . g_b = -1 < 0: g_a loses its part along g_b, g_b its part along g_a (Yu et al., Algorithm 1).
    gradients = torch.tensor([[1.0, 0.0], [-1.0, 1.0]])
    combined = balancer("pcgrad").combine(gradients, torch.ones(2), step=0)
    # g_a - (-1 / 2) g_b = (0.5, 0.5); g_b - (-1 / 1) g_a = (0, 1)
    assert torch.allclose(combined.shared, torch.tensor([0.5, 1.5]))
    aligned = torch.tensor([[1.0, 0.0], [1.0, 1.0]])  # no conflict: the plain sum
    assert torch.equal(balancer("pcgrad").combine(aligned, torch.ones(2), 0).shared, aligned.sum(0))


def test_pcgrad_leaves_projected_gradients_orthogonal_to_what_they_conflicted_with():
    gradients = torch.tensor([[2.0, 1.0, 0.0], [-1.0, 0.5, 1.0], [0.0, -1.0, 0.5]])
    pc = BALANCERS["pcgrad"](["a", "b", "c"], [1.0, 1.0, 1.0])
    # with two tasks the order cannot matter; with three it is drawn per step, the same for a seed
    assert torch.equal(
        pc.combine(gradients, torch.ones(3), 7).shared, pc.combine(gradients, torch.ones(3), 7).shared
    )
    two = balancer("pcgrad").combine(gradients[:2], torch.ones(2), 0).shared
    a = gradients[0] - (gradients[0] @ gradients[1]) / (gradients[1] @ gradients[1]) * gradients[1]
    b = gradients[1] - (gradients[1] @ gradients[0]) / (gradients[0] @ gradients[0]) * gradients[0]
    assert abs(float(a @ gradients[1])) < 1e-6 and abs(float(b @ gradients[0])) < 1e-6
    assert torch.allclose(two, a + b)


def test_uncertainty_weights_have_kendalls_gradient():
    # total = sum_i exp(-s_i) L_i + s_i / 2: d/ds_i = -exp(-s_i) L_i + 1/2, at s = 0: 1/2 - L_i.
    uw = balancer("uncertainty")
    losses = torch.tensor([2.0, 0.25])
    total = sum(uw.task_loss(i, losses[i]) for i in range(2)) + uw.regulariser(world_size=1)
    total.backward()
    assert torch.allclose(uw.log_variances.grad, torch.tensor([-1.5, 0.25]))
    # Two ranks each add half the regulariser: the summed gradient is the same.
    uw.zero_grad()
    half = uw.regulariser(world_size=2)
    (half + half).backward()
    assert torch.allclose(uw.log_variances.grad, torch.tensor([0.5, 0.5]))
    with torch.no_grad():
        uw.log_variances.copy_(torch.tensor([math.log(2.0), 0.0]))
    assert torch.allclose(uw.combine(torch.zeros(2, 3), losses, 0).weights, torch.tensor([0.5, 1.0]))


def test_gradnorm_pulls_the_slower_task_towards_its_target_norm():
    gn = balancer("gradnorm", options=GradNormOptions(gradnorm_alpha=1.0))
    gradients = torch.tensor([[3.0, 4.0], [0.0, 1.0]])  # |g_a| = 5, |g_b| = 1
    first = gn.combine(gradients, torch.tensor([2.0, 1.0]), 0)  # L(0) recorded: both ratios 1
    # G = (5, 1), mean 3, targets (3, 3): a is above its target, b under: d/dw = sign(G - t) |g|
    assert gn.task_weights.grad.tolist() == [5.0, -1.0]
    assert torch.equal(first.shared, gradients.sum(0))
    # b's loss stays while a's halves: r = (0.5, 1) / 0.75, so b's target rises above a's.
    gn.combine(gradients, torch.tensor([1.0, 1.0]), 1)
    targets = 3.0 * torch.tensor([0.5, 1.0]) / 0.75
    assert targets[1] > targets[0] and gn.task_weights.grad.tolist() == [5.0, -1.0]
    with torch.no_grad():
        gn.task_weights.copy_(torch.tensor([3.0, 0.0]))
    gn.after_step()  # renormalised: positive, summing to the number of tasks
    assert gn.task_weights.min() > 0 and math.isclose(gn.task_weights.sum().item(), 2.0, rel_tol=1e-6)
    weighted = gn.combine(gradients, torch.tensor([1.0, 1.0]), 2)
    assert torch.allclose(weighted.shared, gn.task_weights.detach() @ gradients)
    assert torch.equal(weighted.head_scales, gn.task_weights.detach())


def test_pairwise_cosines_of_task_gradients():
    cosines = pairwise_cosines(torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 2.0]]))
    assert torch.allclose(cosines, torch.tensor([[1.0, -1.0, 0.0], [-1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))


# ---- whole runs ----------------------------------------------------------------------------


MIXED = ("schedule=mixed", "max_steps=8", "checkpoint_every=3", "dropout=0.2")


@pytest.mark.parametrize(
    "name", ["sum", "uncertainty", "gradnorm", "pcgrad", "famo", "upgrad", "aligned", "nash"]
)
def test_a_mixed_run_trains_every_task_at_every_step_and_resumes_exactly(tiny_data, tmp_path, name):
    extra = (*MIXED, f"balancer={name}")
    straight_dir, straight = start_run(tiny_data, tmp_path / "straight", *extra)
    assert straight["steps/nli"] == straight["steps/squad"] == straight["global_step"] == 8
    assert straight["examples/nli"] == 8 * 8 and straight["examples/squad"] == 8 * 4
    rows = [r for r in read_metrics(straight_dir / "metrics.jsonl") if "mixed/train/loss" in r]
    assert len(rows) == 8
    assert all(
        {"nli/train/loss", "squad/train/loss", "balance/nli/weight", "balance/cosine/nli~squad"} <= r.keys()
        for r in rows
    )
    assert all(-1 <= r["balance/cosine/nli~squad"] <= 1 for r in rows)
    blocks = [r for r in read_metrics(straight_dir / "metrics.jsonl") if r.get("phase/event") == "block_end"]
    assert [b["global_step"] for b in blocks] == [5]  # a block is a cycle (3 + 2 steps)
    cosines = [r["balance/cosine/nli~squad"] for r in rows[:5]]
    assert blocks[0]["phase/balance/cosine/nli~squad"] == pytest.approx(sum(cosines) / 5)
    assert blocks[0]["phase/task"] == "mixed"
    if name == "uncertainty":  # the learned log-variances move and are checkpointed
        saved = torch.load(straight_dir / "checkpoints/latest.pt", weights_only=True)
        assert saved["balancer"]["log_variances"].abs().sum() > 0
    if name == "famo":  # the task logits learn from the losses after each step and are checkpointed
        saved = torch.load(straight_dir / "checkpoints/latest.pt", weights_only=True)
        assert saved["balancer"]["updates"].item() == 8 and saved["balancer"]["logits"].abs().sum() > 0
    if name == "nash":  # the solver's last alpha and its count of calls are checkpointed
        saved = torch.load(straight_dir / "checkpoints/latest.pt", weights_only=True)
        assert saved["balancer"]["nash_calls"].item() == 8 and not torch.equal(
            saved["balancer"]["nash_alpha"], torch.ones(2, dtype=torch.float64)
        )
    cut_dir, _ = start_run(tiny_data, tmp_path / "cut", *extra, killed_after=7)
    _, resumed = run.resume(cut_dir, progress=False)
    assert deterministic_summary(resumed) == deterministic_summary(straight)
    a, b = exported_weights(straight_dir), exported_weights(cut_dir)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert without_timing(read_metrics(cut_dir / "metrics.jsonl")) == without_timing(
        read_metrics(straight_dir / "metrics.jsonl")
    )


def test_a_loss_weight_scales_a_tasks_loss_in_mixed_and_single_task_steps(tiny_data, tmp_path):
    start_run(tiny_data, tmp_path / "half", *MIXED, "squad.weight=0.5")
    start_run(tiny_data, tmp_path / "whole", *MIXED)
    rows = [r for r in read_metrics(tmp_path / "half/metrics.jsonl") if "balance/squad/weight" in r]
    assert {r["balance/squad/weight"] for r in rows} == {0.5} and {r["balance/nli/weight"] for r in rows} == {
        1.0
    }
    half, whole = exported_weights(tmp_path / "half"), exported_weights(tmp_path / "whole")
    assert any(not torch.equal(half[k], whole[k]) for k in half)
    # In its own steps too (schedule=blocks); weight=1 is the default, to the bit.
    start_run(tiny_data, tmp_path / "blocks-half", "max_steps=5", "squad.weight=0.5")
    start_run(tiny_data, tmp_path / "blocks-one", "max_steps=5", "squad.weight=1")
    start_run(tiny_data, tmp_path / "blocks", "max_steps=5")
    one, default = exported_weights(tmp_path / "blocks-one"), exported_weights(tmp_path / "blocks")
    assert all(torch.equal(one[k], default[k]) for k in one)
    half = exported_weights(tmp_path / "blocks-half")
    assert any(not torch.equal(half[k], default[k]) for k in half)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("balancer=pcgrad",), "balancer=pcgrad combines the tasks of one step: give schedule=mixed"),
        (("balancer=pcgard", "schedule=mixed"), "did you mean pcgrad"),
        (("nli.prob=0.5",), "give schedule=proportional"),
        (("schedule=proportional", "nli.prob=1"), "leaving nothing for squad"),
        (("cap=100",), r"cap=100: unknown key for schedule=blocks \(cap configures schedule=proportional or"),
        (("temperature_end=1",), "temperature_end configures schedule=temperature"),
        (("schedule=temperature", "temperature_end=1", "max_steps=none"), "give max_steps="),
    ],
)
def test_schedule_keys_given_without_their_schedule_say_so(tiny_data, tmp_path, args, message):
    from tests.conftest import args_for

    with pytest.raises(UserError, match=message):
        run.config_from_args(args_for(tiny_data, tmp_path, *args))


# ---- online task affinity ------------------------------------------------------------------


@pytest.mark.parametrize("schedule", ["blocks", "mixed"])
def test_measuring_affinity_leaves_training_bitwise_the_same(tiny_data, tmp_path, schedule):
    extra = (f"schedule={schedule}", "max_steps=8", "dropout=0.2")
    start_run(tiny_data, tmp_path / "off", *extra)
    start_run(tiny_data, tmp_path / "on", *extra, "affinity_every=2", "affinity_each=8")
    off, on = exported_weights(tmp_path / "off"), exported_weights(tmp_path / "on")
    assert all(torch.equal(off[k], on[k]) for k in off)
    rows = [json.loads(line) for line in (tmp_path / "on/affinity.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [2, 4, 6, 8] and rows[0]["tasks"] == ["nli", "squad"]
    assert all(len(r["matrix"]) == 2 and len(r["matrix"][0]) == 2 for r in rows)
    assert all(r["held"] == list(range(8)) for r in rows)
    assert all(r["unit"] == "per_lr" and r["batches"] == 8 and len(r["stderr"]) == 2 for r in rows)
    assert all(np.allclose(np.mean(r["per_batch"], axis=0), r["matrix"]) for r in rows)
    logged = [r for r in read_metrics(tmp_path / "on/metrics.jsonl") if r.get("phase/event") == "affinity"]
    assert [r["affinity/squad>nli"] for r in logged] == [r["matrix"][1][0] for r in rows]
    strip = lambda records: [r for r in without_timing(records) if r.get("phase/event") != "affinity"]  # noqa: E731
    assert strip(read_metrics(tmp_path / "on/metrics.jsonl")) == strip(
        read_metrics(tmp_path / "off/metrics.jsonl")
    )
    if schedule == "mixed":  # 2 (the default) and 3 of the 8 in turn, each value the one all 8 gave
        for keys, held in (
            ((), [[0, 1], [2, 3], [4, 5], [6, 7]]),
            (("affinity_each=3",), [[0, 1, 2], [3, 4, 5], [6, 7, 0], [1, 2, 3]]),
        ):
            folder = tmp_path / f"each{len(held[0])}"
            start_run(tiny_data, folder, *extra, "affinity_every=2", *keys)
            taken = [json.loads(line) for line in (folder / "affinity.jsonl").read_text().splitlines()]
            assert [r["held"] for r in taken] == held
            for row, every in zip(taken, rows, strict=True):
                assert row["per_batch"] == [every["per_batch"][number] for number in row["held"]]


def affinity_of(tiny_data, tmp_path, *keys: str, tasks=("nli", "squad"), precision="float64"):
    """A fresh run's trainer (nothing trained) and its affinity measurement over `tasks`."""
    from mtl.train.callbacks.affinity import Affinity
    from mtl.train.loop.trainer import Trainer
    from tests.conftest import args_for

    config = run.config_from_args(
        args_for(tiny_data, tmp_path / "run", "max_steps=1", "precision=fp32", *keys)
    )
    trainer = Trainer(config, tmp_path / "run", progress=False)
    return trainer, Affinity(
        trainer.run.data, trainer.run.setup, list(tasks), 0, trainer.run.device, 3, 5.0, precision=precision
    )


@pytest.mark.parametrize("optim", ["sgd", "adam"])
def test_a_step_on_a_task_lowers_its_own_held_loss(tiny_data, tmp_path, optim):
    """Z(i -> i) > 0 for a small lr: the optimizer's step on a batch lowers the loss on that
    batch; measuring touches no weight, gradient or optimizer state, and repeats to the bit."""
    trainer, affinity = affinity_of(tiny_data, tmp_path, f"optim={optim}", "lr=1e-3")
    before = {k: v.clone() for k, v in trainer.run.model.state_dict().items()}
    optimizer_state = str(trainer.run.setup.optimizers["nli"].state_dict())
    measured = affinity.measure()
    assert measured.per_batch.shape == (3, 2, 2) and (measured.per_batch[:, [0, 1], [0, 1]] > 0).all()
    assert all(torch.equal(before[k], v) for k, v in trainer.run.model.state_dict().items())
    assert all(p.grad is None for p in trainer.run.model.parameters())
    assert str(trainer.run.setup.optimizers["nli"].state_dict()) == optimizer_state
    assert np.array_equal(measured.per_batch, affinity.measure().per_batch)  # fixed held batches
    # a batch's values are the same whichever others are measured with it (affinity_each=)
    assert np.array_equal(affinity.measure([2, 0]).per_batch, measured.per_batch[[2, 0]])


def test_aiolis_evidence_is_each_losss_drop_in_its_own_units(tiny_data, tmp_path):
    """Measurement.lowered, L before - L after (Aioli's previous_loss - new_loss), made from the
    relative change per lr: under SGD it grows with the lr (ten times the lr, ten times the drop,
    to first order), the loss before is the task's own on its held batch, and a step lowers its
    own task's loss."""
    from mtl.train.run.setup import TaskNetwork

    drops = []
    for lr in (1e-4, 1e-3):
        trainer, affinity = affinity_of(tiny_data, tmp_path / f"{lr}", "optim=sgd", f"lr={lr}")
        measured = affinity.measure()
        assert measured.base is not None and measured.lrs is not None
        assert measured.base.shape == (3, 2) and np.allclose(measured.lrs, lr)
        for number, held in enumerate(zip(affinity.held["nli"], affinity.held["squad"], strict=True)):
            for column, (task, examples) in enumerate(zip(("nli", "squad"), held, strict=True)):
                with torch.no_grad():  # the task's loss on its held batch, plainly (no dropout here)
                    outputs = TaskNetwork(trainer.run.model, task)(
                        trainer.run.data.table.batch_columns(examples.sentences, trainer.run.device)
                    )
                    loss = trainer.run.data.tasks[task].losses(outputs, torch.from_numpy(examples.labels))
                assert measured.base[number, column] == pytest.approx(float(loss.mean()), rel=1e-5)
        assert (measured.lowered.diagonal() > 0).all()
        drops.append(measured.lowered)
    np.testing.assert_allclose(drops[1], 10 * drops[0], rtol=0.05)


def test_the_lookahead_takes_adams_own_step_with_its_state():
    """optimizer_step runs the optimizer's update rule on float64 copies: Adam's second step (its
    moments from the first) equals what torch's Adam does to the parameters themselves."""
    from mtl.train.callbacks.affinity import optimizer_step

    torch.manual_seed(0)
    weight = torch.nn.Parameter(torch.randn(4, 3))
    adam = torch.optim.Adam([weight], lr=0.01, betas=(0.8, 0.9))
    weight.grad = torch.randn(4, 3)
    adam.step()  # the state the lookahead must use
    gradient = torch.randn(4, 3)
    stepped, lr = optimizer_step(
        adam, {"w": weight}, {"w": weight.detach().double()}, {"w": gradient.double()}
    )
    weight.grad = gradient
    adam.step()
    assert lr == 0.01 and stepped["w"].dtype == torch.float64
    torch.testing.assert_close(stepped["w"].float(), weight.detach(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize(("optim", "lrs"), [("sgd", (1e-5, 1e-3, 1e-1)), ("adam", (1e-5, 1e-4, 1e-3))])
def test_affinity_per_lr_is_flat_across_learning_rates(tiny_data, tmp_path, optim, lrs, precision):
    """Divided by the lr (TAG's code) and in float64, the same state measured at lrs four orders
    apart gives the same affinity: with float32 losses a 1e-5 step changed nothing measurable.
    (Adam's step at lr 0.1, one tenth on every weight of this tiny model, leaves the linear regime.)"""
    means = []
    for lr in lrs:
        _, affinity = affinity_of(
            tiny_data, tmp_path / f"{lr}", f"optim={optim}", f"lr={lr}", precision=precision
        )
        means.append(affinity.measure().mean)
    for mean in means[1:]:
        np.testing.assert_allclose(mean, means[0], rtol=0.1, atol=0.05 * np.abs(means[0]).max())


def test_a_label_shuffled_copy_of_a_task_is_inside_the_noise_floor(tiny_data, tmp_path):
    """`noise`: SNLI with its training labels shuffled. Its affinity with nli, both ways, is
    inside the held batches' interval (shown ~0), while each task's step plainly helps itself."""
    from mtl.analysis.multitask import summarize

    from .conftest import FIXTURES

    noise = tmp_path / "noise.toml"
    noise.write_text(
        f'kind = "nli"\nsource = "{FIXTURES / "snli_tiny"}"\nshuffle_labels = true\nbatch = 8\nsteps = 3\n'
    )
    _, affinity = affinity_of(
        tiny_data,
        tmp_path,
        "optim=adam",
        "lr=1e-3",
        f"tasks=nli,squad,{noise}",
        tasks=("nli", "squad", "noise"),
    )
    measured = affinity.measure()
    row = {"tasks": ["nli", "squad", "noise"], "matrix": measured.mean.tolist(), "stderr": measured.stderr.tolist(),
           "batches": len(measured.per_batch), "per_batch": measured.per_batch.tolist(), "unit": "per_lr"}  # fmt: skip
    summary = summarize([row])
    assert summary.floor == "batches" and summary.units == 3  # affinity_of's held batches
    within = summary.within_noise()
    assert within[2, 0] and within[0, 2]  # noise -> nli and nli -> noise: ~0
    assert not within.diagonal().any() and (summary.mean.diagonal() > 0).all()


def test_a_resumed_run_measures_again_what_the_kill_lost(tiny_data, tmp_path):
    extra = ("max_steps=10", "checkpoint_every=3", "affinity_every=2")
    start_run(tiny_data, tmp_path / "straight", *extra)
    cut_dir, _ = start_run(tiny_data, tmp_path / "cut", *extra, killed_after=8)
    run.resume(cut_dir, progress=False)

    def measured(folder):  # every value, but how long each measurement took (the machine's, not the run's)
        rows = [json.loads(line) for line in (folder / "affinity.jsonl").read_text().splitlines()]
        return [{k: v for k, v in row.items() if k not in ("seconds", "estimator_seconds")} for row in rows]

    assert measured(cut_dir) == measured(tmp_path / "straight")
    assert all(
        row["seconds"] > 0 for row in map(json.loads, (cut_dir / "affinity.jsonl").read_text().splitlines())
    )


def test_the_reading_names_the_pair_that_helps_most():
    from mtl.analysis.multitask import reading

    mean = np.array([[0.05, -0.004], [0.012, 0.03]])
    assert reading(["nli", "squad"], mean) == "squad helps nli: +0.012 mean; nli hurts squad: -0.004 mean"


def test_the_report_draws_a_mixed_runs_affinity_and_balancer(tiny_data, tmp_path):
    from mtl.cli import main
    from tests.test_report import Page

    start_run(tiny_data, tmp_path / "run", *MIXED, "balancer=gradnorm", "affinity_every=2")
    assert main(["report", str(tmp_path / "run"), f"out={tmp_path / 'report.html'}"]) == 0
    page = Page()
    page.feed((tmp_path / "report.html").read_text(encoding="utf-8"))
    titles = [image["alt"] for image in page.images]
    affinity = next(t for t in titles if t.startswith("Task affinity of run"))
    assert (
        " mean" in affinity and ("helps" in affinity or "hurts" in affinity)
    ) or "noise floor (~0)" in affinity
    text = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "Task affinity of run: mean of" in text and "95% t interval" in text and " ± " in text
    assert "Balancer of run (schedule=mixed, balancer=gradnorm)" in titles


def test_tag_groups_tasks_that_help_each_other_and_old_logs_still_read():
    """Two pairs that help within and hurt across: TAG's best two groups are the pairs; an entry
    inside the noise floor counts as 0; a log from before the floor (no stderr) still summarizes."""
    from mtl.analysis.multitask import affinity_table, groupings, summarize

    tasks = ["a", "b", "c", "d"]
    mean = np.array(
        [[0.5, 0.3, -0.2, -0.2], [0.3, 0.5, -0.2, -0.2], [-0.2, -0.2, 0.5, 0.4], [-0.2, -0.2, 0.4, 0.5]]
    )
    row = {"tasks": tasks, "matrix": mean.tolist(), "stderr": np.full((4, 4), 0.01).tolist(), "batches": 3, "unit": "per_lr"}  # fmt: skip
    found = {k: (groups, score) for k, groups, score in groupings(summarize([row]))}
    assert sorted(map(sorted, found[2][0])) == [["a", "b"], ["c", "d"]]
    assert found[2][1] == pytest.approx(0.3 + 0.3 + 0.4 + 0.4) and set(found) == {1, 2, 3, 4}
    noisy = {**row, "stderr": np.full((4, 4), 0.2).tolist()}  # 0.3 and 0.4 within +-4.3 x 0.2 (a bound)
    assert summarize([noisy]).within_noise()[0, 1] and not summarize([row]).within_noise()[0, 1]
    old = {"step": 2, "block": 0, "task": "a", "tasks": tasks, "matrix": mean.tolist()}
    assert summarize([old]).half_width is None and not summarize([old]).within_noise().any()
    assert "no noise floor" in "".join(affinity_table("run", [old]))


def test_the_floor_counts_held_batches_not_measurements():
    """The held batches are reused at every measurement: ten measurements that repeat one value
    (unchanged weights) give the floor of one, where pooling them as independent shrank it by
    sqrt(10). A log without the batches' values gets the mean spread: an upper bound, said so."""
    from mtl.analysis.multitask import affinity_table, summarize

    rng = np.random.default_rng(0)
    per_batch = rng.normal(0.0, 0.1, size=(8, 2, 2))
    row = {"tasks": ["a", "b"], "matrix": per_batch.mean(axis=0).tolist(), "per_batch": per_batch.tolist(),
           "stderr": (per_batch.std(axis=0, ddof=1) / np.sqrt(8)).tolist(), "batches": 8, "unit": "per_lr"}  # fmt: skip
    once, ten = summarize([row]), summarize([row] * 10)
    np.testing.assert_allclose(ten.half_width, once.half_width)
    expected = 2.3646 * per_batch.std(axis=0, ddof=1) / np.sqrt(8)  # t(0.975, 7)
    np.testing.assert_allclose(once.half_width, expected, rtol=1e-4)
    old = {k: v for k, v in row.items() if k != "per_batch"}
    bound = summarize([old] * 10)
    assert bound.floor == "bound" and np.allclose(bound.half_width, once.half_width)
    assert "an upper bound" in (text := "".join(affinity_table("run", [old, old])))
    assert "predates the batches" in text


def in_turn_line(values: np.ndarray, held: list[int]) -> dict:
    """An affinity.jsonl line of one task measured on the held batches `held` (values: (k,))."""
    per_batch = np.asarray(values, dtype=float).reshape(-1, 1, 1)
    return {"tasks": ["a"], "matrix": per_batch.mean(axis=0).tolist(), "per_batch": per_batch.tolist(),
            "batches": len(held), "held": held, "unit": "per_lr"}  # fmt: skip


def test_held_batches_taken_in_turn_are_a_connected_design():
    """affinity_each=k: k of the 8 held batches in turn; where k divides 8 each cycle starts one
    further on, so batches meet different others and their offsets can be compared."""
    from mtl.train.callbacks.affinity import held_in_turn

    assert [held_in_turn(m, 1, 8) for m in (1, 2, 8, 9)] == [[0], [1], [7], [0]]
    assert [held_in_turn(m, 3, 8) for m in (1, 2, 3)] == [[0, 1, 2], [3, 4, 5], [6, 7, 0]]
    assert [held_in_turn(m, 2, 8) for m in range(1, 10)] == [
        [0, 1], [2, 3], [4, 5], [6, 7], [1, 2], [3, 4], [5, 6], [7, 0], [2, 3],
    ]  # fmt: skip
    assert held_in_turn(5, 8, 8) == held_in_turn(1, 9, 8) == list(range(8))
    for each in (1, 2, 4):  # a cycle takes every batch once
        assert sorted(b for m in range(9, 9 + 8 // each) for b in held_in_turn(m, each, 8)) == list(range(8))


def test_the_floor_of_batches_in_turn_ignores_how_the_affinity_moves_over_training():
    """The affinity moves over training (a value common to every batch at a measurement): the
    run's mean averages it, so it is not noise. Taking 2 of 8 batches in turn, the floor compares
    batches within a measurement and is the same with or without the movement; taking 1, the
    batch means carry the movement and the floor is an upper bound, said so. Every batch at every
    measurement: the t interval of the batch means, as the two-way model gives it."""
    from mtl.analysis.held_batches import batch_floor
    from mtl.analysis.multitask import affinity_table, summarize
    from mtl.train.callbacks.affinity import held_in_turn

    rng = np.random.default_rng(0)
    offsets, cells = rng.normal(0, 1.0, 8), rng.normal(0, 0.5, (32, 8))
    movement = np.linspace(0.0, 40.0, 32)  # the affinity growing over training

    def lines(each: int, moving: bool) -> list[dict]:
        taken = [held_in_turn(m, each, 8) for m in range(1, 33)]
        values = offsets + cells + (movement[:, None] if moving else 0)
        return [in_turn_line(values[m, held], held) for m, held in enumerate(taken)]

    still, moving = summarize(lines(2, False)), summarize(lines(2, True))
    assert still.floor == moving.floor == "design" and still.units == 8
    np.testing.assert_allclose(moving.half_width, still.half_width)
    np.testing.assert_allclose(moving.mean - still.mean, movement.mean())
    one_still, one_moving = summarize(lines(1, False)), summarize(lines(1, True))
    assert one_still.floor == one_moving.floor == "bound"
    assert one_moving.half_width[0, 0] > 2 * one_still.half_width[0, 0]
    assert "one per measurement, affinity_each=1" in "".join(affinity_table("run", lines(1, True)))
    assert summarize(lines(2, True)[:4]).floor == "bound"  # a cycle's 4 measurements meet no batch twice
    assert "Satterthwaite" in "".join(affinity_table("run", lines(2, True)))
    every = lines(8, True)
    assert summarize(every).floor == "batches"
    from mtl.analysis.held_batches import _in_turn, held_values

    measured = held_values(every)
    assert measured is not None
    design = _in_turn(measured, list(range(8)))
    textbook = batch_floor(every)
    assert design is not None and textbook is not None
    np.testing.assert_allclose(design.half_width, textbook.half_width)


def test_the_floor_of_two_batches_in_turn_covers_95_percent():
    """Simulated from one real cpu-small run's variances (16 measurements x 8 batches: the
    affinity's movement over training, each batch's offset and the residual, RESULTS): the
    interval of 2 of 8 batches in turn holds the run's true mean about 95% of the time."""
    from tools.floor_coverage import coverage

    movement = np.array([37.0, 12.0, -30.0, -15.0, 3.0, 8.0, 10.0, -9.0, 2.0, 5.0, -11.0, 9.0])
    share, _, kind = coverage(movement, offset=49.0, noise=49.0, each=2, times=16, sims=400, seed=0)
    assert kind == "design" and 0.92 <= share <= 0.99


def test_a_batch_in_turn_is_the_same_line_whatever_else_is_measured():
    from mtl.analysis.multitask import summarize
    from mtl.formats.run_files import AffinityRow

    line = in_turn_line(np.array([0.1, 0.2]), [3, 5])
    assert summarize([in_turn_line(np.array([0.3]), [3])] * 4).half_width is None  # one batch: no floor
    AffinityRow.model_validate({"step": 2, **line})
    for held in ([3], [3, 3]):  # one name per matrix of per_batch, each once
        with pytest.raises(ValueError, match="held names each batch of per_batch once"):
            AffinityRow.model_validate({"step": 2, **line, "held": held})


@pytest.mark.parametrize(
    "keys, each",
    [
        (("affinity_every=100",), 2),  # 2 of them in turn, unless told
        (("affinity_every=100", "affinity_each=8"), 8),
        (("affinity_every=100", "affinity_each=20"), 8),
    ],
)
def test_a_run_measures_two_held_batches_in_turn_unless_told(keys, each):
    from mtl.train.callbacks.affinity import held_each
    from mtl.train.config.command_line import config_from_args

    assert held_each(config_from_args(list(keys))) == each


def test_tag_selection_serves_each_task_by_its_best_group_and_lets_groups_overlap():
    """TAG's own selection: a task alone scores its lookahead on itself, so a cross-affinity
    below a task's own is no reason to group it (the issue's 3-task run: all singletons, where
    scoring a task alone as 0 grouped nli with sick); and a helper task may serve two groups."""
    from mtl.analysis.multitask import AffinityMean, groupings, tag_selection

    tasks = ["nli", "sick", "sickshuf"]
    mean = np.array([[0.10, 0.15, 0.01], [0.05, 0.92, 0.01], [0.01, 0.01, 0.81]])
    summary = AffinityMean(tasks, mean, np.full((3, 3), 0.001), True)
    chosen, served, total = tag_selection(summary, 3)
    assert sorted(chosen) == [["nli"], ["sick"], ["sickshuf"]] and total == pytest.approx(1.83)
    assert served == {"nli": ["nli"], "sick": ["sick"], "sickshuf": ["sickshuf"]}
    assert dict((k, g) for k, g, _ in groupings(summary))[3] == [["nli"], ["sick"], ["sickshuf"]]
    helper = np.array([[0.1, 0.1, -0.3], [0.5, 0.2, 0.5], [-0.3, 0.1, 0.1]])  # b helps a and c
    summary = AffinityMean(["a", "b", "c"], helper, np.full((3, 3), 0.001), True)
    chosen, served, total = tag_selection(summary, 2)
    assert sorted(chosen) == [["a", "b"], ["b", "c"]] and total == pytest.approx(1.1)
    assert served["a"] == ["a", "b"] and served["c"] == ["b", "c"]
    best_partition = max(score for k, _, score in groupings(summary) if k == 2)
    assert best_partition == pytest.approx(0.7)  # without overlap b serves one side only


def test_a_plugin_schedule_that_trains_every_task_each_step_takes_the_mixed_step(
    tiny_data, tmp_path, monkeypatch
):
    # "mixed" was decided by the schedule's name: a plugin's schedule of that kind was refused a
    # balancer and trained one task a step
    from mtl.train.data import scheduler

    monkeypatch.setattr(scheduler, "EVERY_TASK_EACH_STEP", set())
    monkeypatch.setitem(scheduler.SCHEDULES, "together", lambda s, step: s.tasks[0])
    with pytest.raises(UserError, match="balancer=pcgrad combines the tasks of one step"):
        start_run(tiny_data, tmp_path / "refused", "schedule=together", "balancer=pcgrad")
    scheduler.register_schedule("together", every_task_each_step=True)(scheduler.SCHEDULES["together"])
    _, summary = start_run(tiny_data, tmp_path / "run", "schedule=together", "balancer=pcgrad", "max_steps=4")
    assert summary["steps/nli"] == summary["steps/squad"] == summary["global_step"] == 4


def test_the_mixed_step_over_the_gradient_buffer_trains_as_it_does_parameter_by_parameter(
    tiny_data, tmp_path, monkeypatch
):
    """The mixed step keeps each task's encoder gradient, the balancer's combination and the
    heads' scales as ranges of the buffer; with no range (every rewrite per parameter, clipping
    by clip_grad_norm_) the run ends with the same weights (to float32's rounding of the norm)."""
    extra = (*MIXED, "balancer=gradnorm", "precision=fp32")
    start_run(tiny_data, tmp_path / "buffer", *extra)
    monkeypatch.setattr(GradientBuffer, "region", lambda self, parameters: None)
    start_run(tiny_data, tmp_path / "per-parameter", *extra)
    buffered, per_parameter = (
        exported_weights(tmp_path / "buffer"),
        exported_weights(tmp_path / "per-parameter"),
    )
    assert buffered.keys() == per_parameter.keys()
    for key in buffered:
        torch.testing.assert_close(buffered[key], per_parameter[key], rtol=1e-5, atol=1e-6, msg=key)


def test_pcgrad_through_torchjd_equals_the_papers_projections():
    """balancer=pcgrad is TorchJD's PCGrad: on the same gradients and the same orders, the
    paper's Algorithm 1 as mtl wrote it by hand before (two tasks: one order; three: TorchJD's
    orders replayed), to float precision; its draws leave torch's generator where it was."""
    torch.manual_seed(0)
    for count in (2, 3):
        gradients = torch.randn(count, 50, dtype=torch.float64)
        gradients[1] = -gradients[0] + 0.3 * gradients[1]  # a conflict
        pc = BALANCERS["pcgrad"]([str(i) for i in range(count)], [1.0] * count, seed=5)
        before = torch.random.get_rng_state()
        combined = pc.combine(gradients, torch.ones(count), step=3)
        assert torch.equal(torch.random.get_rng_state(), before)
        # the orders TorchJD drew: replayed from the same seed
        seed = int(np.random.SeedSequence([5, 3]).generate_state(1)[0])
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            orders = [torch.randperm(count).tolist() for _ in range(count)]
        projected = gradients.clone()
        for i in range(count):
            for j in orders[i]:
                if j != i and projected[i] @ gradients[j] < 0:
                    projected[i] = (
                        projected[i]
                        - (projected[i] @ gradients[j]) / (gradients[j] @ gradients[j]) * gradients[j]
                    )
        assert torch.allclose(combined.shared, projected.sum(dim=0), atol=1e-10, rtol=0)


def test_float32_measures_what_float64_does_and_hands_it_steps_too_small_to_resolve(
    tiny_data, tmp_path, monkeypatch
):
    """affinity_precision=float32 (the default): the tiny model's steps change its losses by far
    less than float32 resolves (1e-3 of a loss), so every held batch is measured again in float64
    and the values are float64's to the bit; told to keep float32 anyway, they are float64's to
    float32's rounding, and a stepped task's loss before its step is its gradient's own forward."""
    from mtl.train.callbacks import affinity as affinity_module

    _, precise = affinity_of(tiny_data, tmp_path / "64", "optim=sgd", "lr=0.1")
    _, coarse = affinity_of(tiny_data, tmp_path / "32", "optim=sgd", "lr=0.1", precision="float32")
    exact, handed = precise.measure(), coarse.measure()
    assert exact.precisions == ["float64"] * 3 and handed.precisions == ["float64"] * 3
    assert np.array_equal(exact.per_batch, handed.per_batch)
    monkeypatch.setattr(affinity_module, "COARSEST_DROP", 0.0)
    kept = coarse.measure()
    assert kept.precisions == ["float32"] * 3
    changes = np.abs(exact.per_batch).max() * 0.1
    np.testing.assert_allclose(kept.per_batch, exact.per_batch, atol=1e-6 / 0.1 + 1e-3 * changes / 0.1)
    np.testing.assert_allclose(kept.base, exact.base, rtol=1e-5)
