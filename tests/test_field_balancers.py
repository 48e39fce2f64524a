"""The balancers from the field, each against its reference on synthetic losses and gradients:
FAMO against the authors' own class, UPGrad, Aligned-MTL and Nash-MTL against TorchJD's
aggregators (the whole runs, with exact resume after a kill, are tests/test_mixed.py's)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torchjd.aggregation import AlignedMTL, NashMTL, UPGrad

from mtl.errors import UserError
from mtl.train.optim.balancers import BALANCERS, AlignedOptions, FAMOOptions, NashOptions


class AuthorsFAMO:
    """FAMO as its authors released it (github.com/Cranial-XIX/FAMO, famo.py; LibMTL's FAMO is the
    same arithmetic): the weighted loss, and the logits' update from the losses after the step."""

    def __init__(self, n_tasks, gamma=0.01, w_lr=0.025):
        self.min_losses = torch.zeros(n_tasks)
        self.w = torch.tensor([0.0] * n_tasks, requires_grad=True)
        self.w_opt = torch.optim.Adam([self.w], lr=w_lr, weight_decay=gamma)

    def get_weighted_loss(self, losses):
        self.prev_loss = losses
        z = F.softmax(self.w, -1)
        D = losses - self.min_losses + 1e-8
        c = (z / D).sum().detach()
        return (D.log() * z / c).sum()

    def update(self, curr_loss):
        delta = (self.prev_loss - self.min_losses + 1e-8).log() - (curr_loss - self.min_losses + 1e-8).log()
        with torch.enable_grad():
            d = torch.autograd.grad(F.softmax(self.w, -1), self.w, grad_outputs=delta.detach())[0]
        self.w_opt.zero_grad()
        self.w.grad = d
        self.w_opt.step()


@pytest.mark.parametrize(("w_lr", "gamma"), [(0.025, 0.01), (0.1, 0.001)])
def test_famo_weighs_and_learns_as_the_authors_code_does(w_lr, gamma):
    tasks = ["a", "b", "c"]
    ours = BALANCERS["famo"](tasks, [1.0] * 3, options=FAMOOptions(famo_w_lr=w_lr, famo_gamma=gamma))
    authors = AuthorsFAMO(3, gamma=gamma, w_lr=w_lr)
    generator = torch.Generator().manual_seed(0)
    losses = torch.tensor([2.0, 0.7, 1.1])
    # Each row of the identity as a task's gradient: the combined update is the weights themselves.
    gradients = torch.eye(3)
    for step in range(60):
        # task a's loss falls fastest, c's barely: FAMO moves weight towards c
        after = losses * torch.tensor([0.97, 0.99, 0.999]) * (1 + 0.002 * torch.randn(3, generator=generator))
        before = losses.clone().requires_grad_()
        weights = torch.autograd.grad(authors.get_weighted_loss(before), before)[0]
        combined = ours.combine(gradients, losses, step)
        assert torch.allclose(combined.shared, weights, atol=1e-6, rtol=0)
        assert torch.allclose(combined.head_scales, weights, atol=1e-6, rtol=0)
        authors.update(after)
        ours.observe(after)
        assert torch.allclose(ours.logits, authors.w.detach(), atol=1e-6, rtol=0), step
        losses = after
    shares = torch.softmax(ours.logits, 0)
    assert shares[2] > shares[1] > shares[0]  # the slowest task gained the most
    assert combined.shared.sum().item() == pytest.approx(1.0, abs=1e-6)


def test_famo_keeps_its_logits_and_adam_moments_in_its_state_dict():
    famo = BALANCERS["famo"](["a", "b"], [1.0, 1.0])
    famo.combine(torch.eye(2), torch.tensor([1.0, 2.0]), 0)
    famo.observe(torch.tensor([0.9, 1.99]))
    saved = famo.state_dict()
    assert {"logits", "first_moment", "second_moment", "updates", "losses_before"} <= saved.keys()
    again = BALANCERS["famo"](["a", "b"], [1.0, 1.0])
    again.load_state_dict(saved)
    for balancer in (famo, again):
        balancer.combine(torch.eye(2), torch.tensor([0.9, 1.99]), 1)
        balancer.observe(torch.tensor([0.8, 1.98]))
    assert torch.equal(famo.logits, again.logits) and famo.updates.item() == again.updates.item() == 2


