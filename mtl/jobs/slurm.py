"""`launcher=slurm`: a study's runs as one SLURM job array, or one run over nodes and GPUs, through
submitit (what hydra, fairseq and detectron2 submit with).

Each job runs `mtl train-multitask` in its own folder, new or resumed from where the folder
stands: a job requeued (preempted, near its time limit, `scontrol requeue`) starts again and
resumes from its last checkpoint, and a finished member is never trained again. Before the time
limit SLURM sends USR2 (`--signal`, `slurm.signal_s`): the run checkpoints after its step and
stops, then the job requeues itself; a preemption's or a requeue's SIGTERM is taken the same way.
Every job's id and logs are recorded in the study folder (`slurm-jobs.json`) and in its run
folder (`slurm.json`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import secrets
import shlex
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, NamedTuple

from pydantic import Field
from tqdm.auto import tqdm

from mtl.config import AtLeast0, AtLeast1, as_name, comma_list
from mtl.errors import UserError, printable
from mtl.files import atomic, jsonfile
from mtl.files.locks import this_cluster
from mtl.files.schemas import Record, read_json
from mtl.jobs.member import Member, member_progress
from mtl.runs import RunFolder
from mtl.runtime.ranks import LOST_A_PEER
from mtl.train.config.command_line import config_from_args
from mtl.train.config.inputs import resolve_inputs


class SlurmJob(Record):
    """<run>/slurm.json: the SLURM job that trains the run, and how to know it again. `cluster` and
    `comment` (since jobs are checked before they are acted on; absent in older records) tell this
    job from another that got the same id: another cluster's, or one after ids were reused."""

    job_id: Annotated[str, Field(pattern=r"^[0-9]+(_[0-9]+)?$")]
    stdout: str = ""
    stderr: str = ""
    run: str = ""
    submitted: str = ""
    cluster: str | None = None
    comment: str | None = None


JOBS_FILE = "slurm-jobs.json"  # in the study folder: member -> job id, logs, run folder
RUN_FILE = "slurm.json"  # in a run folder: the job that trains it
POLL_S = 2.0
# sbatch's --mail-type values
MAIL_TYPES = {
    "NONE", "BEGIN", "END", "FAIL", "REQUEUE", "ALL", "INVALID_DEPEND", "STAGE_OUT", "TIME_LIMIT",
    "TIME_LIMIT_90", "TIME_LIMIT_80", "TIME_LIMIT_50", "ARRAY_TASKS",
}  # fmt: skip


