import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys

import datasets
import pytest
import torch

from mtl.cli import main
from mtl.errors import UserError
from mtl.formats import checkpoint
from mtl.runs import read_metrics
from mtl.tracking.wandb_file import by_kind, run_files
from mtl.train.config.presets import preset_names, preset_overrides
from mtl.train.loop import run

from .conftest import (
    FIXTURES,
    args_for,
    deterministic_summary,
    exported_weights,
    start_run,
    wait_until_training,
)

TIMING = ("examples_per_s", "seconds")


def error_lines(stderr: str) -> list[str]:
    """The lines our CLI printed as errors (progress bars share stderr)."""
    return [line for line in re.split(r"[\r\n]", stderr) if "error:" in line]


def without_timing(records):
    return [{k: v for k, v in r.items() if not k.endswith(TIMING)} for r in records]


@pytest.mark.parametrize(
    "encoder",
    ["bilstm", "bilstm2", "lstm", "transformer", "decomposable", "innerattention", "hconvnet", "gatedconv"],
)
def test_two_cycles_of_every_encoder(tiny_data, tmp_path, encoder):
    run_dir, summary = start_run(tiny_data, tmp_path / "run", f"encoder={encoder}")
    assert summary["global_step"] == 10 and summary["stop_reason"] == "max_steps"
    assert summary["steps/nli"] == 6 and summary["steps/squad"] == 4
    assert 0.0 <= summary["best/nli/test/acc"] <= 1.0
    for name in (
        "config.json",
        "metrics.jsonl",
        "summary.json",
        "encoder.json",
        "encoder.safetensors",
        "checkpoints/latest.pt",
        "checkpoints/best.pt",
    ):
        assert (run_dir / name).is_file(), name
    records = read_metrics(run_dir / "metrics.jsonl")
    evaluations = [r for r in records if r.get("phase/event") == "evaluation"]
    assert [r["global_step"] for r in evaluations] == [5, 10]
    assert all(0 <= r["squad/dev/acc"] <= 1 for r in evaluations)


def test_training_learns_the_tiny_nli_train_set(tiny_data, tmp_path):
    # 200 pairs, 10 epochs: the model must fit its training data well beyond chance.
    start_run(
        tiny_data,
        tmp_path / "run",
        "steps_squad=0",
        "max_steps=250",
        "eval_every=250",
        "optim=adam",
        "lr=0.01",
        "hidden=32",
        "head_hidden=32",
        "precision=fp32",
    )
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    accuracy = [r["nli/train/acc"] for r in records if "nli/train/acc" in r]
    assert sum(accuracy[:25]) / 25 < 0.45
    assert sum(accuracy[-25:]) / 25 > 0.55


