"""Output paths (mtl.files): a symlink loop is one line."""

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
