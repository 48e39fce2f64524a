"""One training run of a study: its `train-multitask` keys and its folder, started new or resumed
from where its folder says it stands."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from mtl.runs import RunFolder, RunStatus


@dataclass
class Member:
    name: str
    overrides: list[str]  # key=value for train-multitask
    run_dir: Path

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
