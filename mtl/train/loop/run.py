"""Start a run in a new folder, or resume one exactly where its last checkpoint left it."""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch.distributed

from mtl import metrics, plugins
from mtl.config import to_dict
from mtl.console import say
from mtl.errors import UserError
from mtl.files.atomic import check_output_dir
from mtl.formats.run_files import write_config
from mtl.published import published_for_command
from mtl.runs import RunFolder, RunStatus
from mtl.runtime.device import resolve_device
from mtl.runtime.distributed import Distributed
from mtl.train.callbacks.base import Callback
from mtl.train.config.command_line import (
    already_finished,
    check_resume_overrides,
    config_from_args,
    config_from_command,
    format_summary,
    resumed_run,
)
from mtl.train.config.inputs import resolve_inputs
from mtl.train.config.record import read_run_record
from mtl.train.config.resolve import resolve_settings
from mtl.train.config.train_config import TrainConfig, recorded_config, with_overrides
from mtl.train.data.training_data import changed_inputs
from mtl.train.loop.trainer import Trainer


def start(
    config: TrainConfig,
    command: Sequence[str] = (),
    progress: bool = True,
    dist: Distributed | None = None,
    callbacks: Sequence[Callback] = (),
) -> tuple[Path, dict[str, Any]]:
    """Train `config` in a new run folder (under torchrun, on every rank; rank 0 writes the folder);
    `callbacks`: this process's own callback objects, after the run's (not recorded)."""
    dist = dist or Distributed.from_environment()
    with contextlib.ExitStack() as held:  # rank 0 holds the folder's lock until training ends
        run_dir = dist.main_first(lambda: new_run_folder(config, held), others_too=False)
        return train_new(config, run_dir, command, progress, dist, callbacks)


def train_new(
    config: TrainConfig,
    run_dir: Path,
    command: Sequence[str],
    progress: bool,
    dist: Distributed,
    callbacks: Sequence[Callback] = (),
) -> tuple[Path, dict[str, Any]]:
    """Train `config` from step 0 in `run_dir`, a folder this job holds and has emptied."""
    config = dist.main_first(lambda: resolve_inputs(config))  # a download happens once, on rank 0
    command_line = shlex.join(["just", "train-multitask", *command])
    trainer = Trainer(
        config, run_dir, progress=progress, dist=dist, command=command_line, callbacks=callbacks
    )
    if dist.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        record = {
            "config": to_dict(trainer.run.config),  # every auto and None setting made concrete
            "command": command_line,
            "inputs": trainer.run.data.fingerprints,
            "world_size": dist.world_size,
            "python": sys.version.split()[0],
            "plugins": plugins.records(),  # resuming needs them given again (or installed)
            # each task's metric and its direction, so a reader of the folder needs no task's code
            "metrics": {
                name: {"metric": task.metric, "higher_is_better": metrics.higher_is_better(task.metric)}
                for name, task in trainer.run.data.tasks.items()
            },
        }
        if figures := published_for_command(command):  # what its paper reports (`just reproduce`)
            record["published"] = figures
        write_config(run_dir / "config.json", record)
    return run_dir, trainer.fit()


def new_run_folder(config: TrainConfig, held: contextlib.ExitStack) -> Path:
    """The folder `config` asks for (runs/<name>-<time> by default), locked by `held` and free.

    A folder whose run stopped before its first checkpoint is emptied and reused; anything
    else already there is refused. Both are decided with the lock in hand, so a run that is
    still starting is never taken for a dead one.
    """
    run_dir = Path(config.run.out or f"runs/{config.run.name}-{time.strftime('%Y%m%d-%H%M%S')}").expanduser()
    check_output_dir(run_dir, "out")
    folder = RunFolder(run_dir)
    held.enter_context(folder.lock("out"))
    folder.remove_partial_files()
    status = folder.status()
    if status is RunStatus.NEVER_CHECKPOINTED:
        print(f"{run_dir} stopped before its first checkpoint: starting it again")
        folder.clear()
    elif status is not RunStatus.EMPTY:
        raise UserError(f"run folder {run_dir} already exists: choose another out= or resume={run_dir}")
    return run_dir


