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

from mtl.console import end_progress_bars, say
from mtl.errors import UserError

PRINTED_ITS_ERROR = 2  # a rank's own one-line error (UserError)
LOST_A_PEER = 3  # a rank whose collective failed because another process died (mtl.cli)
INTERRUPTED = 130  # Ctrl-C or SIGTERM: every rank checkpointed, rank 0 printed the resume command


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
    with tempfile.TemporaryDirectory(prefix="mtl-ranks-") as folder:
        os.environ[RANK_MESSAGES] = folder  # the ranks inherit it: their last words come here
        try:
            torchrun.run(torchrun.parse_args(["--standalone", f"--nproc-per-node={processes}", *command]))
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


RANK_MESSAGES = "MTL_RANK_MESSAGES"  # a folder where each rank of the launcher's job leaves its message


def rank_says(message: str) -> None:
    """A command's last words (an error, an interruption), on a line of their own. Under `just
    train-distributed` a rank's go to the launcher, which says each once (N ranks failing on the
    same bad input would say it N times, between torchrun's lines); anywhere else, to stderr."""
    end_progress_bars()
    folder, rank = os.environ.get(RANK_MESSAGES), os.environ.get("RANK")
    if folder and rank is not None:
        try:
            (Path(folder) / f"rank{int(rank)}").write_text(message, encoding="utf-8")
            return
        except (OSError, ValueError):
            pass
    say(message)


def own_errors(folder: Path, failures: dict) -> str:
    """The errors the ranks that failed on their own wrote (`rank_says`): one line, each said once,
    by rank when they differ."""
    said: dict[str, list[int]] = {}
    for rank in sorted(failures):
        if failures[rank].exitcode != PRINTED_ITS_ERROR:
            continue
        try:
            text = (folder / f"rank{rank}").read_text(encoding="utf-8").strip()
        except OSError:
            continue
        said.setdefault(text.removeprefix("error: "), []).append(rank)
    if not said:
        return "a rank failed without saying why: run it with one process (just train-multitask) to see"
    if len(said) == 1:
        return next(iter(said))
    return "; ".join(f"rank {', '.join(map(str, ranks))}: {text}" for text, ranks in said.items())


def root_cause(failures: dict[int, tuple[int, float]]) -> int | None:
    """The rank whose failure stopped the job, from rank -> (exit code, time); None when a rank
    already said why (its own one-line error).

    The others are collateral: a rank that lost its peer, or that torchrun stopped with
    SIGTERM once the first one failed (gloo may also abort a rank whose peer is gone).
    """
    causes = {rank: failure for rank, failure in failures.items() if failure[0] not in COLLATERAL}
    if any(code == PRINTED_ITS_ERROR for code, _ in causes.values()):
        return None
    candidates = causes or failures
    return min(candidates, key=lambda rank: candidates[rank][1])


COLLATERAL = {LOST_A_PEER, INTERRUPTED, -signal.SIGTERM}


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