def conflicting_gradients(seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    gradients = torch.randn(3, 200, generator=generator)
    gradients[1] = -0.8 * gradients[0] + 0.3 * gradients[1]  # tasks 0 and 1 pull apart
    return gradients


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_upgrad_is_torchjds_aggregation_and_increases_no_tasks_loss(seed):
    gradients = conflicting_gradients(seed)
    combined = BALANCERS["upgrad"](["a", "b", "c"], [1.0] * 3).combine(gradients, torch.ones(3), 0)
    assert torch.allclose(combined.shared, UPGrad()(gradients), atol=1e-6, rtol=0)
    assert torch.equal(combined.head_scales, torch.ones(3))  # heads keep their own gradients (mtl_backward)
    # projected onto the dual cone: no task's gradient points against the update
    assert (gradients @ combined.shared).min() > -1e-4
    assert (gradients[0] @ gradients.sum(0)) * (gradients[1] @ gradients.sum(0)) < 0  # the sum is not so


@pytest.mark.parametrize("scale", ["min", "median", "rmse"])
def test_aligned_mtl_is_torchjds_aggregation(scale):
    gradients = conflicting_gradients(3)
    combined = BALANCERS["aligned"](
        ["a", "b", "c"], [1.0] * 3, options=AlignedOptions(aligned_scale=scale)
    ).combine(gradients, torch.ones(3), 0)
    assert torch.allclose(combined.shared, AlignedMTL(scale_mode=scale)(gradients), atol=1e-6, rtol=0)


@pytest.mark.parametrize("every", [1, 2])
def test_nash_mtl_is_torchjds_over_a_run_and_continues_exactly_from_its_saved_state(every):
    options = NashOptions(nash_update_every=every)
    ours = BALANCERS["nash"](["a", "b", "c"], [1.0] * 3, options=options)
    theirs = NashMTL(n_tasks=3, max_norm=1.0, update_weights_every=every, optim_niter=20)
    decided = []
    for step in range(6):  # the state (the last alpha, the count) carries from step to step
        gradients = conflicting_gradients(10 + step)
        combined = ours.combine(gradients, torch.ones(3), step)
        assert torch.allclose(combined.shared, theirs(gradients), atol=1e-6, rtol=0)
        # the authors backpropagate sum_i alpha_i loss_i: each head's gradient times its alpha as solved
        alpha = torch.from_numpy(np.asarray(theirs.weighting.prvs_alpha, dtype=np.float64)).float()
        assert torch.allclose(combined.head_scales, alpha, atol=1e-6, rtol=0)
        assert not torch.allclose(combined.head_scales, torch.ones(3))
        decided.append(combined.shared)
    assert ours.state_dict()["nash_calls"].item() == 6
    # A balancer built afresh (a resumed run) from the state after step 3 decides steps 4-6 alike
    replay = BALANCERS["nash"](["a", "b", "c"], [1.0] * 3, options=options)
    for step in range(3):
        replay.combine(conflicting_gradients(10 + step), torch.ones(3), step)
    again = BALANCERS["nash"](["a", "b", "c"], [1.0] * 3, options=options)
    again.load_state_dict(replay.state_dict())
    for step in range(3, 6):
        assert torch.equal(
            again.combine(conflicting_gradients(10 + step), torch.ones(3), step).shared, decided[step]
        )


def test_nash_mtl_without_its_solver_is_one_line(monkeypatch):
    import torchjd._mixins

    real = torchjd._mixins.find_spec
    monkeypatch.setattr(torchjd._mixins, "find_spec", lambda name: None if name == "ecos" else real(name))
    with pytest.raises(
        UserError,
        match=r"balancer=nash needs cvxpy and ECOS, which mtl's install brings: pip install 'torchjd\[nash-mtl\]'",
    ):
        BALANCERS["nash"](["a", "b"], [1.0, 1.0])
