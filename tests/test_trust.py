"""Issue 8: bad input never gives a wrong result, a crash never traps a run, errors are one line."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import torch

from dataset_builders.classifsquad import BuildConfig, build
from mtl.cli import COMMANDS, main
from mtl.errors import UserError
from mtl.train import checkpoint, run
from mtl.train.runlog import read_metrics
from mtl.wandb_file import by_kind, run_files

from .conftest import (
    FIXTURES,
    Killed,
    args_for,
    deterministic_summary,
    exported_weights,
    killed_after_step,
    one_error_line,
    start_run,
    wait_until_training,
)

TIMING = ("examples_per_s", "seconds")


def start(tiny_data, out, *extra, killed_after=None):
    return start_run(tiny_data, out, *extra, killed_after=killed_after)


def train_cli(tiny_data, out, *extra) -> int:
    return main(["train-multitask", *args_for(tiny_data, out, *extra)])


def copy_classifsquad(tiny_data, tmp_path) -> Path:
    folder = tmp_path / "classifsquad"
    shutil.copytree(tiny_data["classifsquad"], folder)
    return folder


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


# ---- 1. resume continues the same run, or refuses ------------------------------------------


def test_resume_refuses_a_rebuilt_classifsquad(tiny_data, tmp_path):
    folder = copy_classifsquad(tiny_data, tmp_path)
    run_dir, _ = start(tiny_data, tmp_path / "run", f"classifsquad={folder}", killed_after=7)
    rebuild(folder, tiny_data, seed=99)
    with pytest.raises(
        UserError, match=rf"cannot resume .*: the ClassifSQuAD data \({folder}\).* changed since"
    ):
        run.resume(run_dir, progress=False)


def test_resume_refuses_edited_snli(tiny_data, tmp_path):
    snli = tmp_path / "snli"
    shutil.copytree(FIXTURES / "snli_tiny", snli)
    run_dir, _ = start(tiny_data, tmp_path / "run", f"snli={snli}", killed_after=7)
    labels = (snli / "labels.train").read_text().splitlines()
    flipped = "neutral" if labels[0] != "neutral" else "entailment"
    (snli / "labels.train").write_text("\n".join([flipped, *labels[1:]]) + "\n")
    with pytest.raises(UserError, match=rf"cannot resume .*: the SNLI data \({snli}\).* changed since"):
        run.resume(run_dir, progress=False)


def test_resume_refuses_changed_vectors(tiny_data, tmp_path):
    vectors = tmp_path / "vectors.txt"
    lines = tiny_data["vectors"].read_text().splitlines()
    vectors.write_text("\n".join(lines) + "\n")
    run_dir, _ = start(tiny_data, tmp_path / "run", f"vectors={vectors}", killed_after=7)
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
    with killed_after_step(7), pytest.raises(Killed):
        run.start(config, progress=False)
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


# ---- 2. ClassifSQuAD: the trainer never offers to build into a folder that is not a build ----


def test_training_refuses_a_classifsquad_folder_that_is_not_a_build(tiny_data, tmp_path, capsys):
    squad = tmp_path / "squad"
    shutil.copytree(FIXTURES / "squad_tiny", squad)
    assert train_cli(tiny_data, tmp_path / "run", f"classifsquad={squad}") == 2
    error = one_error_line(capsys)
    assert re.match(
        rf"error: {squad} is not a ClassifSQuAD build \(it holds dev-v1.1.json.*\): point squad.source= at",
        error,
    )
    assert "overwrite" not in error
    assert sorted(p.name for p in squad.iterdir()) == sorted(
        p.name for p in (FIXTURES / "squad_tiny").iterdir()
    )


# ---- 3. settings that make no sense ---------------------------------------------------------


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("max_grad_norm=-1", r"max_grad_norm=-1.0 must be 0 or more \(or none\)"),
        ("lr=nan", "lr=nan must be a finite number"),
        ("temperature=nan", "temperature=nan must be a finite number"),
        ("lr=inf", "lr=inf must be a finite number"),
        ("seed=-1", "seed=-1 must be 0 or more"),
        ("eval_batch=0", "eval_batch=0 must be 1 or more"),
        ("batch_nli=0", "nli.batch=0 must be 1 or more"),
        ("dropout=1", r"dropout=1.0 must be in \[0, 1\)"),
        ("adam_patience=0", "patience=0 must be 1 or more"),
    ],
)
def test_senseless_training_settings_are_refused(tiny_data, tmp_path, capsys, arg, message):
    assert train_cli(tiny_data, tmp_path / "run", arg) == 2
    assert re.fullmatch(f"error: {message}", one_error_line(capsys))
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_float_key_of_every_command_refuses_non_finite_values(command):
    from mtl.config import _paths, apply_overrides

    config = COMMANDS[command].config()
    floats = [
        path
        for path, owner, field in _paths(config)
        if float in typing.get_args(typing.get_type_hints(type(owner))[field.name])
        or typing.get_type_hints(type(owner))[field.name] is float
    ]
    for path in floats:
        for value in ("nan", "inf", "-inf"):
            with pytest.raises(UserError, match="must be a finite number"):
                apply_overrides(config, [f"{path}={value}"])


@pytest.mark.parametrize(
    ("args", "message"), [(["tasks="], "tasks='' names no task"), (["tasks=,"], "tasks=',' names no task")]
)
def test_transfer_refuses_senseless_settings(capsys, args, message):
    assert main(["transfer", "baseline=glove-bow", *args]) == 2
    assert one_error_line(capsys).startswith(f"error: {message}")


# ---- 6. a run that never checkpointed can be started again ----------------------------------


def test_a_run_that_died_before_its_first_checkpoint_starts_again(tiny_data, tmp_path, capsys):
    diverging = ("lr=1e30", "max_grad_norm=0", "steps_squad=0", "checkpoint_every=1000", "max_steps=50")
    assert train_cli(tiny_data, tmp_path / "run", *diverging) == 2
    error = one_error_line(capsys)
    assert "no checkpoint was written yet" in error and "latest.pt" not in error
    # The same command again (with a sane lr) starts over in the same folder.
    assert train_cli(tiny_data, tmp_path / "run", "max_steps=4") == 0
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["global_step"] == 4


def test_resume_of_a_run_without_checkpoint_starts_it_again(tiny_data, tmp_path):
    run_dir, _ = start(
        tiny_data, tmp_path / "run", "checkpoint_every=1000", "eval_every=1000", killed_after=3
    )
    assert not (run_dir / "checkpoints").exists()
    _, resumed = run.resume(run_dir, progress=False)
    _, straight = start(tiny_data, tmp_path / "straight", "checkpoint_every=1000", "eval_every=1000")
    assert deterministic_summary(resumed) == deterministic_summary(straight)


# ---- 7. damaged checkpoints ---------------------------------------------------------------


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty"])
def test_a_damaged_latest_checkpoint_falls_back_to_the_one_before(tiny_data, tmp_path, damage):
    extra = ("dropout=0.2", "max_steps=17", "checkpoint_every=4")
    straight_dir, straight = start(tiny_data, tmp_path / "straight", *extra)
    cut_dir, _ = start(tiny_data, tmp_path / "cut", *extra, killed_after=9)
    latest = cut_dir / "checkpoints" / "latest.pt"
    assert checkpoint.load(latest)["state"]["global_step"] == 8
    assert checkpoint.load(checkpoint.previous_of(latest))["state"]["global_step"] == 5
    data = bytearray(latest.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        data[len(data) // 2] ^= 0xFF
    else:
        data = bytearray()
    latest.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match=r"checkpoint .*latest.pt is damaged .*using the one before it"):
        _, resumed = run.resume(cut_dir, progress=False)
    assert deterministic_summary(resumed) == deterministic_summary(straight)
    a, b = exported_weights(straight_dir), exported_weights(cut_dir)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_damaged_checkpoint_without_a_previous_one_is_one_line(tiny_data, tmp_path, capsys):
    run_dir, _ = start(tiny_data, tmp_path / "run", killed_after=6)
    latest = run_dir / "checkpoints" / "latest.pt"
    checkpoint.previous_of(latest).unlink(missing_ok=True)
    latest.write_bytes(latest.read_bytes()[:100])
    assert main(["train-multitask", f"resume={run_dir}"]) == 2
    assert re.match(
        r"error: checkpoint .*latest.pt is damaged \(truncated or corrupted", one_error_line(capsys)
    )


def test_a_truncated_encoder_is_one_line(tiny_data, tmp_path, capsys):
    import json

    from mtl import load_encoder

    run_dir, _ = start(tiny_data, tmp_path / "run", "max_steps=3")
    weights = run_dir / "encoder.safetensors"
    intact = weights.read_bytes()
    weights.write_bytes(intact[:-200])
    with pytest.raises(
        UserError, match=r"encoder.safetensors is damaged or not the one .*encoder.json was written with"
    ):
        load_encoder(run_dir)
    weights.write_bytes(intact)
    record = json.loads((run_dir / "encoder.json").read_text())
    (run_dir / "encoder.json").write_text(json.dumps({**record, "weights": "../elsewhere.safetensors"}))
    with pytest.raises(
        UserError, match=r"names '../elsewhere.safetensors' as its weights, which are not beside it"
    ):
        load_encoder(run_dir)
    (run_dir / "encoder.json").write_text("{")
    with pytest.raises(UserError, match=r"encoder .*encoder.json cannot be read"):
        load_encoder(run_dir)


def test_a_full_disk_while_checkpointing_is_one_line_and_keeps_the_last_checkpoint(
    tiny_data, tmp_path, capsys, monkeypatch
):
    run_dir, _ = start(tiny_data, tmp_path / "run", killed_after=6)
    before = (run_dir / "checkpoints" / "latest.pt").read_bytes()
    real_save = torch.save

    def full_disk(obj, path, *args, **kwargs):
        real_save(obj, path, *args, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", full_disk)
    assert main(["train-multitask", f"resume={run_dir}"]) == 2
    error = one_error_line(capsys)
    assert re.match(r"error: could not write checkpoint .*latest.pt: No space left on device", error)
    assert (run_dir / "checkpoints" / "latest.pt").read_bytes() == before
    assert not list((run_dir / "checkpoints").glob(".*partial"))


# ---- 9. W&B never ends a job ------------------------------------------------------------------


def test_an_unwritable_wandb_dir_does_not_end_a_build(tiny_data, tmp_path, capsys):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with pytest.warns(UserWarning, match="W&B call failed, continuing without it"):
        code = main(
            [
                "build-classifsquad",
                f"squad={FIXTURES / 'squad_tiny'}",
                f"vectors={tiny_data['vectors']}",
                f"out={tmp_path / 'out'}",
                "max_oov=100",
                "wandb=offline",
                f"wandb_dir={blocked / 'runs'}",
            ]
        )
    assert code == 0 and (tmp_path / "out" / "stats.json").is_file()


# ---- 10. one clear line instead of a traceback ------------------------------------------------


def write_snli(folder: Path, premises: bytes, labels: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev", "test"):
        (folder / f"s1.{split}").write_bytes(premises)
        (folder / f"s2.{split}").write_bytes(b"a dog .\nthe cat .\n")
        (folder / f"labels.{split}").write_text(labels)
    return folder


def test_snli_that_is_not_utf8_names_the_file_and_line(tiny_data, tmp_path, capsys):
    snli = write_snli(tmp_path / "snli", b"a man .\ncaf\xe9 .\n", "neutral\nentailment\n")
    assert train_cli(tiny_data, tmp_path / "run", f"snli={snli}") == 2
    assert re.fullmatch(
        rf"error: line 2 of SNLI file {snli}/s1.train is not UTF-8 .*: re-save the file as UTF-8",
        one_error_line(capsys),
    )


def test_snli_with_only_unlabelled_pairs_is_refused(tiny_data, tmp_path, capsys):
    snli = write_snli(tmp_path / "snli", b"a man .\na woman .\n", "-\n-\n")
    assert train_cli(tiny_data, tmp_path / "run", f"snli={snli}") == 2
    assert re.match(r"error: SNLI files .*train holds no labelled pair", one_error_line(capsys))


def test_a_deeply_nested_snli_jsonl_line_is_one_line(tiny_data, tmp_path, capsys):
    snli = tmp_path / "snli"
    snli.mkdir()
    for split in ("train", "dev", "test"):
        (snli / f"snli_1.0_{split}.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    assert train_cli(tiny_data, tmp_path / "run", f"snli={snli}") == 2
    assert re.match(
        r"error: line 1 of SNLI file .* is not an SNLI record: nested too deeply", one_error_line(capsys)
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda text: text[: len(text) // 2], r"config.json cannot be read \("),
        (lambda text: "[" * 100_000 + "]" * 100_000, r"config.json cannot be read \(nested too deeply\)"),
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
        (lambda text: "[1, 2]", r"config.json has no 'config' table"),
    ],
)
def test_a_damaged_or_hand_edited_config_json_is_one_line(tiny_data, tmp_path, capsys, edit, message):
    run_dir, _ = start(tiny_data, tmp_path / "run", killed_after=6)
    path = run_dir / "config.json"
    path.write_text(edit(path.read_text()))
    assert main(["train-multitask", f"resume={run_dir}"]) == 2
    assert re.search(message, one_error_line(capsys))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hidden = [1\n", r"preset file .*broken.toml is not valid TOML"),
        ("hiden = 8\n", r"preset file .*broken.toml: unknown key 'hiden': did you mean 'hidden'\?"),
        ("[nli]\nsteps = [8]\n", r"preset file .*broken.toml: 'nli' must hold plain key = value pairs"),
    ],
)
def test_a_broken_preset_names_its_file(tiny_data, tmp_path, capsys, monkeypatch, text, message):
    from mtl.train import presets

    monkeypatch.setattr(presets, "preset_dir", lambda: tmp_path)
    (tmp_path / "broken.toml").write_text(text)
    assert train_cli(tiny_data, tmp_path / "run", "preset=broken") == 2
    assert re.match(f"error: {message}", one_error_line(capsys))


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


def test_a_damaged_classifsquad_build_is_one_line(tiny_data, tmp_path, capsys):
    folder = copy_classifsquad(tiny_data, tmp_path)
    for arrow in (folder / "train").glob("*.arrow"):
        arrow.write_bytes(arrow.read_bytes()[:64])
    assert train_cli(tiny_data, tmp_path / "run", f"classifsquad={folder}") == 2
    assert re.match(
        rf"error: ClassifSQuAD folder {folder} is damaged \(.*\): rebuild it", one_error_line(capsys)
    )


# ---- 11. training rules as InferSent states them ----------------------------------------------


def test_adam_stops_at_its_second_evaluation_not_above_the_best(tiny_data, tmp_path):
    _, summary = start(
        tiny_data,
        tmp_path / "run",
        "optim=adam",
        "lr=0.05",
        "max_steps=none",
        "eval_every=5",
        "steps_squad=0",
    )
    assert summary["stop_reason"] == "patience"
    evaluations = [
        r["nli/dev/acc"] for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "nli/dev/acc" in r
    ]
    best, stalls = -1.0, 0
    for acc in evaluations:
        stalls += acc <= best
        best = max(best, acc)
    assert stalls == 2 and evaluations[-1] <= max(evaluations[:-1])


def test_sgd_divides_the_lr_when_dev_accuracy_is_not_above_the_best():
    from mtl.train.config import OptimConfig
    from mtl.train.lr_schedules import build_lr_schedule
    from mtl.train.state import TrainState

    optimizers = {"nli": torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)}
    schedule = build_lr_schedule(OptimConfig(optim="sgd", lr_schedule="infersent"), optimizers, "nli")
    state = TrainState.for_tasks(["nli"])
    lrs = []
    for acc in (0.5, 0.6, 0.55, 0.58, 0.61):  # the last value rule would not shrink at 0.58
        for task, improved in state.record_evaluation({"nli": acc}, "nli").items():
            schedule.after_evaluation(task, improved)
        lrs.append(schedule.lr("nli"))
    assert lrs == pytest.approx([0.1, 0.1, 0.02, 0.004, 0.004])
    assert state.best_dev == {"nli": 0.61} and state.stalls == 2


# ---- 13. Ctrl-C while the output is piped -------------------------------------------------------


@pytest.mark.parametrize("streams", ["stdout", "stdout and stderr"])
def test_ctrl_c_with_piped_output_checkpoints_and_says_how_to_resume(tiny_data, tmp_path, streams):
    args = args_for(
        tiny_data, tmp_path / "run", "max_steps=100000", "checkpoint_every=100000", "wandb=offline"
    )
    # `mtl ... | cat` or `mtl ... 2>&1 | cat`, in one process group, as a shell runs a pipeline;
    # Ctrl-C in a terminal signals the whole group, so `cat` dies and the pipe breaks.
    read_end, write_end = os.pipe()
    with open(tmp_path / "log", "w") as log:
        reader = subprocess.Popen(["cat"], stdin=read_end, stdout=log, process_group=0)
    trainer = subprocess.Popen(
        [sys.executable, "-m", "mtl", "train-multitask", *args],
        stdout=write_end,
        stderr=write_end if streams == "stdout and stderr" else subprocess.PIPE,
        process_group=reader.pid,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "WANDB_MODE"},  # wandb=offline below
    )
    os.close(read_end)
    os.close(write_end)
    wait_until_training(tmp_path / "run" / "metrics.jsonl", trainer)
    os.killpg(reader.pid, signal.SIGINT)
    _, err = trainer.communicate(timeout=120)
    reader.wait(timeout=10)
    assert trainer.returncode == 130, err
    if streams == "stdout":
        assert f"resume with `just train-multitask resume={tmp_path / 'run'}`" in err
    saved = checkpoint.load(tmp_path / "run" / "checkpoints" / "latest.pt")
    assert saved["state"]["global_step"] > 0
    (run_file,) = run_files(tmp_path / "run")  # W&B shows the run preempted (resumable), not failed
    records = by_kind(run_file)
    assert "preempting" in records and records["exit"][0].exit_code == 130


# ---- 5. transfer never destroys or mislabels results --------------------------------------------


def transfer(tiny_data, senteval, *args) -> int:
    return main(
        [
            "transfer",
            "mode=fast",
            f"data={senteval}",
            f"vectors={tiny_data['vectors']}",
            "wandb=disabled",
            *args,
        ]
    )


def test_transfer_writes_into_the_run_folder_of_a_checkpoint_path(tiny_data, senteval, tmp_path):
    run_dir, _ = start(tiny_data, tmp_path / "run", "max_steps=3")
    assert transfer(tiny_data, senteval, f"run={run_dir / 'encoder.json'}", "tasks=MR") == 0
    assert json.loads((run_dir / "transfer-fast.json").read_text())["results"].keys() == {"MR"}
    assert not Path("runs/baseline-None").exists()


def test_transfer_checks_every_task_before_the_first_runs(tiny_data, senteval, tmp_path, capsys):
    shutil.rmtree(senteval / "CR")
    out = tmp_path / "out"
    assert transfer(tiny_data, senteval, "baseline=glove-bow", "tasks=MR,CR", f"out={out}") == 2
    assert re.match(r"error: transfer data file .*CR/custrev.pos is missing", one_error_line(capsys))
    assert not out.exists()


def test_each_transfer_result_is_kept_as_soon_as_it_exists(tiny_data, senteval, tmp_path, monkeypatch):
    from mtl.eval.transfer import suite

    out = tmp_path / "out"
    real = suite.evaluate_task

    def interrupted_at_cr(task, *args):
        if task.name == "CR":
            raise KeyboardInterrupt
        return real(task, *args)

    monkeypatch.setattr(suite, "evaluate_task", interrupted_at_cr)
    assert transfer(tiny_data, senteval, "baseline=glove-bow", "tasks=MR,CR", f"out={out}") == 130
    report = json.loads((out / "transfer-fast.json").read_text())
    assert set(report["results"]) == {"MR"}
    # A later run of CR alone completes the same report instead of replacing it.
    monkeypatch.setattr(suite, "evaluate_task", real)
    assert transfer(tiny_data, senteval, "baseline=glove-bow", "tasks=CR", f"out={out}") == 0
    assert set(json.loads((out / "transfer-fast.json").read_text())["results"]) == {"MR", "CR"}


def test_other_protocols_and_poolings_write_their_own_reports(tiny_data, senteval, tmp_path):
    run_dir, _ = start(tiny_data, tmp_path / "run", "max_steps=3", "pooling=max+mean")
    assert transfer(tiny_data, senteval, f"run={run_dir}", "tasks=MR") == 0
    assert transfer(tiny_data, senteval, f"run={run_dir}", "tasks=MR", "pooling=mean") == 0
    fast = json.loads((run_dir / "transfer-fast.json").read_text())
    mean = json.loads((run_dir / "transfer-fast-pool-mean.json").read_text())
    assert fast["dim"] == 32 and fast["pooling"] is None  # hidden 8, both directions, max+mean
    assert mean["pooling"] == "mean" and mean["dim"] is None
    assert (run_dir / "transfer-fast-pool-mean.md").is_file()


def test_a_damaged_senteval_file_is_one_line(tiny_data, senteval, tmp_path, capsys):
    (senteval / "MR" / "rt-polarity.neg").unlink()
    (senteval / "MR" / "rt-polarity.neg").mkdir()  # unreadable as a file
    assert transfer(tiny_data, senteval, "baseline=glove-bow", "tasks=MR", f"out={tmp_path / 'out'}") == 2
    assert re.match(r"error: transfer data .*MR.* (is missing|cannot be read)", one_error_line(capsys))
