"""launcher=slurm against a real SLURM: the one-node cluster tests/slurm_cluster.py starts from
Debian's packages (munged, slurmctld, slurmd). Under CI these must run (.ci/run installs the
packages); elsewhere they skip and say why."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mtl.cli import main
from mtl.errors import UserError
from mtl.runs import read_metrics

from .conftest import args_for, deterministic_summary, start_run
from .slurm_cluster import GPUS, PARTITION, URGENT, LocalCluster, missing
from .test_distributed import SETTINGS, assert_same_training, one_thread

SLURM = ("launcher=slurm", f"slurm.partition={PARTITION}")


def started_cluster(folder: Path, nodes: int = 1) -> LocalCluster:
    """A SLURM of `nodes` nodes on this machine, started; the test skips where SLURM is not
    installed, and fails under CI, which installs it."""
    if reason := missing():
        if os.environ.get("CI"):
            pytest.fail(f"the SLURM tests must run under CI, and cannot here: {reason}")
        pytest.skip(f"no SLURM here: {reason}")
    cluster = LocalCluster(folder, nodes=nodes)
    cluster.start()
    return cluster


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    cluster = started_cluster(tmp_path_factory.mktemp("slurm"))
    before = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    yield cluster
    cluster.stop()
    if before is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = before


def training_rows(run_dir: Path) -> list[dict]:
    """Each training step's logged values (loss, accuracy, lr, ...), without the clock's."""
    return [
        {k: v for k, v in row.items() if not k.endswith(("examples_per_s", "seconds"))}
        for row in read_metrics(run_dir / "metrics.jsonl")
        if any(k.endswith("/train/loss") for k in row)
    ]


def test_a_sweep_through_slurm_is_one_job_array_with_the_local_sweeps_results(
    slurm, tiny_data, tmp_path, capsys
):
    base = [a for a in args_for(tiny_data, tmp_path, "precision=fp32") if not a.startswith("out=")]
    axis = "steps_nli=2,3,4"
    assert main(["sweep", *base, axis, f"out={tmp_path / 'local'}"]) == 0
    assert main(["sweep", *base, axis, f"out={tmp_path / 'slurm'}", *SLURM]) == 0
    assert "submitted job" in capsys.readouterr().out
    jobs = json.loads((tmp_path / "slurm" / "slurm-jobs.json").read_text())
    assert sorted(jobs) == ["steps_nli2", "steps_nli3", "steps_nli4"]
    assert len({job["job_id"].split("_")[0] for job in jobs.values()}) == 1  # one array
    for name, job in jobs.items():
        here, there = tmp_path / "local" / name, tmp_path / "slurm" / name
        assert json.loads((there / "slurm.json").read_text())["job_id"] == job["job_id"]
        assert Path(job["stdout"]).is_file()
        assert training_rows(there) == training_rows(here)
        summaries = [json.loads((d / "summary.json").read_text()) for d in (here, there)]
        assert deterministic_summary(summaries[1]) == deterministic_summary(summaries[0])
    # Again: every member finished, none is submitted
    assert main(["sweep", *base, axis, f"out={tmp_path / 'slurm'}", *SLURM]) == 0
    assert "3 finished before, 0 to submit" in capsys.readouterr().out
    for study, job in (("slurm", jobs["steps_nli3"]["job_id"]), ("local", "-")):
        assert main(["status", str(tmp_path / study)]) == 0
        (row,) = [
            line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("steps_nli3 ")
        ]
        assert row == ["steps_nli3", "10/10", "-", job, "finished"]


def submitted(tiny_data, out: Path, keys: tuple[str, ...], *slurm_keys: str, env=None) -> subprocess.Popen:
    """`just train-multitask ... launcher=slurm` in a process of its own (its output piped)."""
    return subprocess.Popen(
        [sys.executable, "-m", "mtl", "train-multitask", *args_for(tiny_data, out, *keys), *SLURM, *slurm_keys],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip


def submitted_until_a_checkpoint(tiny_data, out: Path, keys: tuple[str, ...]) -> subprocess.Popen:
    """`just train-multitask ... launcher=slurm` in a process of its own, once its run has checkpointed."""
    job = submitted(tiny_data, out, keys)
    wait_while_running(job, lambda: any(r.get("phase/event") == "checkpoint" for r in _rows(out)))
    return job


def wait_while_running(job: subprocess.Popen, done: Callable[[], bool]) -> None:
    """Wait (at most 3 minutes) until `done()`; the job ending first fails with its output."""
    deadline = time.monotonic() + 180
    while not done():
        assert job.poll() is None and time.monotonic() < deadline, job.communicate()[0]
        time.sleep(0.1)


def _start_now(job_id: str, env: dict[str, str] | None = None) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = subprocess.run(
            ["squeue", "-h", "-o", "%T", "-j", job_id], capture_output=True, text=True, check=False, env=env
        ).stdout.strip()
        if state == "PENDING":
            # two seconds on, not now: a job started again in the second its credential was
            # revoked (the requeue) is refused by slurmd ("Job credential revoked") and ends failed
            subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now+2"], check=True, env=env)
            return
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} was not requeued (state {state!r})")


def _rows(run_dir: Path) -> list[dict]:
    try:
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()[:-1]
    except OSError:
        return []
    return [json.loads(line) for line in lines]


def test_two_processes_started_by_srun_train_like_one(slurm, tiny_data, tmp_path):
    keys = (*SETTINGS, "max_steps=60")
    with one_thread():
        reference, _ = start_run(tiny_data, tmp_path / "one", *keys)
    out = tmp_path / "two"
    args = args_for(tiny_data, out, *keys)
    assert main(["train-multitask", *args, *SLURM, "slurm.tasks_per_node=2"]) == 0
    assert json.loads((out / "config.json").read_text())["world_size"] == 2
    assert_same_training(reference, out)


def test_gpus_asked_per_node_are_granted_and_give_one_process_each(slurm, tiny_data, tmp_path):
    """slurm.gpus_per_node=2 on a node with two GPUs (GRES): SLURM grants them, the job runs a
    process per GPU, and they train as one process (here on the CPU: the node's GPUs are device
    files, not GPUs; which GPU each rank takes runs on a lent GPU)."""
    keys = (*SETTINGS, "max_steps=20")  # device=cpu among them
    with one_thread():
        reference, _ = start_run(tiny_data, tmp_path / "one", *keys)
    out = tmp_path / "two"
    args = args_for(tiny_data, out, *keys)
    assert main(["train-multitask", *args, *SLURM, f"slurm.gpus_per_node={GPUS}"]) == 0
    assert json.loads((out / "config.json").read_text())["world_size"] == GPUS
    assert_same_training(reference, out)
    job_id = json.loads((out / "slurm.json").read_text())["job_id"]
    shown = subprocess.run(
        ["scontrol", "show", "job", str(job_id)], capture_output=True, text=True, env=slurm.env, check=True
    ).stdout
    assert f"TresPerNode=gres:gpu:{GPUS}" in shown, shown


def test_a_refused_submission_is_one_line_naming_the_key(slurm, tiny_data, tmp_path, capsys):
    args = args_for(tiny_data, tmp_path / "run")
    assert main(["train-multitask", *args, "launcher=slurm", "slurm.partition=nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: slurm.partition=nope: SLURM refused the job (") and "\n" not in err


def test_a_request_the_partition_can_never_grant_is_refused_before_submission(
    slurm, tiny_data, tmp_path, capsys
):
    """slurm.nodes=2 on a one-node partition once pended forever as "pending"; SLURM's limits
    (sinfo) refuse it before anything is submitted, naming the limit."""
    args = args_for(tiny_data, tmp_path / "run")
    assert main(["train-multitask", *args, "launcher=slurm", "slurm.nodes=2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "slurm.nodes=2: partition " in err and "has 1 node (sinfo)" in err and "\n" not in err
    assert main(["train-multitask", *args, "launcher=slurm", f"slurm.gpus_per_node={GPUS + 1}"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        f"slurm.gpus_per_node={GPUS + 1}: partition " in err and f"has at most {GPUS} GPUs on a node" in err
    )
    assert not (tmp_path / "run" / "slurm.json").exists()


def test_a_study_without_its_inputs_is_refused_before_anything_is_submitted(
    slurm, tiny_data, tmp_path, capsys
):
    """A sweep submitted before `just build-classifsquad`: one line on the submitting machine, no
    job (not a failure of every job once each starts)."""
    out, unbuilt = tmp_path / "sweep", tmp_path / "not-built"
    args = args_for(tiny_data, out, f"classifsquad={unbuilt}", "steps_nli=2,3")
    queued_before = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout
    assert main(["sweep", *args, *SLURM]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"error: steps_nli2: ClassifSQuAD folder {unbuilt} does not exist: build it with `just build-classifsquad "
        f"out={unbuilt}` or point squad.source= at a build (nothing was submitted)"
    )
    assert not (out / "slurm").exists() and not list(out.glob("*/slurm.json"))
    assert (
        subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout == queued_before
    )


def test_a_cancelled_run_is_left_resumable_and_resumes(slurm, tiny_data, tmp_path, capsys):
    out = tmp_path / "cancelled"
    # cancelled at its first checkpoint (step 20): 580 steps to spare, more on a slow machine
    keys = ("max_steps=600", "stop=max_steps", "checkpoint_every=20", "eval_every=100000", "hidden=64")
    job = submitted_until_a_checkpoint(tiny_data, out, keys)
    assert main(["cancel", str(out)]) == 0
    assert "cancelled 1 jobs" in capsys.readouterr().out
    followed, _ = job.communicate(timeout=120)
    # the follower says what `just status` says, and exits as a run stopped by Ctrl-C
    resumable = "interrupted (resumable: run the same command again)"
    assert (
        job.returncode == 130 and followed.strip().splitlines()[-1] == f"interrupted: run {out} {resumable}"
    )
    # the job ended as the run did: mtl's one line, no traceback of a failure
    record = json.loads((out / "slurm.json").read_text())
    log = "".join(Path(record[stream]).read_text() for stream in ("stdout", "stderr"))
    assert "Traceback" not in log, log[-3000:]
    assert "interrupted: stopped at step" in log and "Job completed successfully" in log, log[-3000:]
    assert main(["status", str(out)]) == 0
    assert resumable in capsys.readouterr().out
    assert main(["train-multitask", f"resume={out}", *SLURM]) == 0
    assert json.loads((out / "summary.json").read_text())["global_step"] == 600


def sleeping_job(tmp_path: Path, *options: str) -> str:
    """A job of someone else's: a minute's sleep, not submitted by mtl; its id."""
    return subprocess.run(
        [
            "sbatch",
            "--parsable",
            f"--partition={PARTITION}",
            f"--output={tmp_path / 'job.out'}",
            *options,
            "--wrap",
            "sleep 60",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_a_lock_left_by_a_job_slurm_says_has_ended_is_stale(slurm, tmp_path):
    """A holder on another node (a dead node keeps its lock on a shared file system) whose job
    SLURM shows ended: the lock is taken over. One whose job still runs, or whose job SLURM does
    not know (purged, or an id from before a reinstall: no evidence it ended), is refused, and the
    refusal says how to free it by hand."""
    from mtl.files.locks import FolderInUse, FolderLock, lock_file_of

    folder = tmp_path / "run"
    folder.mkdir()
    hold = (
        "import fcntl, os, sys, time; d = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
        "fcntl.flock(d, fcntl.LOCK_EX); os.ftruncate(d, 0); os.pwrite(d, sys.argv[2].encode(), 0); print('held', flush=True); "
        "time.sleep(60)"
    )
    running = sleeping_job(tmp_path)
    ended = subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--wait",
            f"--partition={PARTITION}",
            "--output=/dev/null",
            "--wrap",
            "true",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # a live job: held; an ended one (SLURM still shows it: MinJobAge): stale, taken; a job this
    # cluster's SLURM does not know, with no accounting to ask: held; the same id on another
    # cluster (or on one the holder did not name) is never taken for gone
    for job, cluster, taken in (
        (running, "mtl-test", False),
        (ended, "mtl-test", True),
        ("999999", "mtl-test", False),
        ("999999", "other-cluster", False),
        ("999999", None, False),
    ):
        of = f" of cluster {cluster}" if cluster else ""
        holder = subprocess.Popen(
            [
                sys.executable,
                "-c",
                hold,
                str(lock_file_of(folder)),
                f"process 1 on node-17, SLURM job {job}{of} (x)",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert holder.stdout.readline() == "held\n"
        try:
            if taken:
                FolderLock(folder, "run folder", "out").acquire().release()
            else:
                with pytest.raises(FolderInUse, match=f"SLURM job {job}") as refused:
                    FolderLock(folder, "run folder", "out").acquire()
                assert f"if SLURM job {job} has ended and its node is down, remove " in str(refused.value)
        finally:
            holder.kill()
            holder.wait()
    subprocess.run(["scancel", running], check=True)


def test_a_job_id_that_now_names_another_job_is_said_and_never_cancelled(slurm, tmp_path, capsys):
    """A copied study, or ids reused after a SLURM reinstall: the recorded id is another job now
    (its comment differs), a job of another cluster, or a record written before jobs carried an
    identity. `just status` says so; `just cancel` acts on none of them."""
    theirs = sleeping_job(tmp_path)
    ours = sleeping_job(tmp_path, "--comment=mtl:study:ba9876543210")  # as mtl submits its own
    records = {
        "reused": {"job_id": theirs, "comment": "mtl:study:0123456789ab", "cluster": "mtl-test"},
        "elsewhere": {"job_id": theirs, "comment": "mtl:study:0123456789ab", "cluster": "another-cluster"},
        "old": {"job_id": theirs},
        "older": {"job_id": theirs, "submitted": "2020-01-02 03:04:05"},  # no comment; submitted then
        "ours": {"job_id": ours, "comment": "mtl:study:ba9876543210", "cluster": "mtl-test"},
    }
    folder = tmp_path / "study"
    for name, record in records.items():
        (folder / name).mkdir(parents=True)
        (folder / name / "slurm.json").write_text(json.dumps(record))
    (folder / "sweep.json").write_text(json.dumps({"members": {name: name for name in records}}))
    try:
        assert main(["status", str(folder)]) == 0
        rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[2:]}
        assert f"job {theirs} is now another job" in rows["reused"]
        assert "a job of cluster another-cluster" in rows["elsewhere"]
        assert "recorded before jobs were checked" in rows["old"]
        assert f"job {theirs} is now another job" in rows["older"]  # SLURM's submit time is not the record's
        assert re.search(r"(pending|running)( \(\w+\))?$", rows["ours"])  # pending: with SLURM's reason
        assert main(["cancel", str(folder)]) == 0
        captured = capsys.readouterr()
        assert f"job {theirs} is not this study's now" in captured.err
        assert f"scancel {theirs} yourself if it is this study's" in captured.err
        assert f"cancelled 1 jobs ({ours})" in captured.out  # its own job only
        queued = subprocess.run(["squeue", "-h", "-j", theirs], capture_output=True, text=True, check=False)
        assert theirs in queued.stdout  # still there: someone else's job was never touched
    finally:
        subprocess.run(["scancel", theirs, ours], check=False)


# The run the two stopped-and-requeued tests below compare with, trained once: 1,000 steps of a
# small encoder, no checkpoint but the ones the stops make (`checkpoint_every=` past the end), the
# precision pinned (the numbers are compared with the uninterrupted run's, on any CPU). A stop
# comes within about 100 steps of being asked for (a step takes about 10 ms here): the tests ask
# 150-300 steps in, which leaves 700 to spare, more on a slow machine. (The preemption test ran
# 4,000 steps, twice, for 100 s of the suite.)
STOPPED_KEYS = ("max_steps=1000", "stop=max_steps", "checkpoint_every=100000", "eval_every=100000", "hidden=64",
                "precision=fp32")  # fmt: skip


@pytest.fixture(scope="module")
def uninterrupted(tiny_data, tmp_path_factory) -> Path:
    straight, _ = start_run(tiny_data, tmp_path_factory.mktemp("uninterrupted") / "straight", *STOPPED_KEYS)
    return straight


def test_a_run_signalled_near_its_time_limit_then_requeued_resumes_exactly_each_time(
    slurm, tiny_data, uninterrupted, tmp_path, capsys
):
    """One job stopped mid-run twice, as SLURM stops jobs, and trained as the uninterrupted run:

    1. SLURM's USR2 before the time limit (`#SBATCH --signal=USR2@<slurm.signal_s>`): the run
       checkpoints after its step (`checkpoint_every=` is past the end: no other checkpoint), the
       job requeues itself and the next attempt resumes there. Sent as SLURM sends it, to the
       job's processes, once the run trains: a clock-timed one could come before a loaded machine
       has started the job.
    2. `scontrol requeue` (as a preemption), 100 steps into that attempt: SLURM's SIGTERM, taken
       the same way, and a third attempt resumes from that checkpoint.
    """
    straight, keys = uninterrupted, STOPPED_KEYS  # signalled 200 steps in, requeued about 300 in
    out = tmp_path / "limited"
    job = submitted(tiny_data, out, keys, "slurm.time=30", "slurm.signal_s=300")
    wait_while_running(job, lambda: len(training_rows_so_far(out)) >= 200)
    job_id = json.loads((out / "slurm.json").read_text())["job_id"]
    script = (out / "slurm" / f"{job_id}_submission.sh").read_text()
    assert "#SBATCH --time=30" in script and "#SBATCH --signal=USR2@300" in script
    subprocess.run(["scancel", "--signal=USR2", job_id], check=True)
    _start_now(job_id)  # the job requeued itself; SLURM's two-minute hold lifted
    wait_while_running(job, lambda: len(resumes(out)) == 1)
    (signalled,) = resumes(out)
    wait_while_running(job, lambda: len(training_rows_so_far(out)) >= signalled + 100)
    assert main(["status", str(out)]) == 0
    assert re.search(rf"^limited +\d+/1000 +~\d+ (s|min) +{job_id} +running$", capsys.readouterr().out, re.M)
    subprocess.run(["scontrol", "requeue", job_id], check=True)
    _start_now(job_id)  # SLURM holds a requeued job back for two minutes: the test does not wait them out
    output = job.communicate(timeout=300)[0]
    assert job.returncode == 0, output
    log = Path(json.loads((out / "slurm.json").read_text())["stderr"]).read_text()
    assert log.count("interrupt: saving a checkpoint after this step") == 2  # each stop checkpointed
    resumed = resumes(out)  # the steps the second and the third attempt took the run up at
    assert len(resumed) == 2 and resumed[0] == signalled and resumed[1] >= signalled + 100, resumed
    assert training_rows(out) == training_rows(straight)
    summaries = [json.loads((d / "summary.json").read_text()) for d in (straight, out)]
    assert deterministic_summary(summaries[1]) == deterministic_summary(summaries[0])


def test_a_run_preempted_by_a_higher_priority_job_checkpoints_in_its_grace_and_resumes_exactly(
    slurm, tiny_data, uninterrupted, tmp_path
):
    """A job of the urgent partition (a higher PriorityTier, PreemptMode=REQUEUE) needs the node: SLURM
    sends the run's job SIGTERM, gives it GraceTime, requeues it; the run checkpoints after its
    step within the grace (no other checkpoint exists: the resume step proves it was written) and
    the requeued job resumes it to the uninterrupted run's numbers."""
    straight, keys = uninterrupted, STOPPED_KEYS
    out = tmp_path / "preempted"
    job = submitted(tiny_data, out, keys)
    wait_while_running(job, lambda: len(training_rows_so_far(out)) >= 150)
    job_id = json.loads((out / "slurm.json").read_text())["job_id"]
    started = time.monotonic()
    urgent = subprocess.run(
        ["sbatch", "--parsable", f"--partition={URGENT}", "--exclusive", f"--output={tmp_path / 'urgent.out'}",
         "--wrap", "true"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    _start_now(job_id)  # preempted and requeued; SLURM's hold on a requeued job lifted
    preempted_after = time.monotonic() - started
    output = job.communicate(timeout=300)[0]
    assert job.returncode == 0, output
    log = Path(json.loads((out / "slurm.json").read_text())["stderr"]).read_text()
    assert log.count("interrupt: saving a checkpoint after this step") == 1
    (resumed,) = resumes(out)
    assert resumed >= 150, resumed
    assert training_rows(out) == training_rows(straight)
    state = subprocess.run(["scontrol", "show", "job", urgent], capture_output=True, text=True, check=True)
    assert "JobState=COMPLETED" in state.stdout
    print(
        f"preempted and requeued {preempted_after:.1f} s after the urgent job was submitted, resumed at step {resumed}"
    )


def resumes(out: Path) -> list[int]:
    """The steps the SLURM job's attempts have resumed the run in `out` at, as their output says."""
    try:
        output = Path(json.loads((out / "slurm.json").read_text())["stdout"]).read_text()
    except OSError:
        return []
    return [int(step) for step in re.findall(r"^resuming \S+ at step (\d+)$", output, re.M)]


def training_rows_so_far(run_dir: Path) -> list[dict]:
    return [row for row in _rows(run_dir) if any(k.endswith("/train/loss") for k in row)]


def test_the_follower_shows_each_running_runs_step_and_each_other_jobs_state(tmp_path):
    """What `just train-multitask launcher=slurm` shows while it follows (no cluster needed)."""
    from mtl.jobs.member import Member
    from mtl.jobs.slurm import QueuedJob, following_line

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "metrics.jsonl").write_text('{"global_step": 6}\n{"global_step": 7}\n')
    members = {name: Member(name, [], tmp_path / name) for name in ("a", "b", "c")}
    queued = {
        "a": QueuedJob("RUNNING", True),
        "b": QueuedJob("PENDING", True, "None"),
        "c": QueuedJob("RUNNING", True),
    }
    assert following_line(queued, members) == "a step 7; b pending; c starting"
    queued["b"] = QueuedJob("PENDING", True, "PartitionNodeLimit")  # SLURM's reason while it waits
    assert following_line(queued, members) == "a step 7; b pending (PartitionNodeLimit); c starting"


def test_a_job_mails_its_state_changes_where_asked_and_a_wrong_mail_type_is_one_line():
    """slurm.mail_user= (and mail_type=, END,FAIL by default) in the job's script, as submitit
    writes it; a mail type sbatch does not know is refused before anything is submitted."""
    from submitit.slurm.slurm import _make_sbatch_string

    from mtl.config import apply_overrides
    from mtl.jobs.launchers import LauncherConfig

    config = apply_overrides(LauncherConfig(), ["slurm.mail_user=me@lab.org"]).slurm
    script = _make_sbatch_string(command="true", folder="/tmp/x", **config.executor_parameters())
    assert "#SBATCH --mail-user=me@lab.org" in script and "#SBATCH --mail-type=END,FAIL" in script
    quiet = _make_sbatch_string(
        command="true", folder="/tmp/x", **LauncherConfig().slurm.executor_parameters()
    )
    assert "--mail" not in quiet
    with pytest.raises(UserError, match=r"^slurm.mail_type=END,FIAL: 'FIAL' is not one of sbatch's"):
        apply_overrides(LauncherConfig(), ["slurm.mail_type=END,FIAL"])


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    """A two-node SLURM beside the one-node one: two slurmd on this machine, each its own node."""
    cluster = started_cluster(tmp_path_factory.mktemp("slurm-two"), nodes=2)
    yield cluster
    cluster.stop()


def test_one_run_over_two_nodes_trains_like_one_process(two_nodes, tiny_data, tmp_path, monkeypatch):
    """slurm.nodes=2: srun starts a process on each node, they find each other through the job's
    first node (torchrun's rendezvous, from SLURM's environment) and train as one process."""
    monkeypatch.setenv("SLURM_CONF", str(two_nodes.conf))
    keys = (*SETTINGS, "max_steps=40")
    with one_thread():
        reference, _ = start_run(tiny_data, tmp_path / "one", *keys)
    out = tmp_path / "two"
    args = args_for(tiny_data, out, *keys)
    assert main(["train-multitask", *args, *SLURM, "slurm.nodes=2", "slurm.tasks_per_node=1"]) == 0
    assert json.loads((out / "config.json").read_text())["world_size"] == 2
    assert_same_training(reference, out)
    job_id = json.loads((out / "slurm.json").read_text())["job_id"]
    shown = subprocess.run(
        ["scontrol", "show", "job", str(job_id)],
        capture_output=True,
        text=True,
        env=two_nodes.env,
        check=True,
    ).stdout
    assert "NumNodes=2" in shown and re.search(r"^\s*NodeList=\S*localhost", shown, re.M), shown


def test_a_run_whose_process_one_node_loses_is_requeued_and_resumes_exactly(
    two_nodes, tiny_data, tmp_path, monkeypatch
):
    """`kill -9` of the training process on the job's second node (as the out-of-memory killer
    does): no checkpoint is written, the first node's rank loses its peer, the job requeues itself
    and resumes from the last periodic checkpoint, and the run ends as one process trains it."""
    monkeypatch.setenv("SLURM_CONF", str(two_nodes.conf))
    keys = (*SETTINGS, "max_steps=120", "stop=max_steps")
    with one_thread():
        reference, _ = start_run(tiny_data, tmp_path / "one", *keys)
    out = tmp_path / "two"
    job = submitted(tiny_data, out, keys, "slurm.nodes=2", "slurm.tasks_per_node=1", env=two_nodes.env)
    wait_while_running(job, lambda: len(training_rows_so_far(out)) >= 45)
    killed_at = len(training_rows_so_far(out))
    os.kill(training_process(out, rank=1), signal.SIGKILL)
    job_id = json.loads((out / "slurm.json").read_text())["job_id"]
    _start_now(job_id, two_nodes.env)  # requeued by the job itself; SLURM's hold lifted
    output = job.communicate(timeout=300)[0]
    assert job.returncode == 0, output
    (resumed,) = resumes(out)
    # a periodic checkpoint: the last one before the kill (or one written while it was being sent)
    assert resumed % 10 == 0 and 40 <= resumed <= killed_at + 10, (resumed, killed_at)
    first = Path(json.loads((out / "slurm.json").read_text())["stdout"])  # rank 0's log; rank 1's beside it
    logs = first.read_text() + first.with_name(first.name.replace("_0_log", "_1_log")).read_text()
    said = re.findall(r"its training process (.*): requeued, to resume from its last checkpoint", logs)
    assert said and set(said) <= {"lost a peer rank", "was killed by SIGKILL"}, logs  # whichever asked first
    assert_same_training(reference, out)


def training_process(out: Path, rank: int | None = None) -> int:
    """The pid of the `mtl train-multitask` process (of `rank`) that a SLURM job runs for the run in `out`."""
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes().split(b"\0")
            environment = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            b"train-multitask" in command
            and any(entry.startswith(b"SLURM_JOB_ID=") for entry in environment)  # not the submitter
            and (rank is None or f"RANK={rank}".encode() in environment)
            and any(str(out).encode() in part for part in command)
        ):
            return int(proc.name)
    raise AssertionError(f"no training process of rank {rank} for {out}")