def test_each_task_keeps_its_batch_size_and_its_place_in_its_data(tiny_data, tmp_path):
    run_dir, _ = start_run(tiny_data, tmp_path / "run")
    ends = [r for r in read_metrics(run_dir / "metrics.jsonl") if r.get("phase/event") == "block_end"]
    assert [(r["phase/task"], r["phase/steps"], r["phase/examples"]) for r in ends] == [
        ("nli", 3, 24),
        ("squad", 2, 8),
        ("nli", 3, 24),
        ("squad", 2, 8),
    ]
    assert [r["phase/block"] for r in ends] == [0, 1, 2, 3]
    saved = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    # 200 NLI pairs / 8 = 25 batches an epoch: 6 steps in, the second block went on from the first.
    assert saved["streams"]["nli"] == {"epoch": 0, "position": 6}
    squad_batches = -(-len(datasets.load_from_disk(str(tiny_data["classifsquad"]))["train"]) // 4)
    squad = saved["streams"]["squad"]
    assert squad["epoch"] * squad_batches + squad["position"] == 4


def test_single_task_runs(tiny_data, tmp_path):
    _, nli_only = start_run(tiny_data, tmp_path / "nli", "steps_squad=0", "max_steps=4")
    assert nli_only["steps/nli"] == 4 and "steps/squad" not in nli_only
    assert "params/squad_head" not in nli_only
    _, squad_only = start_run(tiny_data, tmp_path / "squad", "steps_nli=0", "max_steps=4")
    assert squad_only["steps/squad"] == 4 and "best/squad/dev/acc" in squad_only


def test_killed_and_resumed_run_equals_an_uninterrupted_one(tiny_data, tmp_path):
    extra = ("dropout=0.2", "max_steps=17", "checkpoint_every=4")  # dropout: the RNG state must resume too
    straight_dir, straight = start_run(tiny_data, tmp_path / "straight", *extra)
    # Killed after step 7: steps 6 and 7 were trained and logged, but the last checkpoint is from
    # the evaluation that ends the first cycle, at step 5.
    cut_dir, _ = start_run(tiny_data, tmp_path / "cut", *extra, killed_after=7)
    saved = torch.load(cut_dir / "checkpoints" / "latest.pt", weights_only=True)
    assert saved["state"]["global_step"] == 5
    assert max(r["global_step"] for r in read_metrics(cut_dir / "metrics.jsonl")) == 7
    _, resumed = run.resume(cut_dir, progress=False)
    assert deterministic_summary(resumed) == deterministic_summary(straight)
    pairs = {
        "encoder": (exported_weights(straight_dir), exported_weights(cut_dir)),
        "best.pt": tuple(
            torch.load(d / "checkpoints/best.pt", weights_only=True)["model"] for d in (straight_dir, cut_dir)
        ),
    }
    for name, (a, b) in pairs.items():
        assert a.keys() == b.keys()
        assert all(torch.equal(a[k], b[k]) for k in a), name
    assert without_timing(read_metrics(cut_dir / "metrics.jsonl")) == without_timing(
        read_metrics(straight_dir / "metrics.jsonl")
    )


def test_prefetching_changes_no_batch_even_across_a_resume(tiny_data, tmp_path, monkeypatch):
    from mtl.train.step.prefetch import Prefetcher

    taken = []
    real_take = Prefetcher.take

    def take(self, task, rows):
        hits = self.hits
        prepared = real_take(self, task, rows)
        taken.append(self.hits > hits)
        return prepared

    monkeypatch.setattr(Prefetcher, "take", take)
    # Blocks of 7 and 5 steps, evaluations every 20, an NLI epoch ends at step 25, a kill at 33.
    extra = (
        "max_steps=70",
        "checkpoint_every=6",
        "eval_every=20",
        "steps_nli=7",
        "steps_squad=5",
        "dropout=0.2",
    )
    plain_dir, plain = start_run(tiny_data, tmp_path / "plain", *extra, "prefetch=off")
    assert taken == []
    cut_dir, _ = start_run(tiny_data, tmp_path / "cut", *extra, "prefetch=on", killed_after=33)
    _, resumed = run.resume(cut_dir, progress=False)
    assert len(taken) == 33 + (70 - 30)  # every step of the run (resumed from its checkpoint at 30)
    assert taken[0] is False and sum(taken) >= len(taken) - 3  # ready in time but after a (re)start
    assert deterministic_summary(resumed) == deterministic_summary(plain)
    a, b = exported_weights(plain_dir), exported_weights(cut_dir)
    assert all(torch.equal(a[k], b[k]) for k in a)
    a, b = (torch.load(d / "checkpoints/best.pt", weights_only=True)["model"] for d in (plain_dir, cut_dir))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert without_timing(read_metrics(cut_dir / "metrics.jsonl")) == without_timing(
        read_metrics(plain_dir / "metrics.jsonl")
    )


def test_resume_crosses_block_and_epoch_boundaries(tiny_data, tmp_path):
    extra = ("max_steps=70", "checkpoint_every=6", "eval_every=20", "steps_nli=7", "steps_squad=5")
    straight_dir, straight = start_run(tiny_data, tmp_path / "straight", *extra)
    cut_dir, _ = start_run(tiny_data, tmp_path / "cut", *extra, killed_after=33)  # NLI epoch 1 ends at 25
    _, resumed = run.resume(cut_dir, progress=False)
    assert deterministic_summary(resumed) == deterministic_summary(straight)
    assert without_timing(read_metrics(cut_dir / "metrics.jsonl")) == without_timing(
        read_metrics(straight_dir / "metrics.jsonl")
    )


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tiny_data, tmp_path, capsys):
    code = main(
        [
            "train-multitask",
            *args_for(
                tiny_data,
                tmp_path / "run",
                "lr=1e30",
                "max_grad_norm=0",
                "checkpoint_every=1",
                "max_steps=50",
                "steps_squad=0",
            ),
        ]
    )
    (err,) = error_lines(capsys.readouterr().err)
    assert code == 2
    assert err.startswith("error: the nli loss became nan at step ")
    step = int(err.split("at step ")[1].split()[0])
    assert f"the last good checkpoint (step {step - 1}) is kept in" in err
    saved = torch.load(tmp_path / "run" / "checkpoints" / "latest.pt", weights_only=True)
    assert saved["state"]["global_step"] == step - 1
    assert all(torch.isfinite(v).all() for v in saved["model"].values() if v.is_floating_point())
    assert main(["report", str(tmp_path / "run"), f"out={tmp_path / 'report.html'}"]) == 0
    assert "<td>diverged</td>" in (tmp_path / "report.html").read_text()  # not "not finished"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["steps_nli=0", "steps_squad=0"], r"every task was left out \(steps_<task>=0\): at least one"),
        (["batch_squad=0"], "squad.batch=0 must be 1 or more"),
        (["step_nli=5"], "unknown key 'step_nli': did you mean 'steps_nli'?"),
        (["schedule=random"], "schedule='random' is not valid: choose one of blocks, round_robin"),
        (["preset=nope"], "unknown preset 'nope': choose one of cpu-small"),
        (["preset=cpu-smal"], "unknown preset 'cpu-smal': did you mean cpu-small or "),
        (
            ["nli_train_split=train_big"],
            "nli: split 'train_big' not found in .*available: dev, test, train: set nli.train_split=",
        ),
        (["snli=/nonexistent/snli"], "nli: folder /nonexistent/snli does not exist: point nli.source=PATH"),
        # a build not made yet: said at the start, before any data is read (a SLURM study: before submitting)
        (["classifsquad=/nonexistent/cs"], "ClassifSQuAD folder /nonexistent/cs does not exist: build it"),
        (["vectors=/nonexistent/v.txt"], "vectors file /nonexistent/v.txt does not"),
    ],
)
def test_bad_settings_fail_with_one_line(tiny_data, tmp_path, capsys, args, message):
    code = main(["train-multitask", *args_for(tiny_data, tmp_path / "run", *args)])
    (err,) = error_lines(capsys.readouterr().err)
    assert code == 2
    assert re.match(f"error: {message}", err), err