@dataclass
class SlurmConfig:
    """The `slurm.<key>=` keys: what each job asks SLURM for."""

    DOTTED_KEYS: ClassVar[bool] = True  # typed and listed as slurm.<key>= (never short)

    partition: str = ""  # the partition (queue); empty: the cluster's default
    time: AtLeast1 = 60  # each job's time limit in minutes; the run checkpoints and requeues before it
    nodes: AtLeast1 = 1  # nodes per job (one run over several nodes: one process per GPU on each)
    gpus_per_node: AtLeast0 = 0  # GPUs per node; one process per GPU (0: one process on CPUs)
    tasks_per_node: AtLeast0 = 0  # processes per node; 0: one per GPU (one without GPUs)
    cpus_per_task: AtLeast1 = 1  # CPU cores per process
    mem: str = ""  # memory per node, as sbatch takes it (32G); empty: the partition's default
    account: str = ""  # the account charged
    qos: str = ""  # the quality of service
    constraint: str = ""  # node features (a100, ...)
    array_parallelism: AtLeast1 = 256  # a study's jobs running at once
    setup: str = ""  # shell lines run first, ';'-separated (module load cuda; . .venv/bin/activate)
    extra: str = ""  # any other sbatch options, as is, space-separated (--exclusive --reservation=r)
    signal_s: AtLeast1 = 120  # seconds before the time limit that SLURM signals a job to checkpoint
    mail_user: str = ""  # where SLURM mails a job's state changes (sbatch --mail-user); empty: no mail
    mail_type: str = (
        "END,FAIL"  # which changes, with mail_user (sbatch --mail-type: BEGIN, REQUEUE, ALL, ...)
    )

    def __post_init__(self) -> None:
        if self.extra.strip():
            _sbatch_options(self.extra)  # refused now, before anything is submitted
        if bad := [kind for kind in comma_list(self.mail_type) if kind.upper() not in MAIL_TYPES]:
            raise UserError(
                f"slurm.mail_type={self.mail_type}: {bad[0]!r} is not one of sbatch's --mail-type values "
                f"({', '.join(sorted(MAIL_TYPES))})"
            )

    def executor_parameters(self) -> dict[str, Any]:
        """The keys as submitit's SlurmExecutor takes them."""
        processes = self.tasks_per_node or max(1, self.gpus_per_node)
        parameters: dict[str, Any] = {
            "time": self.time,
            "nodes": self.nodes,
            "ntasks_per_node": processes,
            "cpus_per_task": self.cpus_per_task,
            "array_parallelism": self.array_parallelism,
            "signal_delay_s": self.signal_s,
            "stderr_to_stdout": False,
        }
        if self.gpus_per_node:
            parameters["gpus_per_node"] = self.gpus_per_node
        for key in ("partition", "mem", "account", "qos", "constraint"):
            if value := getattr(self, key):
                parameters[key] = value
        if self.mail_user:
            parameters["mail_user"] = self.mail_user
            parameters["mail_type"] = ",".join(kind.upper() for kind in comma_list(self.mail_type))
        if self.setup.strip():
            parameters["setup"] = [line.strip() for line in self.setup.split(";") if line.strip()]
        if self.extra.strip():
            parameters["additional_parameters"] = _sbatch_options(self.extra)
        return parameters


def _sbatch_options(text: str) -> dict[str, Any]:
    """`--exclusive --reservation=r` as submitit's additional_parameters ({"exclusive": True, ...})."""
    options: dict[str, Any] = {}
    try:
        words = shlex.split(text)
    except ValueError as error:  # an unclosed quote
        raise UserError(
            f"slurm.extra={text!r} is not a list of options ({error}): close its quotes"
        ) from None
    for word in words:
        if not word.startswith("--") or len(word) < 3:
            raise UserError(f"slurm.extra={text!r}: give sbatch options as --name or --name=value")
        name, sep, value = word[2:].partition("=")
        options[name.replace("-", "_")] = value if sep else True
    return options


INTERRUPTED_EXIT = 130  # mtl's exit status after Ctrl-C or SIGTERM, its run checkpointed
INTERRUPTED = "interrupted (resumable: run the same command again)"


