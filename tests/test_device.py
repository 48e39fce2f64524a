"""Devices mtl cannot train on are refused (mtl.runtime.device)."""

import re

import pytest

from mtl.errors import UserError
from mtl.runtime.device import resolve_device


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
