"""Devices mtl cannot train on are refused, and a step's seed reaches the generators it draws from
(mtl.runtime.device)."""

import re

import pytest
import torch

from mtl.errors import UserError
from mtl.runtime.device import resolve_device, seed_step


@pytest.mark.parametrize(
    "name, message",
    [
        ("meta", "device='meta' is not one mtl trains on: use auto, cpu, cuda or cuda:N"),
        ("tpu", "device='tpu' is not a device"),
        ("cuda:99", "device='cuda:99' but"),
    ],
)
def test_devices_mtl_cannot_train_on_are_refused(name, message):
    with pytest.raises(UserError, match=re.escape(message)):
        resolve_device(name)


def test_a_steps_seed_leaves_the_cpu_generator_as_torch_manual_seed_does():
    torch.manual_seed(1234)
    theirs = torch.get_rng_state(), torch.nn.functional.dropout(torch.ones(64), 0.5)
    torch.manual_seed(99)  # (another state between)
    seed_step(1234, torch.device("cpu"))
    ours = torch.get_rng_state(), torch.nn.functional.dropout(torch.ones(64), 0.5)
    assert torch.equal(ours[0], theirs[0]) and torch.equal(ours[1], theirs[1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_a_steps_seed_on_a_gpu_seeds_every_gpu_as_torch_manual_seed_does():
    torch.manual_seed(1234)
    theirs = torch.cuda.get_rng_state_all()
    torch.manual_seed(99)
    seed_step(1234, torch.device("cuda"))
    assert all(torch.equal(a, b) for a, b in zip(torch.cuda.get_rng_state_all(), theirs, strict=True))