def test_resume_refuses_changes_and_finished_runs(tiny_data, tmp_path):
    run_dir, _ = start_run(tiny_data, tmp_path / "run", "max_steps=3")
    with pytest.raises(UserError, match="already finished"):
        run.resume(run_dir, progress=False)
    with pytest.raises(UserError, match="only device= and wandb= may change, not 'lr=1'"):
        run.resume(run_dir, overrides=["lr=1"], progress=False)
    with pytest.raises(UserError, match="run folder .* already exists: choose another out= or resume="):
        start_run(tiny_data, run_dir)
    with pytest.raises(UserError, match="is not a run folder"):
        run.resume(tmp_path, progress=False)


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_validates(name):
    config = run.config_from_args([f"preset={name}"])
    main_task = next(iter(config.tasks))
    config = run.config_from_args([f"preset={name}", f"{main_task}.steps=7"])
    assert config.run.name == name and config.tasks[main_task].steps == 7
    assert preset_overrides(name)


def test_a_presets_task_file_is_found_beside_it_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = run.config_from_args(["preset=infersent-sst"])
    assert list(config.tasks) == ["sst"] and config.tasks["sst"].display == "SST-2"


@pytest.mark.parametrize("name", ["paper-multitask-lstm2048", "paper-transformer", "paper-decomposable"])
def test_table_1_presets_train_at_a_small_size(tiny_data, tmp_path, name):
    # The preset first, then tiny sizes over it (args_for's hidden=8, ...): the preset's own
    # choices (encoder, head, dropout, optimizer) are what runs.
    _, summary = start_run(
        tiny_data, tmp_path / "run", f"preset={name}", "max_steps=2", "hidden=8", "head_hidden=8"
    )
    assert summary["global_step"] == 2 and summary["stop_reason"] == "max_steps"


