"""mtl's optimizers skip torch.optim's compiler guards in a process that compiles nothing (1.4 CPU-s
of torch._dynamo's import a process), and update exactly as torch's own."""

import subprocess
import sys

import pytest
import torch

from mtl.runtime import no_dynamo
from mtl.runtime.no_dynamo import without_dynamo

from .conftest import args_for

# A run killed after its fourth step, then resumed: the optimizers are built, stepped, zeroed,
# saved and loaded; then a relatedness classifier (STS-B, SICK-R) fitted as transfer fits it.
# torch._dynamo must not be imported.
TRAIN_RESUME_TRANSFER = """
import sys
import numpy as np
from mtl.registry import Callback
from mtl.train.loop import run
from mtl.eval.transfer.classifiers import Protocol, relatedness

class Killed(Exception):
    pass

class KilledAfter(Callback):
    def on_step_begin(self, run, tasks):
        if run.state.global_step >= 4:
            raise Killed

config = run.config_from_args(sys.argv[1:])
try:
    run.start(config, progress=False, callbacks=[KilledAfter()])
except Killed:
    pass
run.resume(next(a[4:] for a in sys.argv if a.startswith("out=")), progress=False)
x, y = np.random.default_rng(0).normal(size=(40, 4)), np.linspace(0, 5, 40)
relatedness(x, y, x, y, x, y, (0, 5), Protocol(relatedness_epochs=2))
print("dynamo after training and a fit:", "torch._dynamo" in sys.modules)
"""


def test_a_training_killed_and_resumed_and_a_fit_never_import_torchs_compiler(tiny_data, tmp_path):
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-c", TRAIN_RESUME_TRANSFER, *args_for(tiny_data, out, "optim=adam")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "dynamo after training and a fit: False" in done.stdout, done.stdout
    assert "resuming" in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("optimizer", "options"),
    [
        (torch.optim.Adam, {"fused": True}),
        (torch.optim.Adam, {}),
        (torch.optim.AdamW, {"fused": True, "weight_decay": 0.01}),
        (torch.optim.SGD, {"momentum": 0.9}),
        (torch.optim.RMSprop, {}),
        (torch.optim.Adagrad, {}),
        (torch.optim.Adadelta, {}),
        (torch.optim.Adamax, {}),
    ],
)
@pytest.mark.parametrize("dynamo", [False, True], ids=["unguarded", "dynamo-imported"])
def test_an_unguarded_optimizer_updates_saves_and_loads_as_torchs_own(
    optimizer, options, dynamo, monkeypatch
):
    monkeypatch.setattr(no_dynamo, "dynamo_imported", lambda: dynamo)
    unguarded_class = without_dynamo(optimizer)
    assert issubclass(unguarded_class, optimizer) and unguarded_class.__name__ == optimizer.__name__
    torch.manual_seed(0)
    start = [torch.randn(5, 3), torch.randn(3)]
    grads = [[torch.randn_like(p) for p in start] for _ in range(6)]

    def trained(cls, steps, state=None):
        params = [torch.nn.Parameter(p.clone()) for p in start]
        made = cls([{"params": params[:1]}], lr=0.01, **options)
        made.add_param_group({"params": params[1:], "lr": 0.02})
        if state is not None:
            made.load_state_dict(state)
        for step in steps:
            made.zero_grad()
            for p, g in zip(params, grads[step], strict=True):
                p.grad = g.clone()
            made.step()
        return params, made.state_dict()

    theirs, their_state = trained(optimizer, range(3))
    ours, our_state = trained(unguarded_class, range(3))
    assert all(torch.equal(a, b) for a, b in zip(theirs, ours, strict=True))
    assert same_state(our_state, their_state)
    # each one's saved state loaded by the other, three steps more: the same update
    theirs, resumed_theirs = trained(optimizer, range(3, 6), our_state)
    ours, resumed_ours = trained(unguarded_class, range(3, 6), their_state)
    assert all(torch.equal(a, b) for a, b in zip(theirs, ours, strict=True))
    assert same_state(resumed_ours, resumed_theirs)


def same_state(first: dict, second: dict) -> bool:
    """Two optimizer state dicts hold the same groups and, bit for bit, the same state tensors."""

    def equal(a, b) -> bool:
        if isinstance(a, torch.Tensor):
            return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
        if isinstance(a, dict):
            return isinstance(b, dict) and a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
        return a == b

    return equal(first, second)
