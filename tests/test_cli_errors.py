"""Issue 19: inputs that used to end in a Python traceback are one line naming the input and the fix."""

import re

import pytest
import torch

from mtl.cli import main
from mtl.device import resolve_device
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


def test_fp16_lstm_on_the_cpu_is_one_line(tiny_data, tmp_path, capsys):
    args = args_for(tiny_data, tmp_path / "run", "precision=fp16", "device=cpu")
    assert main(["train-multitask", *args]) == 2
    assert (
        "precision=fp16 with encoder=bilstm on the CPU: PyTorch's CPU LSTM has no fp16 kernel"
        in one_error_line(capsys)
    )
    assert not (tmp_path / "run").exists()


def test_bf16_lstm_on_a_cpu_without_native_bf16_is_one_line(tiny_data, tmp_path, capsys, monkeypatch):
    from mtl import precision

    monkeypatch.setattr(precision, "bf16_supported", lambda device: False)  # an AVX2-only CPU
    args = args_for(tiny_data, tmp_path / "run", "precision=bf16", "device=cpu")
    assert main(["train-multitask", *args]) == 2
    assert "precision=bf16 with encoder=bilstm on this CPU: it has no native bf16" in one_error_line(capsys)
    assert not (tmp_path / "run").exists()


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


@pytest.fixture
def symlink_loop(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    return tmp_path / "a"


@pytest.mark.parametrize("key", ["out", "classifsquad"])
def test_a_training_path_through_a_symlink_loop_is_one_line(tiny_data, tmp_path, capsys, symlink_loop, key):
    target = symlink_loop / "run" if key == "out" else symlink_loop
    args = args_for(tiny_data, tmp_path / "run", f"{key}={target}")
    assert main(["train-multitask", *args]) == 2
    assert f"error: {key}={target} cannot be followed (a symlink loop): fix the link" in one_error_line(
        capsys
    )


def test_a_build_into_a_symlink_loop_is_one_line(tiny_data, capsys, symlink_loop):
    assert main(["build-classifsquad", f"vectors={tiny_data['vectors']}", f"out={symlink_loop}"]) == 2
    assert f"error: out={symlink_loop} cannot be followed (a symlink loop)" in one_error_line(capsys)


def test_the_dashboard_without_network_is_one_line(capsys, monkeypatch):
    import wandb

    def unreachable(*args, **kwargs):
        raise wandb.errors.CommError("Failed to execute API request: the service process did not respond")

    # With a key and no network, W&B's own client waits 30 s and raises AuthenticationError.
    monkeypatch.setenv("WANDB_API_KEY", "0" * 40)
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setattr(wandb, "Api", unreachable)
    assert main(["dashboard", "group=fig2"]) == 2
    assert one_error_line(capsys).startswith(
        "error: could not save the workspace on W&B (Failed to execute API request: the service process did not "
        "respond): check the network and WANDB_API_KEY, or write its JSON offline with spec=PATH"
    )
