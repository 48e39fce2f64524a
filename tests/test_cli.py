import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from tqdm import tqdm

from mtl.analysis import report as reports
from mtl.cli import COMMANDS, main
from mtl.config import describe_keys, paths_and_keys
from mtl.models.precision import bf16_supported
from mtl.runtime.ranks import rank_says
from mtl.tracking.wandb_file import by_kind, run_files

from .conftest import FIXTURES, args_for, one_error_line, start_run, write_glove

ROOT = Path(__file__).parent.parent


@pytest.fixture
def vectors(tmp_path):
    from dataset_builders.classifsquad import squad_texts
    from mtl.data.squad import load_squad
    from mtl.text.tokenizer import Tokenizer

    texts = [t for split in load_squad(str(FIXTURES / "squad_tiny")).values() for t in squad_texts(split)]
    return write_glove(tmp_path / "tiny.txt", sorted({w for ts in Tokenizer().tokenize(texts) for w in ts}))


def test_build_command_prints_a_summary(tmp_path, vectors, capsys):
    code = main(
        [
            "build-classifsquad",
            f"squad={FIXTURES / 'squad_tiny'}",
            f"vectors={vectors}",
            f"out={tmp_path / 'out'}",
            "scope=paragraph",
            "wandb=disabled",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert f"ClassifSQuAD written to {tmp_path / 'out'}" in printed
    assert "scope paragraph" in printed
    assert "dropped questions: question_oov 0, answer_oov 0, answer_too_short" in printed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["scop=article"], "error: unknown key 'scop': did you mean 'scope'?"),
        (["squad=/nonexistent/squad"], "error: SQuAD file /nonexistent/squad/train-v1.1.json does not exist"),
        (["vectors=/nonexistent/glove.zip"], "error: vectors file /nonexistent/glove.zip does not exist"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    squad = [] if any(a.startswith("squad=") for a in args) else [f"squad={FIXTURES / 'squad_tiny'}"]
    code = main(["build-classifsquad", f"out={tmp_path / 'out'}", *squad, *args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(message)
    assert err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_unknown_command_shows_usage(capsys):
    assert main(["build-everything"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: mtl COMMAND [key=value ...]")
    assert all(f"  {name} " in err for name in COMMANDS)
    assert err.splitlines()[-1] == "error: unknown command 'build-everything': the commands are listed above"


@pytest.mark.parametrize(
    "typo, meant", [("trian", "train-multitask"), ("tarnsfer", "transfer"), ("bench-trian", "bench-train")]
)
def test_a_misspelt_command_is_named_with_the_one_meant(typo, meant, capsys):
    assert main([typo]) == 2
    assert (
        capsys.readouterr().err.splitlines()[-1] == f"error: unknown command {typo!r}: did you mean {meant}?"
    )


@pytest.mark.parametrize("name", list(COMMANDS))
@pytest.mark.parametrize("form", ["--help", "help", "-h"])
def test_help_lists_every_key_with_its_default(name, form, capsys):
    argv = [form, name] if form == "help" else [name, "lr=1", form]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: just {name} [key=value ...]")
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("  ") and "=" in line]
    keys = {key for key, _, _ in describe_keys(COMMANDS[name].config_class()()) if not key.endswith(".kind")}
    assert {row.partition("=")[0] for row in rows} >= keys


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_key_of_every_command_says_what_it_means(name):
    """A key's meaning is its config field's inline comment: a field without one shows its default
    and nothing else (or its choices only) in --help."""
    from mtl.cli import command_help

    bare = []
    for line in command_help(name).splitlines():
        if not line.startswith("  ") or "=" not in line.split()[0]:
            continue
        meaning = re.sub(
            r"\[[^\]]*\]$", "", line.split(maxsplit=1)[1] if len(line.split()) > 1 else ""
        ).strip()
        if not meaning:
            bare.append(line.split()[0])
    assert not bare, f"keys of {name} without a meaning: {bare}"


def test_help_explains_the_keys(capsys):
    main(["train-multitask", "--help"])
    out = capsys.readouterr().out
    assert re.search(r"^  patience=2 +stop=patience: stop at this many evaluations", out, re.MULTILINE)
    assert re.search(r"^  tasks=nli,squad +the run's tasks, in order", out, re.MULTILINE)
    assert re.search(r"^  nli.steps=1000 +NLI steps per block", out, re.MULTILINE)
    assert re.search(r"^  squad.batch=128 +ClassifSQuAD triples per step", out, re.MULTILINE)
    assert re.search(r"^  max_grad_norm=none +clip the gradient norm", out, re.MULTILINE)
    assert re.search(r"^  resume=none +continue runs/<run>", out, re.MULTILINE)


def test_a_named_studys_help_is_its_own(capsys):
    """`just study compare-batches --help` once gave the study command's generic help: a study
    without a command of its own shows its summary, baseline and keys; one with a command, that
    command's help; an unknown name is one line."""
    assert main(["study", "compare-batches", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "usage: just study compare-batches [key=value ...]\nin-batch ranking over several sources"
    )
    assert "judged against homogeneous." in out
    assert re.search(r"^  budget=steps:1000 +what every run trains", out, re.MULTILINE)
    assert re.search(r"^  KEY=none +any train-multitask key", out, re.MULTILINE)
    assert main(["study", "versus-single", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: just versus-single [key=value ...]")
    assert main(["study", "nosuch", "--help"]) == 2
    assert "unknown study 'nosuch'" in capsys.readouterr().err


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_key_of_every_command_says_what_it_does(name, capsys):
    main([name, "--help"])
    keys = [line for line in capsys.readouterr().out.splitlines() if re.match(r"^  [a-z_][\w.]*=", line)]
    unexplained = [line.strip() for line in keys if len(line.strip().split(None, 1)) < 2]
    assert not unexplained, unexplained


def test_build_is_recorded_in_an_offline_wandb_run(tmp_path, vectors, capsys):
    assert (
        main(
            [
                "build-classifsquad",
                f"squad={FIXTURES / 'squad_tiny'}",
                f"vectors={vectors}",
                f"out={tmp_path / 'out'}",
                "wandb=offline",
                f"wandb_dir={tmp_path / 'runs'}",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "build ClassifSQuAD: 100%|██████████| 5/5" in err  # read, tokenize, vectors, 2 splits
    assert "W&B offline run in" in err and "wandb sync" in err
    (run_file,) = run_files(tmp_path / "runs")
    records = by_kind(run_file)
    (run,) = records["run"]
    assert run["job_type"] == "build-dataset"
    config = run["config"]["update"]
    assert config["scope"] == "article" and config["min_answer_tokens"] == 5
    summary = {key: value for record in records["summary"] for key, value in record.get("update", {}).items()}
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert summary["train/examples"] == stats["splits"]["train"]["examples"]
    assert summary["validation/dropped_questions/answer_too_short"] > 0
    artifacts = {(a["name"], a["type"]) for a in records["artifact"]}
    assert ("classifsquad", "dataset") in artifacts
    assert any(kind == "run_table" and name.endswith("samples") for name, kind in artifacts)
    # Started before the work, named, with its resolved inputs and the vectors' fingerprint.
    assert run["display_name"] == "build-classifsquad-out" and "scope" not in run["notes"]
    updates = {
        key: value for record in records.get("config", []) for key, value in record.get("update", {}).items()
    }
    inputs = {**config["inputs"], **updates.get("inputs", {})}
    assert inputs["squad"] == str(FIXTURES / "squad_tiny") and len(inputs["vectors_sha256"]) == 64
    stages = [h["item"]["build/stage"] for h in records["history"] if "build/stage" in h["item"]]
    assert stages == [1, 2, 3, 4]


def test_the_build_samples_one_triple_of_randomly_drawn_questions():
    from dataset_builders.classifsquad import SAMPLE_ROWS, sample_rows

    ids = [f"q{i // 4}" for i in range(400)]  # 100 questions of 4 triples each
    splits = {
        "train": {"question_id": ids, "question": ids, "answer1": ids, "answer2": ids, "label": [1] * 400}
    }
    rows = sample_rows(splits, seed=3)
    questions = [row[1] for row in rows]
    assert len(questions) == len(set(questions)) == SAMPLE_ROWS
    assert questions != [f"q{i}" for i in range(SAMPLE_ROWS)] and rows == sample_rows(splits, seed=3)


def test_build_presets_come_first_and_keys_override_them(tmp_path, vectors, capsys):
    common = [f"squad={FIXTURES / 'squad_tiny'}", f"vectors={vectors}", "wandb=disabled"]
    args = [
        "build-classifsquad",
        "preset=classifsquad-paper",
        *common,
        f"out={tmp_path / 'out'}",
        "max_oov=3",
    ]
    assert main(args) == 0
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["config"]["rules"] == "original" and stats["config"]["max_oov"] == 3
    assert stats["tokenizer"].startswith("nltk")
    assert main(["build-classifsquad", "preset=classifsquad-papr", *common, f"out={tmp_path / 'x'}"]) == 2
    assert "did you mean classifsquad-paper?" in capsys.readouterr().err


def test_a_preset_and_a_sweep_can_be_given_by_path(tmp_path, capsys):
    mine = tmp_path / "mine.toml"
    mine.write_text('encoder = "gru"\nhidden = 24\n[nli]\nsteps = 7\n')
    assert main(["train-multitask", f"preset={mine}", "hidden=32", "--print-config"]) == 0
    config = json.loads(capsys.readouterr().out)
    assert (config["model"]["encoder"], config["model"]["hidden"], config["tasks"]["nli"]["steps"]) == (
        "gru",
        32,
        7,
    )
    assert config["run"]["name"] == "mine"  # the file's stem names its runs, as a preset's name does
    grid = tmp_path / "ratio.toml"
    grid.write_text("steps_nli = [250, 500]\nsteps_squad = 100\n")
    assert main(["sweep", str(grid), f"preset={mine}", "--print-config"]) == 0
    members = json.loads(capsys.readouterr().out)
    assert {name: m["tasks"]["nli"]["steps"] for name, m in members.items()} == {
        "steps_nli250": 250,
        "steps_nli500": 500,
    }
    assert {m["run"]["group"] for m in members.values()} == {"ratio"}
    assert {m["model"]["encoder"] for m in members.values()} == {"gru"}
    assert main(["train-multitask", f"preset={tmp_path / 'missing.toml'}", "--print-config"]) == 2
    assert re.fullmatch(
        r"error: preset file \S+missing.toml does not exist: give a TOML file.*\n", capsys.readouterr().err
    )


def test_print_config_shows_presets_keys_and_a_resumed_runs_record(tmp_path, capsys):
    assert main(["build-classifsquad", "preset=classifsquad-paper", "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["tokenizer"] == "treebank"
    assert main(["train-distributed", "2", "preset=cpu-small", "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["run"]["name"] == "cpu-small"
    assert not (tmp_path / "runs").exists()  # nothing ran
    assert main(["transfer", "tasks=MR", "mode=fastt", "--print-config"]) == 2
    assert "mode='fastt' is not valid" in capsys.readouterr().err


@pytest.mark.parametrize(
    "study", ["versus-single", "mixture-search", "train-groups", "affinity-check", "compare-balancers"]
)
def test_a_studys_print_config_shows_its_own_keys_and_its_runs_training_configuration(study, capsys):
    args = [
        study,
        "preset=cpu-small",
        "hidden=64",
        "seeds=2",
        "launcher=slurm",
        "slurm.time=30",
        "--print-config",
    ]
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["study"]["seeds"] == 2 and printed["study"]["slurm"]["time"] == 30
    assert printed["training"]["model"]["hidden"] == 64 and printed["training"]["run"]["name"] == "cpu-small"
    assert main([study, "hiden=64", "--print-config"]) == 2
    assert "unknown key 'hiden': did you mean 'hidden'?" in capsys.readouterr().err


def test_print_config_shows_the_values_a_run_resolves_from_auto(capsys):
    assert main(["train-multitask", "device=cpu", "--print-config"]) == 0
    config = json.loads(capsys.readouterr().out)
    assert (config["optim"]["optim"], config["optim"]["lr"], config["optim"]["lr_schedule"]) == (
        "sgd",
        0.1,
        "infersent",
    )
    # auto: bf16 on a CPU that computes it natively (AVX512-BF16 or AMX), else fp32
    native = bf16_supported(torch.device("cpu"))
    assert (config["run"]["precision"], config["run"]["checkpoint_every"]) == (
        "bf16" if native else "fp32",
        500,
    )
    # One epoch of the main task's data decides it, unknown until the data is read.
    assert main(["train-multitask", "device=cpu", "encoder=hf", "--print-config"]) == 0
    optim = json.loads(capsys.readouterr().out)["optim"]
    assert (optim["optim"], optim["lr_schedule"], optim["max_steps"], optim["warmup_steps"]) == (
        "adamw",
        "linear",
        None,
        None,
    )


def test_print_config_shows_the_data_paths_a_run_records_and_says_what_is_missing(
    tiny_data, tmp_path, capsys
):
    args = [a for a in args_for(tiny_data, tmp_path / "run") if not a.startswith(("snli=", "classifsquad="))]
    snli = tmp_path / "snli"
    snli.symlink_to(FIXTURES / "snli_tiny")
    assert (
        main(
            [
                "train-multitask",
                *args,
                f"snli={snli}",
                f"classifsquad={tiny_data['classifsquad']}",
                "--print-config",
            ]
        )
        == 0
    )
    config = json.loads(capsys.readouterr().out)
    assert config["tasks"]["nli"]["source"] == str((FIXTURES / "snli_tiny").resolve())  # found, not null
    assert config["tasks"]["squad"]["source"] == str(tiny_data["classifsquad"].resolve())
    assert config["data"]["vectors"] == str(Path(tiny_data["vectors"]).resolve())
    # a build not made yet: said, and the rest printed as given
    assert (
        main(
            ["train-multitask", *args, f"snli={snli}", f"classifsquad={tmp_path / 'none'}", "--print-config"]
        )
        == 0
    )
    printed = capsys.readouterr()
    assert printed.err.splitlines()[-1].startswith(
        f"note: ClassifSQuAD folder {tmp_path / 'none'} does not exist"
    )
    assert json.loads(printed.out)["tasks"]["squad"]["source"] == str(tmp_path / "none")


def test_help_lists_the_choices_of_a_key(capsys):
    assert main(["train-multitask", "--help"]) == 0
    out = capsys.readouterr().out
    assert re.search(
        r"^  encoder=bilstm +the shared encoder.*\[bilstm \| bilstm2 \| bow \| decomposable \| gatedconv \| gru \|",
        out,
        re.M,
    )
    assert re.search(r"^  wandb_checkpoints=best .*\[none \| best \| all\]$", out, re.M)


def test_train_distributed_help_is_help_not_a_launch():
    done = subprocess.run(
        ["just", "train-distributed", "--help"], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0 and done.stdout.startswith("usage: just train-distributed")
    assert "Traceback" not in done.stderr + done.stdout


def test_bars_are_unicode_through_the_unbreakable_stream():
    import io

    from tqdm import tqdm

    from mtl.console import Unbreakable

    terminal = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with tqdm(total=2, file=Unbreakable(terminal)) as bar:
        assert not bar.ascii


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


def test_just_adds_no_line_to_an_error_of_mtl(tmp_path):
    done = subprocess.run(
        ["just", "build-classifsquad", f"squad={tmp_path / 'nowhere'}", f"out={tmp_path / 'out'}"],
        capture_output=True, text=True,
        timeout=120, cwd=ROOT,
    )  # fmt: skip
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: SQuAD file"), lines


def test_help_into_a_closed_pipe_is_no_traceback():
    reader, writer = os.pipe()
    os.close(reader)  # like `| head` that has already left: every write fails with EPIPE
    done = subprocess.run(
        [sys.executable, "-m", "mtl", "train-multitask", "--help"], stdout=writer, capture_output=False,
        stderr=subprocess.PIPE, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    os.close(writer)
    assert done.returncode == 141 and "Traceback" not in done.stderr, done.stderr


def test_no_commands_help_imports_a_heavy_library():
    # `--help` imported each command's code with its config: 3-5 s on 2 cores for torch,
    # scikit-learn and transformers (transfer, report, sweep, the benches, ...). The configs live
    # in torch-free modules now (train/config/, <package>/configs.py); the builder's config
    # module is the builder itself, whose `datasets` (1.1-1.4 s) is imported where a build is written.
    probe = (
        "import sys, contextlib, io\n"
        "from mtl.cli import COMMANDS, main\n"
        "HEAVY = ('torch', 'spacy', 'datasets', 'scipy', 'sklearn', 'transformers', 'wandb')\n"
        "for name in COMMANDS:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        assert main([name, *(['2'] if name == 'train-distributed' else []), '--help']) == 0\n"
        "    loaded = {m for m in HEAVY if m in sys.modules}\n"
        "    if loaded:\n"
        "        print(name, sorted(loaded))\n"
        "        break\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", done.stdout


def test_the_processes_that_only_launch_runs_start_without_torch():
    # A sweep's own process and a SLURM submission read keys and start other processes: with
    # torch, FSDP and the trainer imported they took 2.5 s of CPU each before starting anything.
    probe = "import sys, mtl.jobs.sweep, mtl.jobs.train, mtl.train.loop.launch; print('torch' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_a_runs_inputs_are_checked_without_torch(tiny_data, tmp_path):
    # A SLURM submission and a study check every member's tasks before any job exists; importing
    # the task kinds' modules for it cost 1.0 s of torch, half of a SLURM run's extra start.
    probe = (
        "import sys\n"
        "from mtl.errors import UserError\n"
        "from mtl.train.config.command_line import config_from_args\n"
        "from mtl.train.config.inputs import resolve_inputs\n"
        f"base = ['snli={FIXTURES / 'snli_tiny'}', 'classifsquad={tiny_data['classifsquad']}',"
        f" 'vectors={tiny_data['vectors']}']\n"
        "config = resolve_inputs(config_from_args([*base, 'tasks=nli,squad,mnrl']), download=False)\n"
        "print(sorted(config.tasks), config.tasks['mnrl'].source == config.tasks['nli'].source)\n"
        "for bad in ('qt.context=4', 'classifsquad=/nowhere', 'mnrl.triples=/nowhere.tsv'):\n"
        "    tasks = 'nli,qt' if bad.startswith('qt') else 'nli,squad,mnrl'\n"
        "    try:\n"
        "        resolve_inputs(config_from_args([*base, f'tasks={tasks}', bad]), download=False)\n"
        "    except UserError as error:\n"
        "        print('refused:', str(error).split(':')[0])\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "['mnrl', 'nli', 'squad'] True"
    assert len([line for line in done.stdout.splitlines() if line.startswith("refused:")]) == 3
    assert done.stdout.splitlines()[-1] == "False"


def test_an_interrupt_after_the_command_ended_is_one_line(monkeypatch, capsys):
    # torchrun's SIGTERM to a surviving rank can land while main() restores the signal handlers.
    from mtl import cli

    def interrupted_late(argv=None):
        raise KeyboardInterrupt("terminated")

    monkeypatch.setattr(cli, "main", interrupted_late)
    with pytest.raises(SystemExit) as leaving:
        cli.run_as_process()
    assert leaving.value.code == 130
    assert capsys.readouterr().err.strip() == "interrupted: terminated"


def test_a_stop_that_an_import_turns_into_an_import_error_is_still_the_stop(monkeypatch, capsys):
    # torchrun's SIGTERM to a surviving rank landed while it imported pandas: the C extension's
    # PyCapsule_Import replaced the KeyboardInterrupt with an ImportError of its own (no context),
    # and the rank printed a traceback where it is collateral of another rank's error.
    from mtl import cli

    def importing_when_stopped(args):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler runs here
        except KeyboardInterrupt:
            raise ImportError('PyCapsule_Import could not import module "pandas"') from None

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(cli.Command, "run", lambda self, args: importing_when_stopped(args))
    assert cli.main(["train-multitask"]) == 130
    assert capsys.readouterr().err.strip() == "interrupted: terminated"
    assert signal.getsignal(signal.SIGTERM) is before


def test_an_error_without_a_stop_is_not_taken_for_one(monkeypatch):
    from mtl import cli

    def failing(args):
        raise ImportError("a real missing module")

    monkeypatch.setattr(cli.Command, "run", lambda self, args: failing(args))
    with pytest.raises(ImportError, match="a real missing module"):
        cli.main(["train-multitask"])


def test_a_stop_that_lands_in_a_finalizer_is_asked_for_again(monkeypatch):
    # Raised inside a __del__ (tqdm's, say), KeyboardInterrupt is printed as "Exception ignored"
    # and lost: the run would not stop. The handler sends the signal again instead.
    from mtl import cli

    sent = []
    monkeypatch.setattr(cli.os, "kill", lambda pid, signum: sent.append((pid, signum)))
    previous, _ = cli._stop_on_signals()
    try:
        handler = signal.getsignal(signal.SIGTERM)

        def __del__():  # the frame a finalizer runs in
            handler(signal.SIGTERM, sys._getframe())

        __del__()
        assert sent == [(os.getpid(), signal.SIGTERM)]
        with pytest.raises(KeyboardInterrupt, match="terminated"):
            handler(signal.SIGTERM, sys._getframe())
    finally:
        for signum, before in previous.items():
            signal.signal(signum, before)


def test_a_typo_is_refused_before_the_commands_heavy_imports():
    """just transfer's typo once waited for torch and scikit-learn (3.8 CPU-s) to be refused."""
    import subprocess
    import sys

    code = "import sys; from mtl.cli import main; r = main(['transfer', 'tsks=MR']); print('torch' in sys.modules, r)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "2"] and "did you mean 'tasks'" in done.stderr


def test_a_developer_tool_outside_a_checkout_is_one_line(tmp_path):
    """tools/ is not installed with mtl: run elsewhere, a benchmark says where it runs."""
    done = subprocess.run(
        [sys.executable, "-m", "mtl", "bench-train", "--help"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        "error: tools.configs is not importable here: the developer tools (tools/) run from a checkout of "
        "mtl: cd into the checkout and run the command there"
    )
