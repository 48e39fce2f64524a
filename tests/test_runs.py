"""Mtl/runs.py: where a run folder's run stands, read from its files alone."""

import re

import pytest

from mtl.cli import main
from mtl.runs import RunFolder, RunStatus

from .conftest import (
    one_error_line,
    start_run,
)


def test_a_run_folder_goes_from_empty_to_finished(tiny_data, tmp_path):
    folder = RunFolder(tmp_path / "run")
    assert folder.status() is RunStatus.EMPTY
    start_run(tiny_data, folder.path, killed_after=1)
    assert folder.status() is RunStatus.NEVER_CHECKPOINTED
    start_run(tiny_data, folder.path, killed_after=4)  # restarted (it had no checkpoint), then killed
    assert folder.status() is RunStatus.INTERRUPTED and folder.latest.is_file()
    start_run(tiny_data, tmp_path / "done", "max_steps=3")
    done = RunFolder(tmp_path / "done")
    assert done.status() is RunStatus.FINISHED and done.encoder.is_file() and done.best.is_file()


@pytest.mark.parametrize("names", [["notes.txt"], ["config.json", "notes.txt"], ["metrics.jsonl"]])
def test_a_folder_that_a_run_did_not_write_is_not_a_run(tmp_path, names):
    for name in names:
        (tmp_path / name).write_text("")
    assert RunFolder(tmp_path).status() is RunStatus.NOT_A_RUN


def test_clearing_removes_what_a_run_wrote_and_nothing_else(tmp_path):
    folder = RunFolder(tmp_path / "run")
    (folder.checkpoints).mkdir(parents=True)
    folder.record.write_text("{}")
    (folder.path / ".config.json.99.partial").write_text("")
    folder.remove_partial_files()
    assert folder.status() is RunStatus.NEVER_CHECKPOINTED
    folder.clear()
    assert folder.status() is RunStatus.EMPTY


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda text: text[: len(text) // 2], r"config.json is not JSON \((Unterminated string|Expecting)"),
        (lambda text: "[" * 100_000 + "]" * 100_000, r"config.json is nested too deeply: restore it"),
        (
            lambda text: text.replace('"lr": 0.1', '"lr": "fast"'),
            r"config.json: optim.lr='fast' must be of type float",
        ),
        (lambda text: text.replace('"lr": 0.1', '"lr": NaN'), r"config.json: lr=nan must be a finite number"),
        (
            lambda text: text.replace('"lr": 0.1', '"lrr": 0.1'),
            r"config.json: unknown key 'optim.lrr': did you mean",
        ),
        (
            lambda text: text.replace('"encoder": "bilstm"', '"encoder": "cnn"'),
            r"encoder='cnn' is not valid",
        ),
        (lambda text: "[1, 2]", r"config.json holds list, not a JSON object"),
        (
            lambda text: text.replace('"command": "just', '"command": "\\"just'),
            r"config.json, command: not a command line",
        ),
    ],
)
def test_a_damaged_or_hand_edited_config_json_is_one_line(tiny_data, tmp_path, capsys, edit, message):
    run_dir, _ = start_run(tiny_data, tmp_path / "run", killed_after=6)
    path = run_dir / "config.json"
    path.write_text(edit(path.read_text()))
    assert main(["train-multitask", f"resume={run_dir}"]) == 2
    assert re.search(message, one_error_line(capsys))
