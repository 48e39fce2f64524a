"""The size check before a model is allocated (mtl.models.memory)."""

import re

import pytest
import torch

from mtl.cli import main
from mtl.errors import UserError
from mtl.models.memory import check_fits

from .conftest import args_for, one_error_line


@pytest.mark.parametrize("encoder", ["bilstm", "bilstm2", "lstm", "transformer", "decomposable"])
def test_a_model_too_large_for_memory_is_refused_before_it_is_allocated(tiny_data, tmp_path, capsys, encoder):
    args = args_for(tiny_data, tmp_path / "run", f"encoder={encoder}", "hidden=10000000", "device=cpu")
    assert main(["train-multitask", *args]) == 2  # allocating it would take petabytes, or minutes of swap
    assert re.match(
        rf"error: hidden=10000000 \(encoder={encoder}, head_hidden=16\) makes [\d,]+ trainable parameters: "
        r"[\d,.]+ TiB for weights and gradients alone, more than the [\d,.]+ GiB of CPU memory here",
        one_error_line(capsys),
    )


def test_the_size_check_counts_what_the_model_would_hold():
    layer = lambda: torch.nn.Linear(1000, 1000)  # noqa: E731  (1,001,000 parameters: 8,008,000 bytes)
    check_fits(layer, torch.device("cpu"), "width=1000")
    with pytest.raises(UserError, match=r"width=1000 makes 1,001,000 trainable parameters: 7.6 MiB"):
        _check_with_memory(layer, 8_000_000)  # 8,008,000 bytes do not fit in 8,000,000
    _check_with_memory(layer, 8_008_000)


def _check_with_memory(build, memory: int) -> None:
    from unittest import mock

    with mock.patch("mtl.models.memory.device_memory", return_value=memory):
        check_fits(build, torch.device("cpu"), "width=1000")
