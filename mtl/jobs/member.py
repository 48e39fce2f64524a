"""One training run of a study: its `train-multitask` keys and its folder, started new or resumed
from where its folder says it stands."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from mtl import metrics
from mtl.runs import RunFolder, RunStatus, read_record


@dataclass
class Member:
    name: str
    overrides: list[str]  # key=value for train-multitask
    run_dir: Path
    arm: str = ""  # the study's arm it is a seed of (a study names it; never parsed from the name)
    seed: int | None = None  # its seed in the study

    def __post_init__(self) -> None:
        self.arm = self.arm or self.name  # outside a study (a sweep's member): its own arm

    def status(self) -> str:
        """`finished`, `interrupted` (resumed when launched again), or `new`."""
        status = RunFolder(self.run_dir).status()
        return status.value if status in (RunStatus.FINISHED, RunStatus.INTERRUPTED) else "new"

    def arguments(self) -> list[str]:
        """The `mtl` command line that trains it from where it stands: a new run, or `resume=`."""
        if self.status() == "interrupted":
            return ["train-multitask", f"resume={self.run_dir}"]
        return ["train-multitask", *self.overrides]

    def command(self) -> list[str]:
        return [sys.executable, "-m", "mtl", *self.arguments()]


def progress(run_dir: Path) -> tuple[int | None, int | None]:
    """(the last step the run logged, its planned max_steps) from the tail of its metrics.jsonl:
    only the tail is read, however long the run."""
    step = None
    try:
        with open(RunFolder(run_dir).metrics, "rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - 4096))
            tail = file.read().splitlines()
    except OSError:
        tail = []
    for line in reversed(tail):
        try:
            value = json.loads(line).get(metrics.GLOBAL_STEP)
        except (ValueError, AttributeError):
            continue  # a line cut by the seek, or one being written
        if isinstance(value, int):
            step = value
            break
    planned = None
    if step is not None:
        record = read_record(RunFolder(run_dir).record) or {}
        planned = ((record.get("config") or {}).get("optim") or {}).get("max_steps")
    return step, planned if isinstance(planned, int) else None


def member_progress(member: Member) -> str:
    """`<name> step N/M` (M: the planned steps, when the run has a fixed number)."""
    step, planned = progress(member.run_dir)
    if step is None:
        return f"{member.name} starting"
    return f"{member.name} step {step}" + (f"/{planned}" if planned else "")
