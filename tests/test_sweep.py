"""`just sweep`: a grid of runs in one W&B group, checked before any starts, resumable."""

import json
import shutil
import subprocess
import sys

import pytest

from mtl.cli import main
from mtl.errors import UserError
from mtl.jobs.sweep import parse
from mtl.tracking.wandb_file import run_files

from .conftest import args_for, long_sweep_args, wait_until_training


def test_a_sweep_trains_each_member_in_its_group_and_skips_finished_ones(sweep_dir, capsys):
    out, args = sweep_dir
    record = json.loads((out / "sweep.json").read_text())
    assert record["axes"] == {"steps_nli": ["2", "4"]}
    for name in record["members"]:
        config = json.loads((out / name / "config.json").read_text())["config"]
        assert config["run"]["group"] == "tiny" and config["run"]["name"] == name
        assert config["tasks"]["squad"]["steps"] == 2  # the sweep file says 500: later keys win
        assert (out / name / "summary.json").is_file()
        (run_file,) = run_files(out / name)  # one W&B run per member, in the sweep's group
        printed = subprocess.run(
            [sys.executable, "-m", "wandb", "leet", "inspect", "--summary", "--json", str(run_file)],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        assert '"tiny"' in printed and "best/nli/dev/acc" in printed
    finished = {name: (out / name / "summary.json").stat().st_mtime_ns for name in record["members"]}
    capsys.readouterr()
    assert main(["sweep", "fig2", *args]) == 0
    assert "2 finished before, 0 to train" in capsys.readouterr().out
    assert finished == {name: (out / name / "summary.json").stat().st_mtime_ns for name in finished}


def test_a_sweep_refuses_a_wrong_key_before_any_run_starts(tiny_data, tmp_path, capsys):
    args = [a for a in args_for(tiny_data, tmp_path) if not a.startswith("out=")]
    assert main(["sweep", *args, "steps_nli=2,4", "lr_decya=0.5", f"out={tmp_path / 's'}"]) == 2
    assert "lr_decya" in capsys.readouterr().err
    assert not any((tmp_path / "s").glob("*/config.json"))


def test_ctrl_c_stops_a_sweep_with_its_running_member_checkpointed_for_the_next_run(tiny_data, tmp_path):
    import os
    import signal

    from mtl.jobs.sweep import parse

    out = tmp_path / "sweep"
    args = long_sweep_args(tiny_data, out)
    sweep = subprocess.Popen(
        [sys.executable, "-m", "mtl", "sweep", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until_training(out / "steps_nli2" / "metrics.jsonl", sweep)  # the first member
        os.kill(sweep.pid, signal.SIGINT)
        _, err = sweep.communicate(timeout=120)
    finally:
        sweep.kill()  # (failing, it would train on; its member stops with it)
    assert sweep.returncode == 130 and "again to resume it" in err, err
    first, second = parse(args).members()
    assert first.status() == "interrupted" and first.command()[-1] == f"resume={first.run_dir}"
    assert second.status() == "new"


def test_a_named_sweeps_axis_shrinks_from_the_command_line(tmp_path):
    """`just sweep objectives tasks=nli+squad` trains that one member, not a sweep with no axis."""
    from mtl.jobs.sweep import parse

    out = f"out={tmp_path / 's'}"
    whole = [member.name for member in parse(["objectives", out]).members()]
    assert whole == ["tasksqt", "tasksskipthought", "tasksnli", "tasksnli+squad", "tasksnli+qt"]
    (one,) = parse(["objectives", "tasks=nli+squad", out]).members()
    assert one.name == "tasksnli+squad" and "tasks=nli+squad" in one.overrides
    two = parse(["objectives", "tasks=nli,nli+qt", out]).members()
    assert [member.name for member in two] == ["tasksnli", "tasksnli+qt"]
    with pytest.raises(UserError, match="a sweep needs an axis"):
        parse(["steps_nli=4", out])  # a key no sweep file sweeps is a fixed key, as before


def test_a_parallel_sweep_shows_each_running_members_step(sweep_dir, tiny_data, tmp_path, capsys):
    from mtl.jobs.member import member_progress
    from mtl.jobs.sweep import parse

    out, args = sweep_dir
    first = parse(["fig2", *args]).members()[0]
    planned = json.loads((first.run_dir / "config.json").read_text())["config"]["optim"]["max_steps"]
    last = max(json.loads(line)["global_step"] for line in (first.run_dir / "metrics.jsonl").open())
    assert member_progress(first) == f"steps_nli2 step {last}" + (f"/{planned}" if planned else "")
    # a line being written, in a copy: the session's sweep is read by other tests
    shutil.copytree(out, tmp_path / "copy", ignore=shutil.ignore_patterns("wandb", "checkpoints"))
    copied = parse(["fig2", *args[:-1], f"out={tmp_path / 'copy'}"]).members()[0]
    (copied.run_dir / "metrics.jsonl").write_text('{"global_step": 7}\n{"global_st')
    assert member_progress(copied).startswith("steps_nli2 step 7")
    assert member_progress(parse(["fig2", *args[:-1], f"out={tmp_path / 'new'}"]).members()[0]).endswith(
        "starting"
    )
    wide = [a for a in args_for(tiny_data, tmp_path / "p") if not a.startswith(("out=", "wandb="))]
    assert (
        main(["sweep", *wide, "steps_nli=2,3", "wandb=disabled", "parallel=2", f"out={tmp_path / 'p'}"]) == 0
    )
    err = capsys.readouterr().err
    assert "sweep sweep: 100%" in err and "2/2" in err, err  # the sweep's own bar, in runs


def test_a_sweep_and_its_members_stay_inside_its_folder(tmp_path):
    with pytest.raises(UserError, match=r"sweep='../../../x' is not a name"):
        parse(["sweep=../../../x", "lr=0.1,0.2"])
    sweep = parse([f"out={tmp_path}", "vectors=../a/b.txt,/c/d.txt"])
    assert [m.run_dir.parent for m in sweep.members()] == [tmp_path, tmp_path]
    assert [m.name for m in sweep.members()] == ["vectors.._a_b.txt", "vectors_c_d.txt"]


def test_seeds_make_the_seed_an_axis_of_every_member(tmp_path):
    """`seeds=3`: each value of the grid trained with seeds 1..3 (from seed= when given), one folder
    each; `just compare` then groups the seeds of each value (test_significance)."""
    out = f"out={tmp_path}"
    names = [member.name for member in parse(["lr=1e-3,3e-4", "seeds=3", out]).members()]
    assert names == [f"lr{lr}-seed{s}" for lr in ("1e-3", "3e-4") for s in (1, 2, 3)]
    (member,) = [
        m for m in parse(["lr=1e-3,3e-4", "seeds=2", "seed=7", out]).members() if m.name == "lr1e-3-seed8"
    ]
    assert "seed=8" in member.overrides
    assert [m.name for m in parse(["seed=4,5", out]).members()] == ["seed4", "seed5"]  # a list: an axis
    with pytest.raises(UserError, match="not both"):
        parse(["seed=4,5,6", "seeds=2", out])
    with pytest.raises(UserError, match="seeds=x is not a whole number"):
        parse(["lr=1,2", "seeds=x", out])


def test_the_sweeps_closing_lines_mark_a_score_measured_on_part_of_its_split(tmp_path):
    from mtl.jobs.sweep import summary

    sweep = parse([f"out={tmp_path}", "lr=0.1,0.2"])
    scored = {"nli/dev": {"examples": 64, "of": 9842, "sampled": True}}
    for member, scored_on in zip(sweep.members(), [scored, {}], strict=True):
        member.run_dir.mkdir()
        (member.run_dir / "summary.json").write_text(
            json.dumps(
                {"best/nli/dev/acc": 0.5, "scored_on": scored_on} if scored_on else {"best/nli/dev/acc": 0.5}
            )
        )
    assert summary(sweep, {}).splitlines()[1:] == [
        "  lr0.1: not run; nli/dev/acc 50.00 §",
        "  lr0.2: not run; nli/dev/acc 50.00",
        "  § scored on a part of the split (max_eval=): nli/dev on a seeded sample of 64 of 9,842",
    ]