@pytest.mark.parametrize(
    ("encoder", "bucket"), [("transformer", "true"), ("bilstm", "true"), ("bilstm", "false")]
)
def test_bf16_training_on_cpu_resumes_exactly(tiny_data, tmp_path, encoder, bucket):
    from mtl.models.precision import bf16_supported

    if encoder == "bilstm" and not bf16_supported(torch.device("cpu")):
        pytest.skip("this CPU has no native bf16 (AVX512-BF16 or AMX), which a bf16 LSTM needs")
    extra = (
        f"encoder={encoder}",
        "precision=bf16",
        f"bucket={bucket}",
        "dropout=0.2",
        "max_steps=12",
        "checkpoint_every=4",
    )
    straight_dir, straight = start_run(tiny_data, tmp_path / "straight", *extra)
    cut_dir, _ = start_run(tiny_data, tmp_path / "cut", *extra, killed_after=7)
    _, resumed = run.resume(cut_dir, progress=False)
    assert deterministic_summary(resumed) == deterministic_summary(straight)
    a = exported_weights(straight_dir)
    b = exported_weights(cut_dir)
    assert all(torch.equal(a[k], b[k]) for k in a)
    recorded = json.loads((straight_dir / "config.json").read_text())["config"]
    assert recorded["run"]["precision"] == "bf16" and recorded["schedule"]["bucket"] == (bucket == "true")
    losses = [
        r["nli/train/loss"] for r in read_metrics(straight_dir / "metrics.jsonl") if "nli/train/loss" in r
    ]
    assert all(math.isfinite(loss) for loss in losses)


def test_auto_precision_keeps_lstms_in_fp32_on_cuda_only(monkeypatch):
    from mtl.models import precision
    from mtl.models.precision import resolve_precision

    monkeypatch.setattr(precision, "bf16_supported", lambda device: True)  # a GPU with bf16
    assert resolve_precision("auto", torch.device("cuda"), "transformer") == "bf16"
    cpu = torch.device("cpu")
    for encoder in ("bilstm", "bilstm2", "lstm"):
        assert resolve_precision("auto", torch.device("cuda"), encoder) == "fp32"  # cuDNN: TF32 already
        assert resolve_precision("auto", cpu, encoder) == resolve_precision("auto", cpu, "transformer")
        assert resolve_precision("fp16", torch.device("cuda"), encoder) == "fp16"  # asked for: kept


def test_auto_precision_is_recorded_as_what_it_resolved_to(tiny_data, tmp_path):
    from mtl.models.precision import resolve_precision

    run_dir, _ = start_run(tiny_data, tmp_path / "run", "max_steps=2", "device=cpu")
    recorded = json.loads((run_dir / "config.json").read_text())["config"]["run"]["precision"]
    assert recorded == resolve_precision("auto", torch.device("cpu")) and recorded in ("bf16", "fp32")


def test_training_tokenizes_as_a_paper_build_when_asked(tiny_data, tmp_path):
    from mtl.eval.loading import load_encoder

    run_dir, summary = start_run(tiny_data, tmp_path / "run", "tokenizer=treebank", "max_steps=2")
    assert summary["global_step"] == 2
    encoder = load_encoder(run_dir, device="cpu")
    assert encoder.tokenizer("A well-known case") == ["a", "well-known", "case"]  # spaCy splits the hyphen


def test_a_20000_word_sentence_is_cut_to_max_tokens_at_read_time(tiny_data, tmp_path):
    from mtl.train.config.inputs import resolve_inputs
    from mtl.train.data.training_data import prepare

    snli = tmp_path / "snli"
    shutil.copytree(FIXTURES / "snli_tiny", snli)
    lines = (snli / "s1.train").read_text().splitlines()
    lines[0] = " ".join(["dog"] * 20_000)  # a step would walk 20,000 positions, minutes on a CPU
    (snli / "s1.train").write_text("\n".join(lines) + "\n")
    config = run.config_from_args(args_for(tiny_data, tmp_path / "run", f"snli={snli}", "max_tokens=200"))
    data = prepare(resolve_inputs(config), progress=False)
    assert data.table.lengths.max() == 200 and data.table.truncated == 1  # the fixtures stay under 200
    assert data.statistics()["truncated_sentences"] == 1


