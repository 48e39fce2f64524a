"""`just train-multitask`, where it trains: here (the default), or as a SLURM job with
`launcher=slurm` (one process per GPU of `slurm.nodes=` nodes, started by srun, one process group
as under torchrun). The command follows the job until it ends; `just status` and `just cancel`
follow and stop it from any shell."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from mtl.errors import UserError
from mtl.jobs.launchers import launcher_from, split_launcher_keys
from mtl.jobs.local import LocalLauncher
from mtl.jobs.member import Member
from mtl.jobs.slurm import INTERRUPTED
from mtl.runs import RunFolder, read_summary
from mtl.train.config.command_line import config_from_command, format_summary, resumed_run
from mtl.train.config.train_config import TrainConfig


def config_to_print(args: Sequence[str]) -> TrainConfig:
    from mtl.train.loop import run  # torch: only to print the config resolved for this machine

    return run.config_to_print(split_launcher_keys(args)[1])


def command(args: Sequence[str]) -> None:
    launcher_args, rest = split_launcher_keys(args)
    launcher = launcher_from(launcher_args)
    if isinstance(launcher, LocalLauncher):
        from mtl.train.loop import (
            run,  # torch and the trainer: where this process trains, not where it submits
        )

        run.command(rest)
        return
    resumed, overrides = resumed_run(rest)
    config = config_from_command(rest)  # a wrong key stops here, before anything is submitted
    if resumed is None:  # a new run: its folder named now, so that every attempt trains into it
        run_dir = Path(
            config.run.out or f"runs/{config.run.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        ).expanduser()
        overrides = [a for a in overrides if not a.startswith("out=")] + [f"out={run_dir}"]
    else:
        run_dir = Path(resumed).expanduser()
    member = Member(run_dir.name, overrides, run_dir)
    outcome = launcher.run([member], run_dir, f"run {run_dir.name}")[member.name]
    if outcome.startswith("failed"):
        raise UserError(f"the run's job {outcome}")
    if outcome == INTERRUPTED:  # scancel, a preemption: checkpointed, as after Ctrl-C (exit 130)
        raise KeyboardInterrupt(f"run {run_dir} {INTERRUPTED}")
    if (summary := read_summary(RunFolder(run_dir).summary)) is not None:
        print(format_summary(run_dir, summary))
