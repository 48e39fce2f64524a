"""Where a study's runs train: `launcher=local` (this machine, `parallel=` at a time) or
`launcher=slurm` (a SLURM cluster, `slurm.<key>=`). The keys are the study's own, never a run's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from mtl.config import AtLeast1, apply_overrides
from mtl.errors import UserError
from mtl.jobs.local import LocalLauncher
from mtl.jobs.member import Member
from mtl.jobs.slurm import INTERRUPTED, SlurmConfig, SlurmLauncher


class Launcher(Protocol):
    name: str

    def run(self, members: list[Member], out: Path, label: str) -> dict[str, str]:
        """Train each unfinished member (resume the interrupted); each member's outcome."""
        ...


@dataclass
class LauncherConfig:
    launcher: Literal["local", "slurm"] = "local"  # where the runs train: this machine, or SLURM
    parallel: AtLeast1 = 1  # launcher=local: runs at once (each then gets cores/parallel threads)
    slurm: SlurmConfig = field(default_factory=SlurmConfig)


def is_launcher_key(arg: str) -> bool:
    key = arg.partition("=")[0]
    return key in ("launcher", "parallel") or key.startswith("slurm.")


def split_launcher_keys(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the launcher's keys, every other argument), each in order."""
    return [a for a in args if is_launcher_key(a)], [a for a in args if not is_launcher_key(a)]


def launcher_from(args: Sequence[str]) -> Launcher:
    config = apply_overrides(LauncherConfig(), list(args))
    if config.launcher == "slurm":
        if config.parallel != 1:
            raise UserError(
                "parallel= is launcher=local's: under launcher=slurm give slurm.array_parallelism="
            )
        return SlurmLauncher(config.slurm)
    if any(a.startswith("slurm.") for a in args):
        raise UserError(f"{next(a for a in args if a.startswith('slurm.'))} needs launcher=slurm")
    return LocalLauncher(config.parallel)


def check_outcomes(outcomes: dict[str, str]) -> None:
    """Stop a study whose runs did not all finish: one line naming the failed ones (exit 2), or,
    none failed, the interrupted ones, resumable (exit 130, as a run stopped by Ctrl-C)."""
    if failed := [name for name, outcome in outcomes.items() if outcome.startswith("failed")]:
        raise UserError(f"{', '.join(failed)} failed: see its output above, then run the same command again")
    if stopped := [name for name, outcome in outcomes.items() if outcome == INTERRUPTED]:
        raise KeyboardInterrupt(f"{', '.join(stopped)} {INTERRUPTED}")
