"""Issue 34: a file that cannot be written (full disk, read-only place) is a one-line error wherever
mtl writes, nothing half-written is left looking complete, and every error starts on its own line."""

import errno
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from tqdm import tqdm

from mtl import report as reports
from mtl.cli import main
from mtl.config import paths_and_keys
from mtl.launch import rank_says

from .conftest import one_error_line, start_run


@pytest.fixture(scope="module")
def finished_run(tiny_data, tmp_path_factory):
    run_dir, _ = start_run(tiny_data, tmp_path_factory.mktemp("finished") / "run", "max_steps=3")
    return run_dir


def test_torch_reporting_a_full_disk_as_a_runtime_error_is_one_line(tiny_data, tmp_path, capsys, monkeypatch):
    run_dir, _ = start_run(tiny_data, tmp_path / "run", killed_after=6)
    before = (run_dir / "checkpoints" / "latest.pt").read_bytes()
    real_save = torch.save

    def full_disk(obj, path, *args, **kwargs):  # what torch's zip writer raises when the disk fills
        real_save(obj, path, *args, **kwargs)
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 54976 vs 54876")

    monkeypatch.setattr(torch, "save", full_disk)
    assert main(["train-multitask", f"resume={run_dir}"]) == 2
    error = one_error_line(capsys)
    assert "could not write checkpoint" in error and "latest.pt: the write failed (" in error
    assert "is the disk full?" in error
    assert (run_dir / "checkpoints" / "latest.pt").read_bytes() == before
    assert not list((run_dir / "checkpoints").glob(".*partial"))


def test_a_full_disk_during_transfer_is_one_line(
    finished_run, tiny_data, senteval, tmp_path, capsys, monkeypatch
):
    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "savez", full_disk)
    args = ["transfer", f"run={finished_run}", "tasks=MR", "mode=fast", f"data={senteval}", "wandb=disabled"]
    assert main([*args, f"vectors={tiny_data['vectors']}", f"out={tmp_path}"]) == 2
    error = one_error_line(capsys)
    assert "could not write transfer items" in error and "No space left on device: free some space" in error
    assert not list(tmp_path.glob(".*partial")) and not list(tmp_path.glob("*.items.npz"))


def test_a_read_only_report_destination_is_one_line(finished_run, tmp_path, capsys, monkeypatch):
    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(Path, "write_text", read_only)
    monkeypatch.setattr(Path, "unlink", read_only)  # removing the partial file fails there too
    assert main(["report", str(finished_run), f"out={tmp_path / 'report.html'}"]) == 2
    assert one_error_line(capsys) == (
        f"error: could not write report {tmp_path / 'report.html'}: Read-only file system: "
        "choose a place you can write to"
    )


def test_any_write_refused_by_the_system_is_one_line(finished_run, capsys, monkeypatch):
    def full_disk(*args, **kwargs):  # a writer of a library (W&B's files), not one of mtl's own
        raise OSError(errno.ENOSPC, "No space left on device", "/runs/x/wandb/run.wandb")

    monkeypatch.setattr(reports, "run", full_disk)
    assert main(["report", str(finished_run)]) == 2
    assert one_error_line(capsys).startswith("error: could not write /runs/x/wandb/run.wandb: No space left")


def test_an_error_after_an_open_progress_bar_starts_on_its_own_line(capsys):
    bar = tqdm(total=5, desc="read SQuAD", file=sys.stderr, mininterval=0)
    bar.update(1)  # an exception unwinding past it leaves it open: nothing ends its line
    rank_says("error: SQuAD file x is not valid JSON")  # what the CLI says an error with
    err = capsys.readouterr().err
    assert "read SQuAD" in err and "\nerror: SQuAD file x is not valid JSON\n" in err


def test_a_run_folder_whose_name_holds_an_equals_sign_is_a_path(finished_run, tmp_path, capsys):
    folder = tmp_path / "lr=0.1"
    shutil.copytree(finished_run, folder)
    assert paths_and_keys([str(folder), "out=x.html", "runs/steps_nli=250"]) == (
        [str(folder), "runs/steps_nli=250"],
        ["out=x.html"],
    )
    assert main(["report", str(folder), f"out={tmp_path / 'r.html'}"]) == 0
    assert "lr=0.1" in (tmp_path / "r.html").read_text()
