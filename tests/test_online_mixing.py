"""Online mixing (schedule=aioli|doremi|transfer): the update rules equal their authors' code,
every decision is logged and checkpointed, a killed run resumes to the same bits, and aioli's law
answers to the losses mix_target= names. (Whether a planted noise task is starved is measured at
CPU scale by `just compare-mixing`, RESULTS.md: a tiny run's shares say nothing about it.)"""

import numpy as np
import pytest
import torch

from mtl import cli
from mtl.errors import UserError
from mtl.runs import read_metrics
from mtl.train.callbacks.online_mixing import aioli_update, doremi_update
from mtl.train.loop import run
from tests.conftest import FIXTURES, args_for, start_run, straight_and_resumed
from tests.test_training import deterministic_summary, exported_weights, without_timing

# a watching task for schedule=transfer: STS scored by the cosine, never trained
WATCHING = ("tasks=nli,squad,sts", f"sts.source={FIXTURES / 'sts_tiny'}", "sts.train=false")
ONLINE = ("max_steps=10", "checkpoint_every=3", "mix_every=2", "dropout=0.2")


def test_the_aioli_update_is_the_authors_normalize_then_exponentiate():
    rng = np.random.default_rng(0)
    law = rng.normal(size=(3, 3))  # rows: the losses, columns: the task trained
    weights = np.array([0.2, 0.5, 0.3])
    # HazyResearch/aioli trainer/aioli_trainer.py, with aioli_normalize_A and no EMA, as written there
    graph = law.copy()
    min_entry = graph.min()
    if min_entry < 0:
        graph -= min_entry
    graph /= graph.sum()
    expected = np.multiply(weights, np.exp(0.2 * graph.sum(axis=0)))
    shares, log_weights = aioli_update(np.log(weights), law, 0.2)
    np.testing.assert_allclose(shares, expected / expected.sum(), rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.exp(log_weights), expected, rtol=1e-14)


def test_the_doremi_update_is_the_authors_excess_step():
    weights = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    excess = torch.tensor([0.4, 0.0, 1.3], dtype=torch.float64)  # clipped at 0 already
    # sangmichaelxie/doremi doremi/trainer.py update_domain_weights, as written there
    log_new = torch.log(weights) + 1.0 * excess
    log_new = log_new - torch.logsumexp(log_new, dim=0)
    expected = (1 - 1e-3) * torch.exp(log_new) + 1e-3 / len(log_new)
    shares, log_shares = doremi_update(weights.numpy(), excess.numpy(), 1.0, 1e-3)
    np.testing.assert_allclose(shares, expected.numpy(), rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.exp(log_shares), shares, rtol=1e-14)


def reference_run(tiny_data, tmp_path, *extra):
    """A finished proportional run of the same tasks: schedule=doremi's reference."""
    folder = tmp_path / "reference"
    start_run(tiny_data, folder, "schedule=proportional", "max_steps=6", *extra)
    return folder


@pytest.mark.parametrize("kind", ["aioli", "doremi", "transfer"])
def test_an_online_schedule_logs_each_update_and_resumes_to_the_same_bits(tiny_data, tmp_path, kind):
    extra = [f"schedule={kind}", *ONLINE]
    if kind == "doremi":
        extra.append(f"mix_reference={reference_run(tiny_data, tmp_path)}")
    if kind == "transfer":
        extra += WATCHING
    straight_dir, straight, resumed = straight_and_resumed(tiny_data, tmp_path, *extra)  # killed after step 7
    updates = [r for r in read_metrics(straight_dir / "metrics.jsonl") if r.get("phase/event") == "mixing"]
    assert [r["global_step"] for r in updates] == [0, 2, 4, 6, 8, 10]
    shares = np.array([[r["mixing/share/nli"], r["mixing/share/squad"]] for r in updates])
    np.testing.assert_allclose(shares.sum(axis=1), 1, atol=1e-12)
    assert (shares[0] == 0.5).all() and not np.allclose(shares[1:], 0.5)  # equal at first, then moved
    assert all(r["mixing/evidence/nli"] is not None for r in updates[1:])
    assert straight["mixing_shares"] == pytest.approx(dict(zip(["nli", "squad"], shares[-1], strict=True)))
    saved = torch.load(straight_dir / "checkpoints/latest.pt", weights_only=True)
    assert saved["schedule"]["shares"] == pytest.approx(list(shares[-1]), abs=0)
    if kind == "aioli":  # just report draws the shares over the run
        assert cli.main(["report", str(straight_dir), f"out={tmp_path / 'report.html'}"]) == 0
        assert "Online mixing of straight (schedule=aioli): the shares over the run" in (
            tmp_path / "report.html"
        ).read_text(encoding="utf-8")
    cut_dir = tmp_path / "cut"
    assert deterministic_summary(resumed) == deterministic_summary(straight)

    a, b = exported_weights(straight_dir), exported_weights(cut_dir)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert without_timing(read_metrics(cut_dir / "metrics.jsonl")) == without_timing(
        read_metrics(straight_dir / "metrics.jsonl")
    )


def test_the_online_keys_say_which_schedule_they_belong_to(tiny_data, tmp_path):
    def refused(*keys):
        with pytest.raises(UserError) as error:
            run.config_from_args(args_for(tiny_data, tmp_path, *keys))
        return str(error.value)

    assert "mix_every configures schedule=aioli or schedule=doremi or schedule=transfer" in refused(
        "mix_every=5"
    )
    said = refused("schedule=aioli", "mix_reference=runs/x")
    assert (
        said.startswith("mix_reference=runs/x: unknown key for schedule=aioli") and "schedule=doremi" in said
    )
    assert "schedule=aioli or schedule=transfer" in refused("schedule=doremi", "mix_normalize=abs")
    # given at its default, a key of another schedule is still refused: it was meant to do something
    assert "unknown key for schedule=proportional" in refused("schedule=proportional", "mix_batches=2")
    assert "mix_reference=<run folder>" in refused("schedule=doremi")
    error = start_error(tiny_data, tmp_path, "schedule=doremi", f"mix_reference={tmp_path / 'nothing'}")
    assert "no " in error and "best checkpoint" in error
    assert "add a watching task" in start_error(tiny_data, tmp_path, "schedule=transfer")


def test_aioli_lowers_the_losses_mix_target_names(tiny_data, tmp_path):
    """mix_target= keeps the law's rows of the tasks named: the mixture answers to their losses
    alone; a name that is not a training task is one line."""
    folder, _ = start_run(tiny_data, tmp_path / "judged", "schedule=aioli", "mix_target=nli", *ONLINE)
    updates = [r for r in read_metrics(folder / "metrics.jsonl") if r.get("phase/event") == "mixing"]
    laws = {key for r in updates[1:] for key in r if key.startswith("mixing/law/")}
    assert laws == {"mixing/law/nli>nli", "mixing/law/squad>nli"}
    error = start_error(tiny_data, tmp_path, "schedule=aioli", "mix_target=nli,sts")
    assert error.startswith("mix_target=nli,sts: sts is not a training task of this run (nli, squad)")


def start_error(tiny_data, tmp_path, *keys) -> str:
    with pytest.raises(UserError) as error:
        start_run(tiny_data, tmp_path / "refused", *keys)
    return str(error.value)
