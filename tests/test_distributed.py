"""Training under torchrun: 2 gloo processes on CPU equal 1 process with the same global batches."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from mtl.cli import main
from mtl.runs import read_metrics
from mtl.tracking.wandb_file import run_files
from mtl.train.loop import run

from .conftest import FIXTURES, args_for, exported_weights

# Of 200 NLI pairs batch_nli=7 leaves a last batch of 4 per epoch (2 per rank); of 12 ClassifSQuAD
# triples batch_squad=11 leaves a last batch of 1 (rank 1 gets none and steps at weight 0).
SETTINGS = (
    "device=cpu",
    "batch_nli=7",
    "batch_squad=11",
    "precision=fp32",
    "eval_every=100",
    "checkpoint_every=10",
)
STEPS = 300


@pytest.fixture(scope="module")
def one_process(tiny_data, tmp_path_factory):
    """The reference: the same run in one process, at one thread as each torchrun rank is."""
    out = tmp_path_factory.mktemp("one") / "run"
    config = run.config_from_args(args_for(tiny_data, out, *SETTINGS, f"max_steps={STEPS}"))
    with one_thread():
        return run.start(config, progress=False)


@contextlib.contextmanager
def one_thread():
    """torch at one thread, as each torchrun rank runs (OMP_NUM_THREADS=1): float sums alike."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def torchrun(nproc: int, *args: str) -> subprocess.Popen:
    # torchrun's log folder beside the run, in the test's tmp_path: its default is a torchelastic_*
    # folder in /tmp that it never removes
    run_dir = [a.partition("=")[2] for a in args if a.startswith(("out=", "resume="))][-1]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
    command += ["--log-dir", f"{run_dir}.torchrun"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [*command, "-m", "mtl", "train-multitask", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def train_distributed(nproc: int | str, *args: str, temporary: Path | None = None) -> subprocess.Popen:
    """`just train-distributed N ...`: mtl's launcher, which runs torchrun in its own process;
    `temporary`: its temporary directory (TMPDIR)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", **({"TMPDIR": str(temporary)} if temporary else {})}
    return subprocess.Popen(
        [sys.executable, "-m", "mtl", "train-distributed", str(nproc), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(process: subprocess.Popen) -> tuple[int, str]:
    out, err = process.communicate(timeout=300)
    return process.returncode, out + err


def assert_same_training(a: Path, b: Path) -> None:
    first, second = (exported_weights(d) for d in (a, b))
    assert first.keys() == second.keys()
    for key in first:
        torch.testing.assert_close(first[key], second[key], rtol=1e-4, atol=1e-5, msg=key)
    summaries = [json.loads((d / "summary.json").read_text()) for d in (a, b)]
    for key, value in summaries[0].items():
        if key.endswith("/acc"):
            assert summaries[1][key] == pytest.approx(value, abs=1e-9), key


def rank_pid(launcher: subprocess.Popen, rank: int) -> int:
    """The pid of the worker of `rank` started by `launcher`."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
                environment = (proc / "environ").read_bytes().split(b"\0")
            except (OSError, IndexError, ValueError):
                continue
            if parent == launcher.pid and f"RANK={rank}".encode() in environment:
                return int(proc.name)
        time.sleep(0.05)
    raise AssertionError(f"no rank {rank} worker appeared")


def wait_for_checkpoint(run_dir: Path, at_least: int, launcher: subprocess.Popen) -> None:
    metrics = run_dir / "metrics.jsonl"
    while launcher.poll() is None:
        if metrics.is_file():
            events = [r for r in read_metrics_safely(metrics) if r.get("phase/event") == "checkpoint"]
            if events and events[-1]["global_step"] >= at_least:
                return
        time.sleep(0.02)
    raise AssertionError(f"the run ended before its checkpoint at step {at_least}: {finished(launcher)[1]}")


def read_metrics_safely(path: Path) -> list[dict]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines[:-1]]  # the last line may still be being written


def kill_a_rank(tiny_data, out: Path, rank: int) -> tuple[int, int, str]:
    """`kill -9` of `rank` of a 2-process job once it has checkpointed: its pid, the exit code, the output."""
    launcher = train_distributed(2, *args_for(tiny_data, out, *SETTINGS, f"max_steps={STEPS}"))
    wait_for_checkpoint(out, 20, launcher)
    killed = rank_pid(launcher, rank)
    os.kill(killed, signal.SIGKILL)
    return killed, *finished(launcher)


def test_two_processes_stopped_by_sigterm_on_one_rank_resume_and_train_like_one(
    tiny_data, tmp_path, one_process
):
    """2 processes with the same global batches as one: SIGTERM to rank 1 makes both checkpoint
    after the same step, once; 2 processes resume and end with one process's weights, rank 0
    alone writing the log and W&B. (What an uninterrupted 2-process run was checked for is
    checked on this run's two jobs.)"""
    out = tmp_path / "terminated"
    launcher = torchrun(2, *args_for(tiny_data, out, *SETTINGS, f"max_steps={STEPS}", "wandb=offline"))
    wait_for_checkpoint(out, 20, launcher)
    os.kill(rank_pid(launcher, 1), signal.SIGTERM)
    code, output = finished(launcher)
    assert code != 0 and "resume with" in output, output
    records = read_metrics(out / "metrics.jsonl")
    last_step = max(r["global_step"] for r in records)
    saved = torch.load(out / "checkpoints" / "latest.pt", weights_only=True)
    assert saved["state"]["global_step"] == last_step < STEPS  # both ranks stopped after the same step
    final = [r for r in records if r["global_step"] == last_step and r.get("phase/event") == "checkpoint"]
    assert len(final) == 1
    code, output = finished(torchrun(2, f"resume={out}"))
    assert code == 0, output
    assert_same_training(one_process[0], out)
    assert json.loads((out / "config.json").read_text())["world_size"] == 2
    steps = [
        r["global_step"]
        for r in read_metrics(out / "metrics.jsonl")
        if "nli/train/loss" in r or "squad/train/loss" in r
    ]
    assert steps == list(range(1, STEPS + 1))  # rank 0 alone writes the log, each step once
    first, second = run_files(out)  # one W&B run file a job: rank 0's, of one W&B run
    assert first.name == second.name
    assert output.count("stopped by max_steps") == 1  # rank 0 alone reports


@pytest.mark.parametrize(
    "args, message",
    [
        (["0"], "train-distributed takes the number of processes first, not '0'"),
        (["abc"], "train-distributed takes the number of processes first, not 'abc'"),
        (["2", "hidden=abc"], "hidden='abc' is not an integer"),
        (["2", "resume=/nowhere/run"], "/nowhere/run is not a run folder"),
    ],
)
def test_train_distributed_says_a_bad_argument_once_before_any_rank_starts(args, message, capfd):
    # In this process (a started rank's words would reach the same file descriptors): the
    # launcher's own imports cost 7 s a case in a subprocess.
    code = main(["train-distributed", *args])
    output = "".join(capfd.readouterr())
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and message in errors[0], output
    assert "Traceback" not in output


def test_resuming_a_finished_run_is_refused_before_any_rank_starts(one_process, monkeypatch, capfd):
    from mtl.train.loop import launch

    def started(*args):
        raise AssertionError("torchrun started its ranks")

    monkeypatch.setattr(launch, "run_torchrun", started)
    run_dir = one_process[0]
    code = main(["train-distributed", "2", f"resume={run_dir}"])
    output = "".join(capfd.readouterr())
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert code == 2 and errors == [
        f"error: {run_dir} has already finished: see {run_dir / 'summary.json'}"
    ], output


def test_a_job_into_a_locked_run_folder_is_refused_once_by_rank_0(tiny_data, tmp_path):
    from mtl.files.locks import FolderLock

    out = tmp_path / "run"
    with FolderLock(out, "run folder", "out"):  # a run that is still training there
        code, output = finished(train_distributed(2, *args_for(tiny_data, out, *SETTINGS)))
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1, output
    assert f"run folder {out} is in use by process {os.getpid()} " in errors[0]
    assert not out.exists()


@pytest.mark.parametrize(
    "failures, cause",
    [
        ({0: (-9, 2.0), 1: (3, 3.0)}, 0),  # killed; the other lost its peer
        ({0: (-15, 3.0), 1: (-9, 2.0)}, 1),  # killed; torchrun then stopped the other
        ({0: (130, 1.0), 1: (-9, 2.0)}, 1),  # the other took torchrun's SIGTERM for a Ctrl-C
        ({0: (2, 2.0), 1: (-6, 1.0)}, None),  # rank 0 said its error; gloo aborted the other at exit
        ({0: (1, 2.0), 1: (1, 1.0)}, 1),  # two crashes: the first
        ({0: (3, 2.0), 1: (3, 1.0)}, 1),  # only collateral: the first of them
    ],
)
def test_the_launcher_names_the_rank_whose_failure_stopped_the_job(failures, cause):
    from mtl.runtime.ranks import root_cause

    assert root_cause(failures) == cause


def test_a_ranks_error_is_said_though_torchrun_stopped_it_after_it_spoke(tmp_path):
    """Rank 0 refuses a locked folder and says so; rank 1 follows its refusal without a word (exit
    2); when rank 1 left first, torchrun stopped rank 0 with SIGTERM: its words were not read (exit
    -15), and the launcher said "a rank failed without saying why" (one CI run in three)."""
    import signal
    from types import SimpleNamespace

    from mtl.runtime.ranks import LOST_CONTACT, own_errors

    (tmp_path / "rank0").write_text("error: run folder /r is in use by process 7 (since ...)\n")
    failures = {0: SimpleNamespace(exitcode=-signal.SIGTERM), 1: SimpleNamespace(exitcode=2)}
    assert own_errors(tmp_path, failures) == "run folder /r is in use by process 7 (since ...)"
    # a rank that lost its peer, or was interrupted, is not the cause
    (tmp_path / "rank1").write_text(f"error: rank 1 {LOST_CONTACT} (connection reset)")
    (tmp_path / "rank2").write_text("interrupted")
    failures[2] = SimpleNamespace(exitcode=130)
    assert own_errors(tmp_path, failures) == "run folder /r is in use by process 7 (since ...)"
    (tmp_path / "rank0").unlink()
    assert own_errors(tmp_path, failures).startswith("a rank failed without saying why")


def test_a_killed_rank_is_named_on_a_line_of_its_own_and_one_process_resumes_the_run_exactly(
    tiny_data, tmp_path, one_process
):
    """Rank 0, the one that writes the run folder, killed after a checkpoint: the survivor's lost
    connection is no traceback, the line the dead rank's progress bar left open does not swallow
    the error, and one process resumes the run exactly. (Which rank the launcher names when both
    die is test_the_launcher_names_the_rank_whose_failure_stopped_the_job's.)"""
    out = tmp_path / "killed"
    killed, code, output = kill_a_rank(tiny_data, out, 0)
    errors = [line for line in output.split("\n") if "error:" in line]
    assert code == 2 and "Traceback" not in output and not (out / "summary.json").exists(), output
    assert errors == [
        f"error: rank 0 (pid {killed}) was killed by SIGKILL, so every rank stopped: the run continues "
        f"from its last checkpoint with `just train-distributed 2 resume={out}`"
    ], output
    with one_thread():
        _, summary = run.resume(out, progress=False)
    assert summary["global_step"] == STEPS
    assert_same_training(one_process[0], out)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA for device=cuda to fail")
def test_an_error_every_rank_meets_is_said_once(tiny_data, tmp_path):
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    code, output = finished(
        train_distributed(2, *args_for(tiny_data, tmp_path / "run", "device=cuda"), temporary=temporary)
    )
    errors = [line for line in output.split("\n") if "error:" in line]
    assert code == 2 and "Traceback" not in output, output
    assert errors == ["error: device='cuda' but CUDA is not available here: use device=cpu or device=auto"], (
        output
    )
    # the launcher's folder and torchrun's (its torchelastic_* one by default) are gone with the job
    assert not list(temporary.iterdir())


@pytest.mark.parametrize("balancer", ["pcgrad", "famo", "nash"])
def test_two_processes_train_a_mixed_schedule_with_in_batch_distillation_like_one(
    tiny_data, tmp_path, monkeypatch, balancer
):
    """The gradients a balancer combines (pcgrad's projections; famo's weights, from the losses
    measured again after the update; nash's, from a solver that starts where the last step's
    ended; every balancer resumes exactly in test_mixed) are
    all-reduced first: every rank decides alike, as one process. And
    kl distillation scores each anchor against the whole batch's candidates: the teacher's rows
    are gathered from the ranks as the student's are."""
    monkeypatch.setenv("MTL_CACHE_DIR", str(tmp_path / "cache"))  # the teacher's embeddings, shared
    teacher = tmp_path / "teacher"
    with one_thread():
        run.start(
            run.config_from_args(args_for(tiny_data, teacher, "tasks=nli", "hidden=4", "max_steps=4")),
            progress=False,
        )
    keys = (
        *SETTINGS,
        "schedule=mixed",
        f"balancer={balancer}",
        "max_steps=40",
        "tasks=nli,squad,distill",
        f"distill.teacher={teacher}",
        f"distill.source={FIXTURES / 'snli_tiny'}",
        "distill.loss=kl",
        "distill.batch=7",
    )
    with one_thread():
        run.start(run.config_from_args(args_for(tiny_data, tmp_path / "one", *keys)), progress=False)
    code, output = finished(torchrun(2, *args_for(tiny_data, tmp_path / "two", *keys)))
    assert code == 0, output
    assert_same_training(tmp_path / "one", tmp_path / "two")
    rows = [read_metrics(tmp_path / d / "metrics.jsonl") for d in ("one", "two")]
    for task in ("squad", "distill"):
        weights = [
            [r[f"balance/{task}/weight"] for r in log if f"balance/{task}/weight" in r] for log in rows
        ]
        assert len(weights[0]) == 40 and weights[1] == pytest.approx(weights[0], rel=1e-4), task
    kl = [[r["distill/train/kl"] for r in log if "distill/train/kl" in r] for log in rows]
    assert len(kl[0]) == 40 and kl[1] == pytest.approx(kl[0], rel=1e-4)


def test_a_callbacks_request_on_one_rank_is_acted_on_by_every_rank_of_an_hf_encoder(
    tiny_data, tiny_bert, tmp_path
):
    """A pretrained model over 2 processes (every trainable parameter gets a gradient, or DDP
    would stall), whose callbacks ask for a stop on rank 0 and an evaluation on rank 1 alone."""
    plugin = Path(__file__).parent / "fixtures" / "plugins" / "rank_requests.py"
    out = tmp_path / "asked"
    keys = (
        "encoder=hf",
        f"hf_model={tiny_bert}",
        "accumulate=2",
        f"plugins={plugin}",
        "callbacks=stop_at_5,evaluate_on_rank_1",
        "max_steps=50",
    )
    code, output = finished(torchrun(2, *args_for(tiny_data, out, *SETTINGS, *keys)))  # eval_every=100
    assert code == 0, output[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["stop_reason"], summary["stop_why"], summary["global_step"]) == (
        "callback",
        "rank 0 asked",
        5,
    )
    evaluations = [
        r["global_step"] for r in read_metrics(out / "metrics.jsonl") if r.get("phase/event") == "evaluation"
    ]
    assert evaluations == [3, 5]  # rank 1's request, then the run's end
    assert (out / "encoder" / "model.safetensors").is_file()  # exported in Hugging Face format


def test_a_budget_one_rank_runs_out_of_stops_every_rank_for_that_reason(tiny_data, tmp_path):
    """max_minutes= reads each process's own clock: the first rank over it stops them all, after
    the same step and with its reason (the stop rules are callbacks, their requests read from
    every rank)."""
    plugin = Path(__file__).parent / "fixtures" / "plugins" / "rank_requests.py"
    out = tmp_path / "budget"
    keys = (f"plugins={plugin}", "callbacks=rank_1_out_of_time", "max_minutes=30", "max_steps=50")
    code, output = finished(torchrun(2, *args_for(tiny_data, out, *SETTINGS, *keys)))
    assert code == 0, output[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["stop_reason"], summary["global_step"]) == ("max_minutes", 4)
    assert "stop_why" not in summary


def test_a_stop_asked_for_on_one_rank_as_a_checkpoint_is_written_stops_every_rank(tiny_data, tmp_path):
    """A request made after the loop read the step's (on_checkpoint, rank 0 alone) is read again
    before the next step: no rank acts on a stop the others have not seen."""
    plugin = Path(__file__).parent / "fixtures" / "plugins" / "rank_requests.py"
    out = tmp_path / "checkpointed"
    keys = (f"plugins={plugin}", "callbacks=stop_at_first_checkpoint", "max_steps=50")
    code, output = finished(torchrun(2, *args_for(tiny_data, out, *SETTINGS, *keys)))
    assert code == 0, output[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["stop_reason"], summary["global_step"]) == ("callback", 10)  # checkpoint_every=10
    assert summary["stop_why"] == "checkpoint at step 10 on rank 0"


def test_two_processes_move_an_online_schedules_shares_like_one(tiny_data, tmp_path):
    """schedule=aioli: every rank measures the lookahead on the whole held batches and rank 0's
    shares are sent to all, so two processes draw the same tasks with the same shares as one."""
    keys = (*SETTINGS, "schedule=aioli", "mix_every=2", "max_steps=12")
    with one_thread():
        run.start(run.config_from_args(args_for(tiny_data, tmp_path / "one", *keys)), progress=False)
    code, output = finished(torchrun(2, *args_for(tiny_data, tmp_path / "two", *keys)))
    assert code == 0, output
    assert_same_training(tmp_path / "one", tmp_path / "two")
    updates = [
        [r for r in read_metrics(tmp_path / d / "metrics.jsonl") if r.get("phase/event") == "mixing"]
        for d in ("one", "two")
    ]
    assert (
        [r["global_step"] for r in updates[1]]
        == [r["global_step"] for r in updates[0]]
        == list(range(0, 13, 2))
    )
    shares = [[r["mixing/share/nli"] for r in log] for log in updates]
    assert shares[1] == pytest.approx(shares[0], rel=1e-4) and len(set(shares[0])) > 1