def test_a_run_killed_before_it_checkpointed_in_its_job_is_not_requeued_again(slurm, tiny_data, tmp_path):
    """The guard against a loop: a process killed before its attempt wrote a checkpoint (out of
    memory at the same step each time would be) ends the job failed, saying so, never requeued."""
    keys = ("max_steps=100000", "checkpoint_every=100000", "eval_every=100000", "hidden=64")
    out = tmp_path / "killed"
    job = submitted(tiny_data, out, keys)
    wait_while_running(job, lambda: len(training_rows_so_far(out)) >= 5)
    os.kill(training_process(out), signal.SIGKILL)
    output = job.communicate(timeout=120)[0]
    said = "its training process was killed by SIGKILL before it checkpointed in this job: not requeued"
    assert job.returncode != 0 and f"killed: failed: killed: {said}" in output, output
    log = Path(json.loads((out / "slurm.json").read_text())["stderr"]).read_text()
    assert f"error: killed: {said}" in log
    assert resumes(out) == []


def test_a_study_over_two_nodes_spreads_its_array_and_each_member_finishes(
    two_nodes, tiny_data, tmp_path, monkeypatch, capsys
):
    """Each member asks for a node's two GPUs (`slurm.gpus_per_node=2`, one process): the array's two
    jobs cannot share a node, and SLURM runs one on each."""
    monkeypatch.setenv("SLURM_CONF", str(two_nodes.conf))
    base = [a for a in args_for(tiny_data, tmp_path, "precision=fp32") if not a.startswith("out=")]
    out = tmp_path / "study"
    spread = ("slurm.gpus_per_node=2", "slurm.tasks_per_node=1")
    assert main(["sweep", *base, "steps_nli=2,3", f"out={out}", *SLURM, *spread]) == 0
    assert "2 runs in" in capsys.readouterr().out
    jobs = json.loads((out / "slurm-jobs.json").read_text())
    nodes = {}
    for name, job in jobs.items():
        assert json.loads((out / name / "summary.json").read_text())["global_step"] == 10
        shown = subprocess.run(
            ["scontrol", "show", "job", job["job_id"]],
            capture_output=True,
            text=True,
            env=two_nodes.env,
            check=True,
        ).stdout
        nodes[name] = re.search(r"^\s*NodeList=(\S+)", shown, re.M)[1]
    assert sorted(nodes.values()) == sorted(two_nodes.node_names), nodes
