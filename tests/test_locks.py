"""One process per run folder, build output and sweep; a lock dies with its process."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from dataset_builders.classifsquad import BuildConfig, build
from mtl.cli import main
from mtl.files.locks import FolderInUse, FolderLock, lock_file_of
from mtl.train.loop.interrupts import PARENT_DIED, StopRequests

from .conftest import FIXTURES, args_for, long_sweep_args, one_error_line, start_run, wait_until_training


def train(tiny_data, out, *extra) -> subprocess.Popen:
    """A training process that runs until it is stopped, and checkpoints only when stopped."""
    args = args_for(
        tiny_data,
        out,
        "max_steps=100000",
        "checkpoint_every=100000",
        "eval_every=100000",
        "stop=max_steps",
        *extra,
    )
    return subprocess.Popen(
        [sys.executable, "-m", "mtl", "train-multitask", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until_free(folder, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            FolderLock(folder, "folder", "out").acquire().release()
            return
        except FolderInUse:
            assert time.monotonic() < deadline, f"{folder} stayed locked"
            time.sleep(0.2)


def process_alive(pid: int) -> bool:
    """Running (not a zombie waiting for init to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_lock_is_refused_to_a_second_holder_and_names_the_first(tmp_path):
    # flock conflicts between two opens of one file even in one process: a stand-in for two processes.
    folder = tmp_path / "run"
    with (
        FolderLock(folder, "run folder", "out"),
        pytest.raises(FolderInUse, match=rf"run folder .*run is in use by process {os.getpid()} on "),
    ):
        FolderLock(folder, "run folder", "out").acquire()
    FolderLock(folder, "run folder", "out").acquire().release()  # free again
    assert not folder.exists()  # the lock file is a sibling: nothing is written into the folder


def test_the_lock_of_a_killed_process_is_free(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from mtl.files.locks import FolderLock; "
            f"FolderLock({str(tmp_path / 'run')!r}, 'run folder', 'out').acquire(); "
            "print('locked', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    with pytest.raises(FolderInUse, match=f"in use by process {holder.pid} "):
        FolderLock(tmp_path / "run", "run folder", "out").acquire()
    holder.kill()  # kill -9: no clean-up runs
    holder.wait(timeout=30)
    FolderLock(tmp_path / "run", "run folder", "out").acquire().release()


def test_a_second_training_of_a_running_folder_is_refused_and_deletes_nothing(tiny_data, tmp_path, capsys):
    out = tmp_path / "run"
    first = train(tiny_data, out)
    try:
        wait_until_training(out / "metrics.jsonl", first)  # training, and no checkpoint yet
        assert not any(out.glob("checkpoints/*.pt"))
        before = sorted(p.name for p in out.iterdir())
        assert main(["train-multitask", *args_for(tiny_data, out)]) == 2
        assert f"run folder {out} is in use by process {first.pid} " in one_error_line(capsys)
        assert main(["train-multitask", f"resume={out}"]) == 2
        assert f"run folder {out} is in use by process {first.pid} " in one_error_line(capsys)
        assert sorted(p.name for p in out.iterdir()) == before and first.poll() is None
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=120)
    assert first.returncode == 130  # the first run checkpointed and stopped as usual
    assert (out / "checkpoints" / "latest.pt").is_file()


def test_two_trainings_started_together_into_one_folder_end_with_one_writer(tiny_data, tmp_path):
    out = tmp_path / "run"
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "mtl", "train-multitask", *args_for(tiny_data, out, "max_steps=6")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outcomes = sorted((run.wait(timeout=300), run.stderr.read()) for run in runs)
    assert [code for code, _ in outcomes] == [0, 2], outcomes
    # Refused while the first trains (named, or "another process" when the lock was taken but its
    # holder not yet written down), or (on a slow machine) after it finished: never both writing.
    assert re.search(f"run folder {out} (is in use by (another )?process|already exists)", outcomes[1][1])
    assert (out / "summary.json").is_file()


def test_a_killed_checkpoint_write_leaves_nothing_the_next_run_keeps(tiny_data, tmp_path):
    run_dir, _ = start_run(tiny_data, tmp_path / "run", killed_after=4)
    leftovers = [run_dir / "checkpoints" / ".latest.pt.99999.partial", run_dir / ".config.json.99999.partial"]
    for leftover in leftovers:
        leftover.write_bytes(b"half a file")
    start_run(tiny_data, tmp_path / "unused")  # another folder's partials are not this run's business
    assert main(["train-multitask", f"resume={run_dir}"]) == 0
    assert not any(leftover.exists() for leftover in leftovers)


def test_a_run_that_died_before_its_first_checkpoint_restarts_over_a_partial_file(tiny_data, tmp_path):
    run_dir, _ = start_run(tiny_data, tmp_path / "run", killed_after=1)
    (run_dir / ".config.json.99999.partial").write_bytes(b"half a file")
    _, summary = start_run(tiny_data, run_dir)
    assert summary["global_step"] == 10


def test_a_second_build_of_one_output_is_refused(tiny_data, tmp_path):
    out = tmp_path / "classifsquad"
    config = BuildConfig(
        squad=str(FIXTURES / "squad_tiny"),
        vectors=str(tiny_data["vectors"]),
        out=str(out),
        max_oov=100,
        wandb="disabled",
    )
    with (
        FolderLock(out, "ClassifSQuAD output", "out"),
        pytest.raises(FolderInUse, match=f"ClassifSQuAD output {out} is in use by process {os.getpid()} "),
    ):
        build(config)
    assert not out.exists()
    build(config)
    assert (out / "stats.json").is_file()


def test_a_killed_sweep_takes_its_member_down_with_it_checkpointed(tiny_data, tmp_path):
    out = tmp_path / "sweep"
    sweep = subprocess.Popen(
        [sys.executable, "-m", "mtl", "sweep", *long_sweep_args(tiny_data, out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    member = out / "steps_nli2"
    wait_until_training(member / "metrics.jsonl", sweep)
    holder = lock_file_of(member).read_text()
    member_pid = int(re.match(r"process (\d+) ", holder).group(1))
    sweep.kill()  # kill -9: the sweep passes nothing on
    sweep.wait(timeout=30)
    wait_until_free(member)  # the member got its parent-death signal, checkpointed and ended
    deadline = time.monotonic() + 60
    while process_alive(member_pid):
        assert time.monotonic() < deadline, f"member {member_pid} outlived its sweep"
        time.sleep(0.2)
    assert (member / "checkpoints" / "latest.pt").is_file()


def test_a_sweep_refuses_an_axis_value_given_twice(tiny_data, tmp_path, capsys):
    args = [a for a in args_for(tiny_data, tmp_path / "s") if not a.startswith("seed=")]
    assert main(["sweep", *args, "seed=1,1"]) == 2
    assert "seed=1,1 names 1 twice" in one_error_line(capsys)


def test_a_sweep_rerun_with_other_fixed_keys_is_refused(tiny_data, tmp_path, capsys):
    out = tmp_path / "s"
    args = [a for a in args_for(tiny_data, out) if not a.startswith(("out=", "max_steps="))]
    assert main(["sweep", *args, "steps_nli=2,3", "max_steps=4", f"out={out}"]) == 0
    finished = (out / "steps_nli2" / "summary.json").read_text()
    capsys.readouterr()
    assert main(["sweep", *args, "steps_nli=2,3", "max_steps=6", f"out={out}"]) == 2
    assert (
        f"sweep folder {out} was trained with other fixed keys (max_steps=4, max_steps=6)"
        in one_error_line(capsys)
    )
    assert (out / "steps_nli2" / "summary.json").read_text() == finished
    assert (
        main(["sweep", *args, "steps_nli=2,3", "max_steps=4", f"out={out}", "device=cpu"]) == 0
    )  # same runs


def test_a_sweep_into_a_file_is_one_line(tiny_data, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert main(["sweep", "steps_nli=2,3", f"out={tmp_path / 'file'}"]) == 2
    assert f"out={tmp_path / 'file'} is not a folder" in one_error_line(capsys)


def test_a_second_transfer_of_the_same_report_is_refused(tiny_data, senteval, tmp_path, capsys):
    run_dir, _ = start_run(tiny_data, tmp_path / "run", "max_steps=3")
    args = ["transfer", f"run={run_dir}", "tasks=MR", f"data={senteval}", "wandb=disabled"]
    with FolderLock(run_dir / "transfer-fast", "transfer report", "out"):  # another transfer writing it
        assert main([*args, "mode=fast"]) == 2
        assert f"transfer report {run_dir / 'transfer-fast'} is in use by process" in one_error_line(capsys)
        assert main([*args, "mode=standard"]) == 0  # another protocol's report is another file
    assert main([*args, "mode=fast"]) == 0 and (run_dir / "transfer-fast.json").is_file()


def test_a_repeated_parent_death_signal_still_stops_after_the_step():
    """Linux sends the parent-death signal once per exiting thread of a killed sweep: a repeat
    must not act as a second Ctrl-C, which stops at once without a checkpoint."""
    with StopRequests() as stop_requests:
        signal.raise_signal(PARENT_DIED)
        signal.raise_signal(PARENT_DIED)
        assert stop_requests.requested
    with StopRequests(), pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGTERM)  # a person's second SIGTERM still stops at once


def test_accounting_confirms_an_ended_job_only_when_it_ended_after_the_lock():
    """sacct's rows (State|End, one per attempt) are the evidence for a job squeue has forgotten:
    every attempt ended, the last after the lock was taken (an id reused since is another job);
    no rows, a running attempt or an unknown end are no evidence."""
    import time

    from mtl.files.locks import accounting_says_ended

    taken = time.mktime(time.strptime("2026-12-02 04:00:00", "%Y-%m-%d %H:%M:%S"))
    assert accounting_says_ended("COMPLETED|2026-12-02T05:00:00\n", taken)
    assert accounting_says_ended("NODE_FAIL|2026-12-02T04:10:00\nCANCELLED by 0|2026-12-02T04:30:00\n", taken)
    assert accounting_says_ended("FAILED|2026-12-02T05:00:00\n", None)
    assert not accounting_says_ended("COMPLETED|2026-12-01T05:00:00\n", taken)  # ended before the lock
    assert not accounting_says_ended("RUNNING|Unknown\n", taken)
    assert not accounting_says_ended("COMPLETED|Unknown\n", taken)
    assert not accounting_says_ended("NODE_FAIL|2026-12-02T04:10:00\nRUNNING|Unknown\n", taken)  # requeued
    assert not accounting_says_ended("", taken)
    assert not accounting_says_ended("garbage\n", taken)
    assert not accounting_says_ended("|2026-12-02T05:00:00\n", taken)  # no state