def resume(
    run_dir: str | Path,
    progress: bool = True,
    overrides: Sequence[str] = (),
    dist: Distributed | None = None,
    callbacks: Sequence[Callback] = (),
) -> tuple[Path, dict[str, Any]]:
    """Continue `run_dir` with its recorded config and inputs, refusing inputs that changed since;
    `callbacks` as `start`'s.

    The number of processes may differ from the run's start: batches are global.
    """
    run_dir = Path(run_dir).expanduser()
    check_resume_overrides(overrides)
    dist = dist or Distributed.from_environment()
    with contextlib.ExitStack() as held:  # rank 0 holds the folder's lock until training ends
        record, restart = dist.main_first(lambda: resumable_record(run_dir, held), others_too=False)
        config = with_overrides(recorded_config(record["config"], str(run_dir / "config.json")), overrides)
        if restart:
            config.run.out = str(run_dir)
            command = shlex.split(record.get("command", ""))[2:]
            return train_new(config, run_dir, command, progress, dist, callbacks)
        return continue_run(config, run_dir, record, progress, dist, callbacks)


def continue_run(
    config: TrainConfig,
    run_dir: Path,
    record: dict[str, Any],
    progress: bool,
    dist: Distributed,
    callbacks: Sequence[Callback] = (),
) -> tuple[Path, dict[str, Any]]:
    command = record.get("command", "")
    trainer = Trainer(config, run_dir, progress=progress, dist=dist, command=command, callbacks=callbacks)
    if changed := changed_inputs(
        record.get("inputs", {}), trainer.run.data.fingerprints, trainer.run.data.input_titles()
    ):
        raise UserError(
            f"cannot resume {run_dir}: {' and '.join(changed)} changed since the run started; restore "
            "the original files, or start a new run"
        )
    trainer.restore()
    if dist.is_main:
        print(f"resuming {run_dir} at step {trainer.run.state.global_step}")
    return run_dir, trainer.fit(resume=True)


def resumable_record(run_dir: Path, held: contextlib.ExitStack) -> tuple[dict[str, Any], bool]:
    """The run's record, and whether it must start again (it stopped before its first checkpoint).

    The folder is locked by `held` first: a run still training is refused, not resumed twice.
    """
    folder = RunFolder(run_dir)
    read_run_record(run_dir)  # not a run folder: said before a lock file is made beside it
    held.enter_context(folder.lock("resume"))
    folder.remove_partial_files()
    record = read_run_record(run_dir)  # again: read under the lock
    recorded_config(record["config"], str(folder.record))  # one that no longer validates: refused
    status = folder.status()
    if status is RunStatus.FINISHED:
        raise already_finished(folder)
    if status is not RunStatus.NEVER_CHECKPOINTED:
        return record, False
    print(f"{run_dir} has no checkpoint yet: starting it again from step 0 with its saved config")
    folder.clear()
    return record, True


def config_to_print(args: Sequence[str]) -> TrainConfig:
    """What `--print-config` shows: the config with every `auto` made concrete for this machine,
    as config.json will record it; only what the data decides (a max_steps of one epoch) stays None."""
    config = config_from_command(args)
    try:  # the data paths the run would record, found now (nothing downloaded)
        config = resolve_inputs(config, download=False)
    except UserError as error:
        say(f"note: {error}")  # the run would stop there: the rest is printed as given
    return resolve_settings(config, resolve_device(config.run.device), train_sizes=None)


def command(args: Sequence[str]) -> None:
    """`just train-multitask key=value ...` (under torchrun too: every rank runs it)."""
    if int(os.environ.get("RANK", "0")) > 0:  # under torchrun, rank 0 speaks for all
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (for the process's lifetime)
    resume_from, rest = resumed_run(args)
    if resume_from is not None:
        run_dir, summary = resume(resume_from, overrides=rest)
    else:
        run_dir, summary = start(config_from_args(args), command=args)
    if torch.distributed.is_initialized():  # after a failure a dead peer could make this hang: exit instead
        # Every rank arrives before any tears down: a rank still in gloo when its peer's process
        # exits aborts (SIGABRT), which failed a resumed 2-rank run that had finished its training.
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    print(format_summary(run_dir, summary))