class MemberJob:
    """What a SLURM job runs: one member's training, new or resumed.

    `slurm.signal_s` seconds before the time limit SLURM sends USR2 to the job's processes: the
    run (a process of its own) checkpoints and stops, and then this job requeues itself, so the
    requeued job resumes from that checkpoint. (submitit's own protocol requeues at once, and
    the kill that follows a requeue can come before the checkpoint is written.) A preemption or
    `scontrol requeue` sends SIGTERM, which the run takes the same way. A preemption with a grace
    time (the partition's GraceTime) signals the job's processes at once and requeues the job only
    if it still runs when the grace ends: a run that checkpointed within it would end the job as
    completed, never requeued, so the job requeues itself then, as it does before a time limit.

    A training process killed outright (SIGKILL: out of memory, a node's trouble; on several nodes
    the other ranks then lose their peer) writes no checkpoint: the job requeues itself when the run
    has checkpointed since this attempt began, and the requeued job resumes from that checkpoint,
    losing the steps after it. A run killed again before its next checkpoint is left failed and
    resumable (run the same command): it would likely die the same way each time."""

    def __init__(self, member: Member):
        self.member = member

    def __call__(self) -> str:
        _join_the_job_processes()
        warned = []
        signal.signal(signal.SIGUSR2, lambda signum, frame: warned.append(signum))
        checkpoint = _checkpoint_written(self.member.run_dir)
        done = subprocess.run(self.member.command(), check=False)
        if warned and self.member.status() != "finished":
            _requeue_this_job()
        # SIGTERM and SIGINT are SLURM's own stops (scancel, a requeue), taken before the run's handler
        killed = done.returncode < 0 and -done.returncode not in (signal.SIGTERM, signal.SIGINT)
        if killed or done.returncode == LOST_A_PEER:
            how = f"was killed by {_signal_name(-done.returncode)}" if killed else "lost a peer rank"
            if _checkpoint_written(self.member.run_dir) not in (None, checkpoint):
                print(
                    f"{self.member.name}: its training process {how}: requeued, to resume from its last checkpoint"
                )
                _requeue_this_job(by_any_rank=True)
            why = (
                f"{self.member.name}: its training process {how} before it checkpointed in this job: not "
                "requeued (it would likely stop the same way again); run the same command to resume it"
            )
            # on a line of its own (the killed process may have left its progress bar's open): the
            # line the follower and `just status` show
            print(f"\nerror: {printable(why)}", file=sys.stderr, flush=True)
            raise RuntimeError(why)
        if done.returncode == INTERRUPTED_EXIT and self.member.status() == "interrupted":
            if _being_preempted():
                _requeue_this_job()
            # scancel's SIGTERM: the run checkpointed and said so in one line; the job ends as
            # what it is, resumable, not with a traceback of a failure
            return INTERRUPTED
        if done.returncode != 0:
            raise RuntimeError(
                f"{self.member.name}: mtl train-multitask exited with {done.returncode} (its log says why)"
            )
        return self.member.status()


def _checkpoint_written(run_dir: Path) -> tuple[int, int] | None:
    """Which checkpoint the run folder holds now (each is written anew and renamed into place),
    None before its first."""
    try:
        found = os.stat(RunFolder(run_dir).latest)
    except OSError:
        return None
    return found.st_ino, found.st_mtime_ns


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _being_preempted() -> bool:
    """Whether SLURM chose this job for preemption (its PreemptTime is set; scancel sets none)."""
    import submitit

    when = job_fields(submitit.JobEnvironment().job_id).get("PreemptTime", "None")
    return when not in ("None", "Unknown", "")


def job_fields(job_id: str) -> dict[str, str]:
    """What `scontrol show job` says of a job (JobState, NodeList, PreemptTime, ...); {} where it
    knows none. (A job's `Key=Value` words; values with spaces, such as Command's, are cut.)"""
    shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, check=False)
    return dict(word.split("=", 1) for word in shown.stdout.split() if "=" in word)


def _requeue_this_job(by_any_rank: bool = False) -> None:
    """Put this job back in the queue (SLURM stops it now and starts it again later). Rank 0 asks,
    where every rank meets the same reason; `by_any_rank` where one rank alone may know it (its
    process killed: the others may wait on it until their collective's timeout)."""
    import submitit

    environment = submitit.JobEnvironment()
    if environment.global_rank == 0 or by_any_rank:
        done = subprocess.run(
            ["scontrol", "requeue", environment.job_id], capture_output=True, text=True, check=False
        )
        # another rank's request came first: the job is queued again already
        already = by_any_rank and "pending" in done.stderr.lower()
        # otherwise a cluster that allows no requeue: the run is checkpointed all the same
        if done.returncode != 0 and not already:
            raise RuntimeError(
                f"could not requeue job {environment.job_id} ({done.stderr.strip()[:200]}): its run is "
                "checkpointed; run the same command again to resume it"
            )
    time.sleep(600)  # SLURM ends this process; the requeued job starts afresh


