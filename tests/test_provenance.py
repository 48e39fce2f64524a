"""A transfer report records what it evaluated (file, step, weights digest), and report and
compare flag one whose weights are not the run's final encoder (a transfer of a run still training)."""

import json
import os
import shutil
import time

import pytest

from mtl.analysis.significance import group_runs, stale_reports
from mtl.cli import main
from mtl.eval.transfer.provenance import training_process
from mtl.files.locks import FolderLock
from mtl.runs import Run, stale

from .conftest import start_run


@pytest.fixture(scope="module")
def finished_run(tiny_data, tmp_path_factory):
    run_dir, _ = start_run(tiny_data, tmp_path_factory.mktemp("finished") / "run", "max_steps=6")
    return run_dir


def transfer(tiny_data, senteval, run, task) -> None:
    args = ["transfer", f"run={run}", f"tasks={task}", "mode=fast", f"data={senteval}", "wandb=disabled"]
    assert main([*args, f"vectors={tiny_data['vectors']}"]) == 0


def test_a_report_of_an_early_checkpoint_is_flagged_and_not_merged_with_the_final_one(
    finished_run, tiny_data, senteval, tmp_path
):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    transfer(tiny_data, senteval, run_dir / "checkpoints" / "best.pt", "MR")  # what a live run offers
    report = json.loads((run_dir / "transfer-fast.json").read_text())
    [entry] = report["evaluated"]
    best_step = json.loads((run_dir / "summary.json").read_text())["best/step"]
    assert entry["file"] == "checkpoints/best.pt" and entry["step"] == best_step
    assert len(entry["weights_sha256"]) == 64
    reason = stale(report, run_dir / "transfer-fast.json", run_dir)
    assert reason == f"evaluated checkpoints/best.pt at step {best_step}, not the run's final encoder"
    assert Run.read(run_dir).stale == {"transfer-fast": reason}
    [warning] = stale_reports(group_runs([run_dir], "transfer-fast"), "transfer-fast")
    assert warning.startswith(f"{run_dir} (transfer-fast): evaluated checkpoints/best.pt")

    transfer(tiny_data, senteval, run_dir, "CR")  # the final encoder: the early MR result is not kept
    report = json.loads((run_dir / "transfer-fast.json").read_text())
    assert report["results"].keys() == {"CR"} and report["evaluated"][0]["file"] == "encoder.json"
    assert stale(report, run_dir / "transfer-fast.json", run_dir) is None
    assert Run.read(run_dir).stale == {}


def test_a_report_written_before_reports_said_what_they_evaluated_is_judged_by_its_time(
    finished_run, tmp_path
):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    path = run_dir / "transfer.json"
    path.write_text(json.dumps({"results": {}}))
    old = time.time() - 3600
    os.utime(path, (old, old))
    assert stale({"results": {}}, path, run_dir) == "written before the run exported its final encoder"
    os.utime(path, None)
    assert stale({"results": {}}, path, run_dir) is None


def test_the_process_training_a_run_is_found_by_its_lock(finished_run, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    assert training_process(run_dir) is None
    with FolderLock(run_dir, "run folder", "out"):
        assert f"process {os.getpid()} " in training_process(run_dir)
    assert training_process(run_dir) is None
