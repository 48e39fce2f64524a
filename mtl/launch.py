"""`just train-distributed N ...`: torchrun on this machine, with its failures said in one line.

The keys are checked here, once, before any process starts (an error per rank, under a
torchrun traceback, told the same thing N times). A rank that dies is named by rank, pid
and signal, instead of the other ranks' "Connection reset by peer".
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Sequence

from mtl.errors import UserError

QUIET_EXIT_CODES = {2, 130}  # a rank that printed its own one-line error, or was interrupted and checkpointed


def train_distributed(args: Sequence[str]) -> None:
    from mtl.train.run import check_command

    if not args or not args[0].isdigit() or int(args[0]) < 1:
        given = repr(args[0]) if args else "nothing"
        raise UserError(
            f"train-distributed takes the number of processes first, not {given}: "
            "e.g. `just train-distributed 2 steps_nli=1000`"
        )
    processes, rest = int(args[0]), list(args[1:])
    check_command(rest)
    run_torchrun(processes, ["-m", "mtl", "train-multitask", *rest], rest)


def run_torchrun(processes: int, command: list[str], args: list[str]) -> None:
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    # torchrun logs each failure with a traceback-sized report; the line below says what it means.
    logging.getLogger("torch.distributed.elastic").setLevel(logging.CRITICAL)
    try:
        torchrun.run(torchrun.parse_args(["--standalone", f"--nproc-per-node={processes}", *command]))
    except ChildFailedError as error:
        rank, failure = error.get_first_failure()
        raise JobFailed(
            failure.exitcode, describe_failure(rank, failure.pid, failure.exitcode, processes, args)
        ) from None
    except KeyboardInterrupt:
        raise KeyboardInterrupt(
            f"every rank checkpointed: resume with `{resume_command(processes, args)}`"
        ) from None


def describe_failure(rank: int, pid: int, exitcode: int, processes: int, args: list[str]) -> str:
    if exitcode < 0:
        try:
            how = f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            how = f"was killed by signal {-exitcode}"
    else:
        how = f"exited with code {exitcode}"
    return (
        f"rank {rank} (pid {pid}) {how}, so every rank stopped: the run continues from its last checkpoint "
        f"with `{resume_command(processes, args)}`"
    )


def resume_command(processes: int, args: list[str]) -> str:
    resumed = [a for a in args if a.startswith("resume=")] or [
        a for a in args if a.startswith(("out=", "run.out="))
    ]
    target = resumed[-1].partition("=")[2] if resumed else "runs/<run>"
    return f"just train-distributed {processes} resume={target}"


class JobFailed(UserError):
    """A rank failed; `quiet` when that rank has already printed its own one-line error."""

    def __init__(self, exitcode: int, message: str):
        super().__init__(message)
        self.quiet = exitcode in QUIET_EXIT_CODES
