"""`just status <study or run>` and `just cancel <study or run>`: where each run of a study stands
(pending, running, requeued, finished, interrupted, failed with its one-line error), its step and
an estimate of the time left from its own pace, and its SLURM job; and stopping a study's jobs.
Read from the folders and SLURM's queue only, from any shell on the cluster's login node."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtl.config import paths_and_keys
from mtl.console import say
from mtl.errors import UserError
from mtl.files.locks import FolderInUse, FolderLock
from mtl.files.schemas import DamagedFile
from mtl.jobs.member import progress
from mtl.jobs.slurm import INTERRUPTED, RUN_FILE, NoSlurmHere, QueuedJob, job_record, last_error, queue_states
from mtl.runs import RunFolder, RunStatus, sweep_members, sweep_records

QUEUE_WORDS = {"PENDING": "pending", "RUNNING": "running", "REQUEUED": "requeued", "REQUEUE_HOLD": "requeued"}


@dataclass
class StatusConfig:
    """`just status FOLDER` (a sweep's, versus-single's, or one run's); no keys of its own."""


@dataclass
class MemberState:
    name: str
    state: str
    step: str
    eta: str
    job: str


def members_of(folder: Path) -> dict[str, Path]:
    """A study's runs by name (from its sweep.json, or its parts' one level down: a `just study`'s
    arms/, a tuning's trials/; named <part>/<run> when there are several), or the one run `folder` is."""
    if records := sweep_records(folder):
        return {
            (f"{record.parent.name}/{name}" if len(records) > 1 else name): run_dir
            for record in records
            for name, run_dir in sweep_members(record).items()
        }
    if RunFolder(folder).status() is not RunStatus.NOT_A_RUN or (folder / RUN_FILE).is_file():
        return {folder.name: folder}
    raise UserError(f"{folder} is neither a study (sweep.json) nor a run folder: pass runs/sweeps/<study>")


def job_of(run_dir: Path) -> dict[str, Any] | None:
    """The run's SLURM record (slurm.json), or None; a damaged one is said on stderr and left out."""
    try:
        return job_record(run_dir)
    except DamagedFile as error:
        say(f"warning: {error}")
        return None


def states(folder: Path) -> list[MemberState]:
    members = members_of(folder)
    jobs = {name: job_of(run_dir) for name, run_dir in members.items()}
    try:
        queued = queue_states({name: job for name, job in jobs.items() if job is not None})
    except NoSlurmHere as error:
        if any(job is not None for job in jobs.values()):
            say(f"note: {error}: each run's state is read from its folder alone")
        queued = {}
    found = []
    for name, run_dir in members.items():
        job = jobs[name]
        in_queue = queued.get(name)
        step, planned = progress(run_dir)
        running = in_queue is not None and in_queue.ours is not False and in_queue.state == "RUNNING"
        found.append(
            MemberState(
                name,
                state_of(run_dir, job, in_queue),
                f"{step}" + (f"/{planned}" if planned else "") if step is not None else "-",
                eta(run_dir, step, planned) if running or (job is None and _running_here(run_dir)) else "-",
                job["job_id"] if job is not None else "-",
            )
        )
    return found


def state_of(run_dir: Path, job: dict[str, Any] | None, in_queue: QueuedJob | None) -> str:
    folder = RunFolder(run_dir)
    status = folder.status()
    if status is RunStatus.FINISHED:
        return "finished"
    if in_queue is not None and in_queue.ours is False:
        return f"job {job['job_id'] if job else '?'} is now another job ({in_queue.state.lower()}): not this run's"
    if in_queue is not None:
        word = QUEUE_WORDS.get(in_queue.state, in_queue.state.lower())
        if in_queue.shown != in_queue.state.lower():  # pending, and SLURM says why
            word = f"{word} ({in_queue.reason})"
        return word if in_queue.ours else f"{word} (a job with its id; recorded before jobs were checked)"
    if job is None and _running_here(run_dir):
        return "running (here)"
    error = last_error(job) if job is not None else None
    if error:
        return f"failed: {error}"
    if status is RunStatus.INTERRUPTED:
        return INTERRUPTED
    return "not started" if status is RunStatus.EMPTY else status.value


def _running_here(run_dir: Path) -> bool:
    """Whether a process holds the run's one-writer lock (a local run training now)."""
    if not run_dir.is_dir():
        return False
    try:
        FolderLock(run_dir, "run folder", "out").acquire().release()
    except FolderInUse:
        return True
    except UserError:
        return False
    return False


def eta(run_dir: Path, step: int | None, planned: int | None) -> str:
    """The time left at the run's pace since it (last) started writing its log."""
    folder = RunFolder(run_dir)
    if not step or not planned:
        return "-"
    try:
        started, last = folder.record.stat().st_mtime, folder.metrics.stat().st_mtime
    except OSError:
        return "-"
    if last <= started:
        return "-"
    left = (planned - step) * (last - started) / step
    return f"~{left / 60:.0f} min" if left >= 60 else f"~{left:.0f} s"


def table(rows: list[MemberState]) -> str:
    header = MemberState("run", "state", "step", "left", "job")
    widths = [max(len(getattr(r, f)) for r in [header, *rows]) for f in ("name", "step", "eta", "job")]
    return "\n".join(
        f"{r.name:<{widths[0]}}  {r.step:>{widths[1]}}  {r.eta:>{widths[2]}}  {r.job:<{widths[3]}}  {r.state}"
        for r in [header, *rows]
    )


def _folder(args: Sequence[str], command: str) -> Path:
    paths, keys = paths_and_keys(args)
    if keys:
        raise UserError(f"just {command} takes a folder only, not {keys[0]}")
    if len(paths) != 1:
        raise UserError(f"just {command} takes one folder: a study's (runs/sweeps/<study>) or a run's")
    folder = Path(paths[0]).expanduser()
    if not folder.is_dir():
        raise UserError(f"{folder} is not a folder: pass a study's folder or a run's")
    return folder


def command(args: Sequence[str]) -> None:
    """`just status FOLDER`."""
    folder = _folder(args, "status")
    print(f"{folder} at {time.strftime('%H:%M:%S')}:")
    print(table(states(folder)))


def cancel(args: Sequence[str]) -> None:
    """`just cancel FOLDER`: scancel every queued or running job of the study; the runs checkpoint
    (SLURM's SIGTERM) and stay resumable."""
    folder = _folder(args, "cancel")
    jobs = {name: job_of(run_dir) for name, run_dir in members_of(folder).items()}
    records = {name: job for name, job in jobs.items() if job is not None}
    if not records:
        raise UserError(f"{folder}'s runs were not launched on SLURM: stop a local study with Ctrl-C")
    try:
        queued = queue_states(records)
    except NoSlurmHere as error:
        raise UserError(f"{error}: cancel the study from the cluster's login node") from None
    to_cancel = sorted({records[name]["job_id"] for name, q in queued.items() if q.ours})
    # another's job under a recorded id is never touched
    for job, known in sorted(
        {(records[name]["job_id"], q.ours) for name, q in queued.items() if not q.ours}, key=str
    ):
        if known is False:
            say(f"note: job {job} is not this study's now: not cancelled")
        else:
            say(
                f"note: job {job} cannot be told from another job with its id (recorded before mtl checked "
                f"jobs): not cancelled; scancel {job} yourself if it is this study's"
            )
    if not to_cancel:
        print(f"{folder}: none of its {len(records)} jobs is queued or running")
        return
    done = subprocess.run(["scancel", *to_cancel], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise UserError(f"scancel refused ({done.stderr.strip().splitlines()[-1][:200]})")
    print(
        f"{folder}: cancelled {len(to_cancel)} jobs ({', '.join(to_cancel)}); each run checkpoints and stays resumable"
    )