def test_a_transformer_refuses_more_tokens_than_its_positions(tiny_data, tmp_path):
    with pytest.raises(UserError, match="max_tokens=2000 is more than encoder=transformer's 1024 positions"):
        run.config_from_args(args_for(tiny_data, tmp_path / "run", "encoder=transformer", "max_tokens=2000"))


def test_adam_stops_at_its_second_evaluation_not_above_the_best(tiny_data, tmp_path):
    _, summary = start_run(
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


def test_sgd_divides_the_lr_when_an_epochs_dev_accuracy_is_not_above_the_best():
    from mtl.train.config.train_config import OptimConfig
    from mtl.train.optim.lr_schedules import build_lr_schedule
    from mtl.train.run.state import TrainState

    optimizers = {"nli": torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)}
    schedule = build_lr_schedule(OptimConfig(optim="sgd", lr_schedule="infersent"), optimizers, "nli")
    state = TrainState.for_tasks(["nli"])
    lrs = []
    for acc in (0.5, 0.6, 0.55, 0.58, 0.61):  # the last value rule would not shrink at 0.58
        schedule.after_epoch_dev("nli", state.record_epoch_dev("nli", acc))
        schedule.after_evaluation("nli", False)  # an evaluation between epoch ends decides nothing
        lrs.append(schedule.lr("nli"))
    assert lrs == pytest.approx([0.1, 0.1, 0.02, 0.004, 0.004])
    assert state.epoch_best == {"nli": 0.61}


def test_infersents_lr_trajectory_does_not_depend_on_eval_every(tiny_data, tmp_path):
    """InferSent decides its shrink once per epoch on the epoch's dev accuracy: evaluating every
    step (eval_every=1) or rarely trains to the same lrs and losses (an evaluation changes no
    training bit), each shrink at an epoch end of the task."""
    trajectories = {}
    for every in (1, 7):
        out = tmp_path / f"every{every}"
        start_run(
            tiny_data, out, "optim=sgd", "lr_schedule=infersent", "lr=0.5", "max_steps=40", f"eval_every={every}",
            "precision=fp32", "stop=max_steps",
        )  # fmt: skip
        rows = read_metrics(out / "metrics.jsonl")
        trajectories[every] = [
            (r["global_step"], r.get("nli/lr"), r.get("squad/lr"), r.get("nli/train/loss"))
            for r in rows
            if "nli/lr" in r or "squad/lr" in r
        ]
        ends = [r for r in rows if r.get("phase/event") == "epoch_end" and r.get("phase/task") == "squad"]
        assert ends and all("phase/dev" in r for r in ends)
    assert trajectories[1] == trajectories[7]
    lrs = [lr for _, _, lr, _ in trajectories[1] if lr is not None]
    assert min(lrs) < 0.5 * 0.99**3  # a shrink happened (tiny data: dev accuracy stalls)


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
    assert "preempting" in records and records["exit"][0]["exit_code"] == 130


@pytest.mark.parametrize("schedule", ["sequential", "two_stage"])
def test_a_staged_schedule_resumes_exactly(tiny_data, tmp_path, schedule):
    """The regimes' schedules are functions of the step and the run's length: a run killed in its
    first stage and resumed crosses into the second as the straight run did."""
    extra = (f"schedule={schedule}", "max_steps=12", "checkpoint_every=3")
    straight_dir, straight = start_run(tiny_data, tmp_path / "straight", *extra)
    cut_dir, _ = start_run(tiny_data, tmp_path / "cut", *extra, killed_after=4)
    _, resumed = run.resume(cut_dir, progress=False)
    assert deterministic_summary(resumed) == deterministic_summary(straight)
    a, b = exported_weights(straight_dir), exported_weights(cut_dir)
    assert all(torch.equal(a[k], b[k]) for k in a)