def _join_the_job_processes() -> None:
    """One process per GPU (or one on CPUs) of every node, as srun started them: the ranks of one
    process group, found from SLURM's environment as torchrun would give them."""
    import submitit

    environment = submitit.JobEnvironment()
    if environment.num_tasks <= 1:
        return
    os.environ.update(
        {
            "RANK": str(environment.global_rank),
            "LOCAL_RANK": str(environment.local_rank),
            "WORLD_SIZE": str(environment.num_tasks),
            "LOCAL_WORLD_SIZE": str(environment.num_tasks // max(1, environment.num_nodes)),
            "MASTER_ADDR": environment.hostnames[0],
            # each job of an array its own port (SLURM_JOB_ID differs per array task; job_id does not)
            "MASTER_PORT": str(20000 + int(os.environ.get("SLURM_JOB_ID", "0")) % 20000),
        }
    )


@dataclass(frozen=True)
class SlurmLauncher:
    """`launcher=slurm`: the study's unfinished members as one job array."""

    config: SlurmConfig = field(default_factory=SlurmConfig)
    name: str = "slurm"

    def run(self, members: list[Member], out: Path, label: str) -> dict[str, str]:
        outcomes = {m.name: "finished (before)" for m in members if m.status() == "finished"}
        waiting = [m for m in members if m.status() != "finished"]
        print(
            f"{label}: {len(members)} runs in {out}, {len(outcomes)} finished before, {len(waiting)} to submit"
        )
        if not waiting:
            return outcomes
        check_inputs(waiting)
        if self.config.setup.strip() or self.config.extra.strip():  # shell text: shown before it runs
            print(
                f"{label}: each job runs first: {self.config.setup.strip() or '-'}; sbatch options: {self.config.extra.strip() or '-'}"
            )
        jobs = submit(waiting, self.config, out)
        print(
            f"{label}: submitted job {jobs[0].job_id.split('_')[0]} ({len(jobs)} jobs); follow it with just status {out}"
        )
        outcomes.update(wait(dict(zip((m.name for m in waiting), jobs, strict=True)), waiting, label))
        return outcomes


def check_inputs(members: list[Member]) -> None:
    """Every new member's inputs (data folders and builds, the vectors file, a pretrained model)
    found on this machine before anything is submitted: a missing one is one line now, naming
    the run, not the failure of each of its jobs once it starts. (Interrupted members resume from
    the inputs their runs recorded, checked as they resume.)"""
    for member in members:
        if member.status() != "new":
            continue
        try:
            resolve_inputs(config_from_args(member.overrides), download=False)  # each job downloads
        except UserError as error:
            raise UserError(f"{member.name}: {error} (nothing was submitted)") from None


def submit(members: list[Member], config: SlurmConfig, out: Path) -> list[Any]:
    """Submit `members` as one job array (a single member: one job); record each job."""
    try:
        import submitit
    except ModuleNotFoundError:
        raise UserError(
            "launcher=slurm needs submitit: pip install 'mtl[cluster]' (or pip install submitit)"
        ) from None
    check_partition(config)
    logs = out / "slurm"
    executor = submitit.SlurmExecutor(folder=logs)
    # A job id alone is no identity (ids restart after a SLURM reinstall, another cluster has
    # its own): each submission's comment carries a token of its own, which `just status` and
    # `just cancel` (and a stale-lock decision) check before they act on a job; `sacct` shows it.
    comment = f"mtl:{as_name(out.name)[:48]}:{secrets.token_hex(6)}"  # #SBATCH lines split at spaces
    executor.update_parameters(
        job_name=out.name[:64] or "mtl", comment=comment, **config.executor_parameters()
    )
    try:
        with _quiet_stderr(), executor.batch():
            jobs = [executor.submit(MemberJob(member)) for member in members]
    except (subprocess.CalledProcessError, submitit.core.utils.FailedJobError, OSError) as error:
        raise UserError(refusal(error, config)) from None
    records = {}
    for member, job in zip(members, jobs, strict=True):
        record = {
            "job_id": job.job_id,
            "stdout": str(job.paths.stdout),
            "stderr": str(job.paths.stderr),
            "run": str(member.run_dir),
            "submitted": time.strftime("%Y-%m-%d %H:%M:%S"),
            "cluster": this_cluster(),
            "comment": comment,
        }
        records[member.name] = record
        member.run_dir.mkdir(parents=True, exist_ok=True)
        atomic.write_text(member.run_dir / RUN_FILE, jsonfile.dumps(record, indent=2) + "\n", "SLURM record")
    earlier = _read_jobs(out)
    atomic.write_text(
        out / JOBS_FILE, jsonfile.dumps({**earlier, **records}, indent=2) + "\n", "SLURM job record"
    )
    return jobs


class PartitionLimits(NamedTuple):
    """What a partition can grant at most, as sinfo reports it."""

    name: str
    nodes: int
    minutes: int | None  # its time limit; None: unlimited
    gpus_per_node: int | None  # the most GPUs one of its nodes has (GRES); None: sinfo shows none


def partition_limits(partition: str) -> PartitionLimits | None:
    """The limits of `partition` (empty: the default) as sinfo reports them; None when sinfo
    cannot say (sbatch's refusal then speaks)."""
    try:
        done = subprocess.run(
            ["sinfo", "-h", "-a", "-o", "%P|%D|%l|%G"],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    nodes: dict[str, int] = {}
    limits: dict[str, int | None] = {}
    gpus: dict[str, int | None] = {}
    default = None
    for line in done.stdout.splitlines():
        name, count, limit, gres = ([*line.strip().split("|"), "", "", ""])[:4]
        if name.endswith("*"):
            name = default = name[:-1]
        if not count.isdigit():
            continue
        nodes[name] = nodes.get(name, 0) + int(count)  # a partition's lines per node state
        limits[name] = minutes_of(limit)
        most = gpus_of(gres)
        gpus[name] = most if gpus.get(name) is None else max(gpus[name] or 0, most or 0)
    name = partition or default
    return PartitionLimits(name, nodes[name], limits[name], gpus[name]) if name in nodes else None


def gpus_of(gres: str) -> int | None:
    """The GPUs in sinfo's GRES column (`gpu:2`, `gpu:a100:4(S:0-1)`, `gpu:2,shard:8`, `(null)`);
    None where it names none."""
    counts = [int(found[1]) for found in re.finditer(r"(?:^|,)gpu(?::[^:,(]+)?:(\d+)", gres)]
    return sum(counts) if counts else None


def minutes_of(limit: str) -> int | None:
    """sinfo's time limit ([days-]hours:minutes:seconds, minutes:seconds, infinite) in whole minutes."""
    days, _, clock = limit.rpartition("-") if "-" in limit else ("0", "", limit)
    parts = clock.split(":")
    if not days.isdigit() or not all(part.isdigit() for part in parts) or not 1 <= len(parts) <= 3:
        return None  # infinite, UNLIMITED, n/a
    hours, minutes, seconds = [0] * (3 - len(parts)) + [int(part) for part in parts]
    return int(days) * 1440 + hours * 60 + minutes + (seconds > 0)


def check_partition(config: SlurmConfig) -> None:
    """A request the partition can never grant is refused before it is submitted: SLURM would
    queue it, and it would pend forever (slurm.nodes=2 on a one-node partition said only "pending")."""
    found = partition_limits(config.partition)
    if found is None:
        return
    name, nodes, limit, gpus = found
    if config.nodes > nodes:
        raise UserError(
            f"slurm.nodes={config.nodes}: partition {name} has {nodes} node{'s' * (nodes != 1)} (sinfo), so the "
            f"job would pend forever (PartitionNodeLimit): ask for {nodes} at most, or another slurm.partition="
        )
    if limit is not None and config.time > limit:
        raise UserError(
            f"slurm.time={config.time}: partition {name}'s time limit is {limit} minutes (sinfo), so the job "
            f"would pend forever (PartitionTimeLimit): ask for {limit} at most; runs checkpoint and requeue"
        )
    if config.gpus_per_node and config.gpus_per_node > (gpus or 0):
        has = f"at most {gpus} GPUs on a node" if gpus else "no GPUs (no gpu GRES)"
        raise UserError(
            f"slurm.gpus_per_node={config.gpus_per_node}: partition {name} has {has} (sinfo), so no node "
            f"can run the job: ask for {gpus or 0} at most, or another slurm.partition="
        )


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """sbatch's own lines (its refusal, which the error then says in one line) kept off the terminal:
    submitit lets the command write to the process's stderr."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink, contextlib.redirect_stderr(io.StringIO()):
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


# sbatch's words for a refused request, and the key that asked for it
REFUSED_KEYS = {
    "partition": "partition",
    "account": "account",
    "qos": "qos",
    "time limit": "time",
    "feature": "constraint",
    "constraint": "constraint",
    "memory": "mem",
    "node count": "nodes",
    "gres": "gpus_per_node",
    "gpu": "gpus_per_node",
}


def refusal(error: Exception, config: SlurmConfig) -> str:
    """sbatch's refusal in one line, naming the slurm.<key>= that asked for what it refused."""
    text = str(getattr(error, "stderr", None) or error)
    lines = [line.strip() for line in text.splitlines() if "error" in line.lower()] or [text.strip()]
    reason = lines[0].removeprefix("sbatch: error: ")[:200]
    lowered = reason.lower()
    key = next((k for words, k in REFUSED_KEYS.items() if words in lowered), None)
    if key is not None:
        return f"slurm.{key}={getattr(config, key)}: SLURM refused the job ({reason}): fix slurm.{key}="
    return f"SLURM refused the job ({reason}): check the slurm.* keys (just sweep --help lists them)"


def job_record(run_dir: Path) -> dict[str, Any] | None:
    """The run's slurm.json, checked against its schema; None when the run has none."""
    return read_json(Path(run_dir) / RUN_FILE, SlurmJob, "remove it (the run itself is untouched)")


def log_tail(path: str, limit: int = 64 << 10) -> str:
    """The last `limit` bytes of a job's log, read only from a regular file (the path comes from
    a file a colleague may have handed over: a FIFO there would hang the reader, a device or a
    huge file be read whole); '' where there is none."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except (OSError, ValueError):
        return ""
    try:
        size = os.fstat(descriptor)
        if not stat.S_ISREG(size.st_mode):
            return ""
        start = max(0, size.st_size - limit)
        return printable(os.pread(descriptor, limit, start).decode("utf-8", "replace"))
    except OSError:
        return ""
    finally:
        os.close(descriptor)


def _read_jobs(out: Path) -> dict[str, Any]:
    try:
        jobs = json.loads((out / JOBS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return jobs if isinstance(jobs, dict) else {}


@dataclass(frozen=True)
class QueuedJob:
    """A job of `squeue`'s answer, as it was asked about: its state, and whether it is the job the
    record names (None: the record predates identities and cannot be checked); a pending job's
    reason as SLURM gives it (Priority, Resources, PartitionNodeLimit, ...)."""

    state: str
    ours: bool | None
    reason: str = ""

    @property
    def shown(self) -> str:
        """The state in a word, with SLURM's reason while it waits (`pending (PartitionNodeLimit)`)."""
        word = self.state.lower()
        return (
            f"{word} ({self.reason})" if self.state == "PENDING" and self.reason not in ("", "None") else word
        )


class NoSlurmHere(UserError):
    """SLURM's commands are absent (a study copied to a laptop) or do not answer."""


def following_line(queued: dict[str, QueuedJob], members: dict[str, Member]) -> str:
    """What the follower's bar shows after its count: each running run's step (`just status`'s),
    each other queued job's state."""
    return "; ".join(
        member_progress(members[name]) if job.state == "RUNNING" else f"{name} {job.shown}"
        for name, job in sorted(queued.items())
    )


def job_outcome(member: Member, record: dict[str, Any] | None, log: Path) -> str:
    """How a member's job that has left the queue ended: finished; interrupted and resumable (its
    run checkpointed and stopped: scancel, a preemption, a time limit without requeue); or failed,
    with the log's last error line where it has one."""
    status = member.status()
    if status == "finished":
        return "finished"
    error = last_error(record) if record is not None else None
    if status == "interrupted" and error is None:
        return INTERRUPTED
    return f"failed: {error} (log: {log})" if error else f"failed (log: {log})"


def last_error(record: dict[str, Any]) -> str | None:
    """The last `error:` line of a job's logs (its slurm.json `record`): mtl's one-line error, or
    the job's own."""
    lines = [
        line for key in ("stdout", "stderr") for line in log_tail(str(record.get(key) or "")).splitlines()
    ]
    errors = [line.strip() for line in lines if line.strip().startswith("error:")]
    return errors[-1].removeprefix("error:").strip()[:160] if errors else None


def queue_states(records: dict[str, dict[str, Any]]) -> dict[str, QueuedJob]:
    """For each recorded job (by any key: a member's name -> its slurm.json record) that SLURM
    still has queued or running under its id, a QueuedJob under the same key. A job whose id SLURM
    now gives another job (its comment differs; in a record older than comments, its time of
    submission), or that belongs to another cluster, is said so (`ours=False`); it is never acted on."""
    if not records:
        return {}
    here = this_cluster()

    def elsewhere(record: dict[str, Any]) -> bool:
        return bool(record.get("cluster")) and here is not None and record["cluster"] != here

    asked = sorted({r["job_id"].split("_")[0] for r in records.values() if not elsewhere(r)})
    found: dict[str, tuple[str, str]] = {}
    if asked:
        try:  # -r: each array task on its own line (a pending array otherwise shows as 12_[0-3])
            done = subprocess.run(
                ["squeue", "-h", "-r", "-o", "%i|%T|%r|%V|%k", "-j", ",".join(asked)],
                capture_output=True,
                text=True,
                check=False,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise NoSlurmHere(f"SLURM's squeue cannot be asked here ({error})") from None
        for line in done.stdout.splitlines():
            job, state, reason, submitted, comment = ([*line.strip().split("|", 4), "", "", "", ""])[:5]
            found[job] = (state, reason, submitted, comment)
    queued = {}
    for key, record in records.items():
        if elsewhere(record):
            queued[key] = QueuedJob(f"a job of cluster {record['cluster']}", False)
        elif record["job_id"] in found:
            state, reason, submitted, comment = found[record["job_id"]]
            if record.get("comment") is not None:
                ours = comment == record["comment"]
            else:  # an older record: its time of submission, where it has one, tells a reused id
                ours = None if same_submission(record.get("submitted") or "", submitted) else False
            queued[key] = QueuedJob(state, ours, reason)
    return queued


SUBMISSION_SLACK_S = 300  # mtl records a job's time after sbatch answers, by the login node's clock


def same_submission(recorded: str, submitted: str) -> bool:
    """Whether SLURM's submit time of a job (squeue's %V, 2026-12-02T04:12:00) can be the one a
    record wrote (2026-12-02 04:12:01); True where either is missing or unreadable (no evidence)."""
    try:
        ours = time.mktime(time.strptime(recorded, "%Y-%m-%d %H:%M:%S"))
        theirs = time.mktime(time.strptime(submitted, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return True
    return abs(ours - theirs) <= SUBMISSION_SLACK_S


def wait(jobs: dict[str, Any], members: list[Member], label: str) -> dict[str, str]:
    """Follow the jobs until none is queued or running; each member's outcome, from its folder.
    Ctrl-C stops the following, not the jobs."""
    by_name = {m.name: m for m in members}
    records = {name: job_record(by_name[name].run_dir) for name in jobs}
    bar = tqdm(total=len(jobs), desc=label, unit=" runs")
    left = dict(jobs)
    outcomes: dict[str, str] = {}
    try:
        while left:
            time.sleep(POLL_S)
            queued = queue_states(
                {name: records[name] or {"job_id": job.job_id} for name, job in left.items()}
            )
            for name, job in list(left.items()):
                if name in queued and queued[name].ours is not False:
                    continue
                outcomes[name] = job_outcome(by_name[name], records[name], job.paths.stdout)
                bar.write(f"  {name}: {outcomes[name]}")
                bar.update(1)
                del left[name]
            bar.set_postfix_str(following_line(queued, by_name))
    except KeyboardInterrupt:
        raise KeyboardInterrupt(
            f"{label}: stopped following; its jobs run on (just status, just cancel)"
        ) from None
    finally:
        bar.close()
    return outcomes
