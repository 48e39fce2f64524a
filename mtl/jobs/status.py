"""`just status <study or run>` and `just cancel <study or run>`: where each run of a study stands
(pending, running, requeued, finished, interrupted, failed with its one-line error), its step and
an estimate of the time left from its own pace, and its SLURM job; and stopping a study's jobs.
Read from the folders and SLURM's queue only, from any shell on the cluster's login node."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtl.config import paths_and_keys
from mtl.errors import UserError
from mtl.files.locks import FolderInUse, FolderLock
from mtl.jobs.member import progress
from mtl.jobs.slurm import RUN_FILE, queue_states
from mtl.runs import RunFolder, RunStatus, sweep_members

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
    """A study's runs by name (from its sweep.json), or the one run `folder` is."""
    record = folder / "sweep.json"
    if record.is_file():
        return sweep_members(record)
    if RunFolder(folder).status() is not RunStatus.NOT_A_RUN or (folder / RUN_FILE).is_file():
        return {folder.name: folder}
    raise UserError(f"{folder} is neither a study (sweep.json) nor a run folder: pass runs/sweeps/<study>")


def job_of(run_dir: Path) -> dict[str, Any] | None:
    try:
        job = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return job if isinstance(job, dict) and isinstance(job.get("job_id"), str) else None


def states(folder: Path) -> list[MemberState]:
    members = members_of(folder)
    jobs = {name: job_of(run_dir) for name, run_dir in members.items()}
    queued = queue_states([job["job_id"] for job in jobs.values() if job is not None])
    found = []
    for name, run_dir in members.items():
        job = jobs[name]
        in_queue = queued.get(job["job_id"]) if job is not None else None
        step, planned = progress(run_dir)
        found.append(
            MemberState(
                name,
                state_of(run_dir, job, in_queue),
                f"{step}" + (f"/{planned}" if planned else "") if step is not None else "-",
                eta(run_dir, step, planned)
                if in_queue == "RUNNING" or (job is None and _running_here(run_dir))
                else "-",
                job["job_id"] if job is not None else "-",
            )
        )
    return found


def state_of(run_dir: Path, job: dict[str, Any] | None, in_queue: str | None) -> str:
    folder = RunFolder(run_dir)
    status = folder.status()
    if status is RunStatus.FINISHED:
        return "finished"
    if in_queue is not None:
        return QUEUE_WORDS.get(in_queue, in_queue.lower())
    if job is None and _running_here(run_dir):
        return "running (here)"
    error = _last_error(job) if job is not None else None
    if error:
        return f"failed: {error}"
    if status is RunStatus.INTERRUPTED:
        return "interrupted (resumable: run the same command again)"
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


def _last_error(job: dict[str, Any]) -> str | None:
    """The last `error:` line of a job's logs: mtl's one-line error, or the job's own."""
    lines: list[str] = []
    for key in ("stdout", "stderr"):
        try:
            lines += Path(str(job.get(key))).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
    errors = [line.strip() for line in lines if line.strip().startswith("error:")]
    return errors[-1].removeprefix("error:").strip()[:160] if errors else None


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
    ids = [job["job_id"] for job in jobs.values() if job is not None]
    if not ids:
        raise UserError(f"{folder}'s runs were not launched on SLURM: stop a local study with Ctrl-C")
    queued = queue_states(ids)
    if not queued:
        print(f"{folder}: none of its {len(ids)} jobs is queued or running")
        return
    done = subprocess.run(["scancel", *sorted(queued)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise UserError(f"scancel refused ({done.stderr.strip().splitlines()[-1][:200]})")
    print(
        f"{folder}: cancelled {len(queued)} jobs ({', '.join(sorted(queued))}); each run checkpoints and stays resumable"
    )
