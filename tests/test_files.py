"""Output paths (mtl.files): a symlink loop is one line."""

import re
import subprocess
import sys

import pytest

from mtl.cli import main

from .conftest import args_for, one_error_line


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


def test_a_full_disk_at_the_encoder_export_is_one_line(tmp_path):
    """safetensors reports a failed write in its own error type; the export says it in one line and
    leaves no weights file behind. The process's file-size limit makes the write really fail (EFBIG)."""
    script = """
import resource, signal, sys
from pathlib import Path
import torch
from mtl.errors import UserError
from mtl.formats import encoder_file
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing
resource.setrlimit(resource.RLIMIT_FSIZE, (65536, resource.RLIM_INFINITY))
try:
    encoder_file.write(Path(sys.argv[1]) / "encoder.json", {"config": {}}, {"w": torch.zeros(100_000)}, {})
except UserError as error:
    print(f"error: {error}")
"""
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(
        r"error: could not write encoder weights .*encoder.safetensors: the write failed \(Error while "
        r"serializing: .*\).*\n",
        done.stdout,
    )
    assert list(tmp_path.iterdir()) == []
