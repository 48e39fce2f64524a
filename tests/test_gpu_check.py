"""`just gpu-check`: its steps run one by one, each under its own limit, and the results file is
kept after every step (a lent GPU's session may end mid-way)."""

import re

from mtl.cli import main
from tools import gpu_check


def test_each_step_is_recorded_with_its_exit_code_time_and_output(tmp_path, monkeypatch, capsys):
    fake = [
        gpu_check.Step("prints", ["json.tool", "--help"], 0.3),
        gpu_check.Step("fails", ["mtl", "transfer", "tasks=NOPE"], 0.3),
        gpu_check.Step("hangs", ["http.server", "0", "--bind", "127.0.0.1"], 0.01),  # cut at its limit
    ]
    monkeypatch.setattr(gpu_check, "steps", lambda config: fake)
    assert main(["gpu-check", f"out={tmp_path}", "device=cpu", "budget=100"]) == 0
    (results,) = tmp_path.glob("gpu-check-*.md")
    text = results.read_text()
    assert "- device: cpu" in text and "- torch " in text
    assert "## prints\n\n    json.tool --help\n\nexit 0" in text and "usage:" in text
    assert "## fails" in text and "exit 2" in text and "unknown transfer task 'NOPE'" in text
    assert re.search(r"## hangs\n\n.*\n\nexit timed out, \d+ s", text)  # 1% of 100 s: cut at 1 s
    assert f"results in {results}" in capsys.readouterr().err


def test_the_steps_cover_every_cuda_path_and_benchmark():
    names = [step.name for step in gpu_check.steps(gpu_check.GpuCheckConfig())]
    assert names == [
        "CUDA tests",
        "training step",
        "where the step's time goes",
        "encode()",
        "mixed step",
        "GradCache",
        "bench-hf",
    ]
    full = gpu_check.steps(gpu_check.GpuCheckConfig())
    assert all("only=bilstm 2048" in step.args for step in full[1:3])  # the paper's width
    assert "hidden=2048" in full[3].args
    assert sum(step.share for step in full) <= 1.0
