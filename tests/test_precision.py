"""Precisions a device cannot run are refused in one line (mtl.models.precision)."""

from mtl.cli import main

from .conftest import args_for, one_error_line


def test_fp16_lstm_on_the_cpu_is_one_line(tiny_data, tmp_path, capsys):
    args = args_for(tiny_data, tmp_path / "run", "precision=fp16", "device=cpu")
    assert main(["train-multitask", *args]) == 2
    assert (
        "precision=fp16 with encoder=bilstm on the CPU: PyTorch's CPU LSTM has no fp16 kernel"
        in one_error_line(capsys)
    )
    assert not (tmp_path / "run").exists()


def test_bf16_lstm_on_a_cpu_without_native_bf16_is_one_line(tiny_data, tmp_path, capsys, monkeypatch):
    from mtl.models import precision

    monkeypatch.setattr(precision, "bf16_supported", lambda device: False)  # an AVX2-only CPU
    args = args_for(tiny_data, tmp_path / "run", "precision=bf16", "device=cpu")
    assert main(["train-multitask", *args]) == 2
    assert "precision=bf16 with encoder=bilstm on this CPU: it has no native bf16" in one_error_line(capsys)
    assert not (tmp_path / "run").exists()
