"""Where a study's runs train: `launcher=local` (this machine, `parallel=` at a time),
`launcher=slurm` (a SLURM cluster, `slurm.<key>=`), or a launcher a plugin registers
(`register_launcher`). The keys are the study's own, never a run's."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Protocol

from mtl.config import (
    AtLeast1,
    OneOf,
    apply_overrides,
    given_value,
    key_owners_of,
    options_field,
    settle_options,
)
from mtl.errors import UserError
from mtl.jobs.local import LocalLauncher
from mtl.jobs.member import Member
from mtl.jobs.slurm import INTERRUPTED, SlurmConfig, SlurmLauncher
from mtl.plugins import adds_to


class Launcher(Protocol):
    name: str

    def run(self, members: list[Member], out: Path, label: str) -> dict[str, str]:
        """Train each unfinished member (resume the interrupted); each member's outcome."""
        ...


# name -> what makes the launcher from the study's launcher keys (a LauncherConfig)
LAUNCHERS: dict[str, Callable[[LauncherConfig], Launcher]] = {}
LAUNCHER_OPTIONS: dict[str, type] = {}  # name -> the dataclass of a launcher's own keys
# name -> the section of LauncherConfig whose dotted keys (`slurm.time=`) are that launcher's alone
LAUNCHER_SECTIONS: dict[str, str] = {}


def register_launcher(
    name: str, options: type | None = None, section: str = ""
) -> Callable[[Callable], Callable]:
    """Make a launcher available to launcher=NAME: a decorator on a function (or class) taking the
    study's launcher keys (`config.launcher_options.<key>`: `options`' fields, flat on the command
    line once launcher=NAME is chosen) and returning a `Launcher`. `section`: a field of
    LauncherConfig holding keys typed dotted (`slurm.`), for keys whose short names a study's own
    would shadow (time=, nodes=, setup=)."""
    if options is not None:
        if not dataclasses.is_dataclass(options):
            raise TypeError(f"launcher {name!r}: register_launcher(options=) takes a dataclass of its keys")
        LAUNCHER_OPTIONS[name] = options
    if section:
        LAUNCHER_SECTIONS[name] = section
    return adds_to(LAUNCHERS, name)


@dataclass
class LocalOptions:
    parallel: AtLeast1 = 1  # launcher=local: runs at once (each then gets cores/parallel threads)


@dataclass
class LauncherConfig:
    launcher: Annotated[str, OneOf(LAUNCHERS)] = (
        "local"  # where the runs train: local (this machine), slurm, or a plugin's
    )
    slurm: SlurmConfig = field(default_factory=SlurmConfig)  # launcher=slurm's keys, typed slurm.<key>=
    # The chosen launcher's own keys (local: parallel=; a plugin's, register_launcher(options=)),
    # flat on the command line
    launcher_options: Any = options_field("launcher", lambda: LAUNCHER_OPTIONS)

    def __post_init__(self) -> None:
        settle_options(self)


def is_launcher_key(arg: str) -> bool:
    key = arg.partition("=")[0]
    return key in ("launcher", *key_owners_of(LAUNCHER_OPTIONS)) or key.split(".", 1)[0] in (
        LAUNCHER_SECTIONS.values()
    )


def split_launcher_keys(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the launcher's keys, every other argument), each in order."""
    return [a for a in args if is_launcher_key(a)], [a for a in args if not is_launcher_key(a)]


def launcher_from(args: Sequence[str]) -> Launcher:
    chosen = given_value(args, "launcher", "") or LauncherConfig.launcher
    owners = key_owners_of(LAUNCHER_OPTIONS)
    for arg in args:  # before the keys are read: a plugin launcher's key given with another one
        takers = owners.get(arg.partition("=")[0], [])
        if takers and chosen not in takers:
            raise UserError(f"{arg}: a key of launcher={' or '.join(takers)}, not of launcher={chosen}")
    config = apply_overrides(LauncherConfig(), list(args))
    for name, section in LAUNCHER_SECTIONS.items():
        if config.launcher != name and (dotted := [a for a in args if a.startswith(f"{section}.")]):
            raise UserError(f"{dotted[0]} needs launcher={name}")
    return LAUNCHERS[config.launcher](config)


register_launcher("local", options=LocalOptions)(
    lambda config: LocalLauncher(config.launcher_options.parallel)
)
register_launcher("slurm", section="slurm")(lambda config: SlurmLauncher(config.slurm))


def check_outcomes(outcomes: dict[str, str]) -> None:
    """Stop a study whose runs did not all finish: one line naming the failed ones (exit 2), or,
    none failed, the interrupted ones, resumable (exit 130, as a run stopped by Ctrl-C)."""
    if failed := [name for name, outcome in outcomes.items() if outcome.startswith("failed")]:
        raise UserError(f"{', '.join(failed)} failed: see its output above, then run the same command again")
    if stopped := [name for name, outcome in outcomes.items() if outcome == INTERRUPTED]:
        raise KeyboardInterrupt(f"{', '.join(stopped)} {INTERRUPTED}")
