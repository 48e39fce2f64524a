"""Starting and resuming runs (mtl.train.loop.run): resume refuses changed inputs, restarts a run that never checkpointed."""

import json
import re
import shutil
from pathlib import Path

import pytest

from dataset_builders.classifsquad import BuildConfig, build
from mtl.cli import main
from mtl.errors import UserError
from mtl.train.loop import run

from .conftest import (
    FIXTURES,
    Killed,
    args_for,
    copy_classifsquad,
    deterministic_summary,
    killed_after_step,
    one_error_line,
    start_run,
    train_cli,
)


def rebuild(folder: Path, tiny_data, seed: int) -> None:
    build(
        BuildConfig(
            squad=str(FIXTURES / "squad_tiny"),
            vectors=str(tiny_data["vectors"]),
            out=str(folder),
            max_oov=100,
            max_negatives_per_question=4,
            seed=seed,
            overwrite=True,
            wandb="disabled",
        )
    )


def test_resume_refuses_a_rebuilt_classifsquad(tiny_data, tmp_path):
    folder = copy_classifsquad(tiny_data, tmp_path)
    run_dir, _ = start_run(tiny_data, tmp_path / "run", f"classifsquad={folder}", killed_after=7)
    rebuild(folder, tiny_data, seed=99)
    with pytest.raises(
        UserError, match=rf"cannot resume .*: the ClassifSQuAD data \({folder}\).* changed since"
    ):
        run.resume(run_dir, progress=False)


def test_resume_refuses_edited_snli(tiny_data, tmp_path):
    snli = tmp_path / "snli"
    shutil.copytree(FIXTURES / "snli_tiny", snli)
    run_dir, _ = start_run(tiny_data, tmp_path / "run", f"snli={snli}", killed_after=7)
    labels = (snli / "labels.train").read_text().splitlines()
    flipped = "neutral" if labels[0] != "neutral" else "entailment"
    (snli / "labels.train").write_text("\n".join([flipped, *labels[1:]]) + "\n")
    with pytest.raises(UserError, match=rf"cannot resume .*: the SNLI data \({snli}\).* changed since"):
        run.resume(run_dir, progress=False)


def test_resume_refuses_changed_vectors(tiny_data, tmp_path):
    vectors = tmp_path / "vectors.txt"
    lines = tiny_data["vectors"].read_text().splitlines()
    vectors.write_text("\n".join(lines) + "\n")
    run_dir, _ = start_run(tiny_data, tmp_path / "run", f"vectors={vectors}", killed_after=7)
    changed = [line.rsplit(" ", 1)[0] + " 0.5" for line in lines]  # every vector's last value differs
    vectors.write_text("\n".join(changed) + "\n")
    with pytest.raises(UserError, match=r"cannot resume .*: the word vectors \(.*vectors.txt\) changed"):
        run.resume(run_dir, progress=False)


def test_resume_reads_the_recorded_inputs_whatever_the_environment_says(tiny_data, tmp_path, monkeypatch):
    # Started with the data found through MTL_DATA_DIR and MTL_VECTORS; resumed in a fresh shell.
    data_dir = tmp_path / "data"
    shutil.copytree(FIXTURES / "snli_tiny", data_dir / "snli")
    monkeypatch.setenv("MTL_DATA_DIR", str(data_dir))
    monkeypatch.setenv("MTL_VECTORS", str(tiny_data["vectors"]))
    extra = ("dropout=0.2", "max_steps=12")
    args = [
        a
        for a in args_for(tiny_data, tmp_path / "x", *extra)
        if not a.startswith(("snli=", "vectors=", "out="))
    ]
    config = run.config_from_args([*args, f"out={tmp_path / 'cut'}"])
    with pytest.raises(Killed):
        run.start(config, progress=False, callbacks=[killed_after_step(7)])
    cut_dir = tmp_path / "cut"
    recorded = json.loads((cut_dir / "config.json").read_text())
    assert recorded["config"]["tasks"]["nli"]["source"] == str((data_dir / "snli").resolve())
    assert recorded["config"]["data"]["vectors"] == str(tiny_data["vectors"].resolve())
    assert set(recorded["inputs"]) == {"snli", "classifsquad", "vectors", "vocabulary"}

    monkeypatch.delenv("MTL_DATA_DIR")
    monkeypatch.setenv("MTL_VECTORS", str(tmp_path / "elsewhere.txt"))
    _, resumed = run.resume(cut_dir, progress=False)
    monkeypatch.setenv("MTL_DATA_DIR", str(data_dir))
    straight_config = run.config_from_args([*args, f"out={tmp_path / 'straight'}"])
    monkeypatch.setenv("MTL_VECTORS", str(tiny_data["vectors"]))
    _, straight = run.start(straight_config, progress=False)
    assert deterministic_summary(resumed) == deterministic_summary(straight)


def test_a_run_that_died_before_its_first_checkpoint_starts_again(tiny_data, tmp_path, capsys):
    diverging = ("lr=1e30", "max_grad_norm=0", "steps_squad=0", "checkpoint_every=1000", "max_steps=50")
    assert train_cli(tiny_data, tmp_path / "run", *diverging) == 2
    error = one_error_line(capsys)
    assert "no checkpoint was written yet" in error and "latest.pt" not in error
    # The same command again (with a sane lr) starts over in the same folder.
    assert train_cli(tiny_data, tmp_path / "run", "max_steps=4") == 0
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["global_step"] == 4


def test_resume_of_a_run_without_checkpoint_starts_it_again(tiny_data, tmp_path):
    run_dir, _ = start_run(
        tiny_data, tmp_path / "run", "checkpoint_every=1000", "eval_every=1000", killed_after=3
    )
    assert not (run_dir / "checkpoints").exists()
    _, resumed = run.resume(run_dir, progress=False)
    _, straight = start_run(tiny_data, tmp_path / "straight", "checkpoint_every=1000", "eval_every=1000")
    assert deterministic_summary(resumed) == deterministic_summary(straight)


def test_an_output_path_that_is_a_file_is_refused_before_work_starts(tiny_data, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert train_cli(tiny_data, blocker / "run") == 2
    assert re.fullmatch(
        rf"error: out={blocker}/run is not a folder \({blocker} is a file\): choose another out=",
        one_error_line(capsys),
    )
    code = main(
        ["build-classifsquad", f"out={blocker}", f"squad={FIXTURES / 'squad_tiny'}", "wandb=disabled"]
    )
    assert code == 2 and re.match(rf"error: out={blocker} is not a folder", one_error_line(capsys))
