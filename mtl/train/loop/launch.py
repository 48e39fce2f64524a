"""`just train-distributed N ...`: torchrun on this machine, with its failures said in one line.

The keys are checked here, once, before any process starts (an error per rank, under a
torchrun traceback, told the same thing N times). A rank that dies is named by rank, pid
and signal, instead of the other ranks' "Connection reset by peer".
"""

from __future__ import annotations

import logging
import os
import signal
import tempfile
from collections.abc import Sequence
from pathlib import Path

from mtl.errors import UserError
from mtl.runs import RunFolder, RunStatus
from mtl.runtime.ranks import INTERRUPTED, RANK_MESSAGES, own_errors, root_cause
from mtl.train.config.command_line import already_finished, config_from_command, resumed_run
from mtl.train.config.train_config import TrainConfig


def config_to_print(args: Sequence[str]) -> TrainConfig:
    """The config `just train-distributed N args` trains (--print-config): N is not a key."""
    from mtl.train.loop import run  # torch: only to print the config resolved for this machine

    return run.config_to_print(args[1:] if args[:1] and args[0].isdigit() else args)


def command(args: Sequence[str]) -> None:
    """`just train-distributed N key=value ...`."""
    if not args or not args[0].isdigit() or int(args[0]) < 1:
        given = repr(args[0]) if args else "nothing"
        raise UserError(
            f"train-distributed takes the number of processes first, not {given}: "
            "e.g. `just train-distributed 2 steps_nli=1000`"
        )
    processes, rest = int(args[0]), list(args[1:])
    config_from_command(rest)  # what every rank would refuse, said once before any starts
    refuse_a_finished_run(rest)
    run_torchrun(processes, ["-m", "mtl", "train-multitask", *rest], rest)


def refuse_a_finished_run(args: Sequence[str]) -> None:
    """`resume=` of a run that has finished: said here, as each rank would say it, before
    torchrun starts them (a few seconds of process starts, for one line)."""
    run_dir, _ = resumed_run(args)
    if run_dir is not None and (folder := RunFolder(run_dir)).status() is RunStatus.FINISHED:
        raise already_finished(folder)


def run_torchrun(processes: int, command: list[str], args: list[str]) -> None:
    from torch.distributed import run as torchrun  # torchrun's launcher, only when launching
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    # torchrun logs each failure with a traceback-sized report; the line below says what it means.
    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="mtl-ranks-") as folder:
        os.environ[RANK_MESSAGES] = folder  # the ranks inherit it: their last words come here
        # torchrun's own folder (its ranks' error files) in ours, removed with it: by default
        # torchrun makes a torchelastic_* folder in the temporary directory and leaves it there
        logs = ["--log-dir", str(Path(folder) / "torchrun")]
        try:
            torchrun.run(
                torchrun.parse_args(["--standalone", f"--nproc-per-node={processes}", *logs, *command])
            )
        except ChildFailedError as error:
            if {failure.exitcode for failure in error.failures.values()} == {INTERRUPTED}:
                raise KeyboardInterrupt(
                    f"every rank checkpointed: {resume_command(processes, args)}"
                ) from None
            cause = root_cause({rank: (f.exitcode, f.timestamp) for rank, f in error.failures.items()})
            if cause is None:
                raise JobFailed(own_errors(Path(folder), error.failures)) from None
            failure = error.failures[cause]
            raise JobFailed(describe_failure(cause, failure.pid, failure.exitcode, processes, args)) from None
        except KeyboardInterrupt:  # the launcher's own Ctrl-C: torchrun has stopped the ranks
            raise KeyboardInterrupt(f"stopped: {resume_command(processes, args)}") from None
        finally:
            os.environ.pop(RANK_MESSAGES, None)


def describe_failure(rank: int, pid: int, exitcode: int, processes: int, args: list[str]) -> str:
    if exitcode < 0:
        try:
            how = f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            how = f"was killed by signal {-exitcode}"
    else:
        how = f"exited with code {exitcode}"
    return f"rank {rank} (pid {pid}) {how}, so every rank stopped: {resume_command(processes, args)}"


def resume_command(processes: int, args: list[str]) -> str:
    resumed = [a for a in args if a.startswith("resume=")] or [
        a for a in args if a.startswith(("out=", "run.out="))
    ]
    target = resumed[-1].partition("=")[2] if resumed else "runs/<run>"
    return f"the run continues from its last checkpoint with `just train-distributed {processes} resume={target}`"


class JobFailed(UserError):
    """A rank failed; `quiet` when a rank has already printed why."""

    # The ranks share the launcher's terminal: a rank that died mid-line (a progress bar's) left
    # its line open, which no process can end but the one that prints next.
    after_other_output = True

    def __init__(self, message: str, quiet: bool = False):
        super().__init__(message)
        self.quiet = quiet
